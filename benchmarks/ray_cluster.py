"""The runner's Ray pool on a 2-node local Ray cluster: episodes/s per node against one node, and the driver's share.

Usage::

    flock /tmp/bench.lock .venv/bin/python benchmarks/ray_cluster.py [--repeats R] [--reps K] [--cpus-per-node C]

Starts a real cluster on 127.0.0.1 (``ray start --head`` and ``ray start --address``, each node with
``--cpus-per-node`` CPUs, as ``tests/test_pool.py`` does; stopped by killing its own processes, never
``ray stop``) and joins it as the driver (``rehearsal run --ray-address``'s path: :func:`run_on_ray` with a
:class:`RayPool`). With both nodes up, each repetition plays the same plan (the world's scenarios x
``--repeats``, the reference agent, SQLite in memory) on a pool of one node's worth of workers and on a
pool of both nodes' (the pools started apart from the timing, one warm run each), interleaved.

Printed: episodes/s of each pool, per node, per node against one node (the scaling), the driver's CPU ms per
episode, and the cores each kind of process kept busy (CPU seconds over the wall time, from ``/proc``): the
driver, the workers (the actors) and Ray's own services on the nodes (GCS, raylets, agents). The driver writes the
parts and runs Ray's calls; where it shares the workers' cores (every process here shares this machine's
CPUs), its share comes out of theirs: the figure says how much of a core to leave it on the head node
(``ray start --head --num-cpus=0`` keeps workers off the head, so the driver and Ray's own services have
the head to themselves).
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # loopback only; the cluster and the driver agree

RAY = Path(sys.executable).with_name("ray")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen([str(RAY), "start", *args, "--block", "--disable-usage-stats"], env=dict(os.environ),
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


def _wait_for(what: str, ok: object, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not ok():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} within {timeout:.0f} s")
        time.sleep(0.3)


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def _tree_cpu(roots: list[int]) -> dict[str, float]:
    """CPU seconds so far of every process under ``roots`` (the nodes' ``ray start``), by kind: ``workers`` (Ray
    worker processes: the actors) and ``ray`` (the nodes' own services: GCS, raylets, agents)."""
    stats: dict[int, tuple[int, float, str]] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/stat").read_text()
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        fields = raw[raw.rindex(")") + 2:].split()
        stats[int(entry)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick, cmd.decode(errors="replace"))
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    out = {"workers": 0.0, "ray": 0.0}
    stack = list(roots)
    while stack:
        pid = stack.pop()
        stack.extend(children.get(pid, ()))
        if pid in stats:
            _, cpu, line = stats[pid]
            out["workers" if "default_worker" in line or line.startswith("ray::") else "ray"] += cpu
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--world", default="shop")
    p.add_argument("--repeats", type=int, default=8, help="episodes per scenario (default 8)")
    p.add_argument("--reps", type=int, default=3, help="timed runs of each pool (default 3; medians printed)")
    p.add_argument("--cpus-per-node", type=int, default=1, help="CPUs (workers) of each node (default 1)")
    args = p.parse_args()
    if not RAY.is_file():
        print(f"no `ray` command beside {sys.executable}: pip install 'rehearsal-env[ray]'", file=sys.stderr)
        return 2

    import ray

    from rehearsal_env.runner import RayPool, RunConfig, plan, run_on_ray, world_for

    config = RunConfig(world=args.world, repeats=args.repeats, batch_size=32)
    n = len(plan(config, world_for(config)))
    temp = Path(tempfile.mkdtemp(prefix="rb", dir="/tmp"))  # short: Ray's socket paths are bounded
    port = _free_port()
    cpus = f"--num-cpus={args.cpus_per_node}"
    head = _start(["--head", "--node-ip-address=127.0.0.1", f"--port={port}", cpus, f"--temp-dir={temp}",
                   "--include-dashboard=false"], temp / "head.log")
    second: subprocess.Popen[bytes] | None = None
    outs = iter(range(1 << 30))
    rates: dict[int, list[float]] = {1: [], 2: []}
    driver: dict[int, list[tuple[float, float]]] = {1: [], 2: []}
    shares: dict[int, list[dict[str, float]]] = {1: [], 2: []}
    try:
        _wait_for("the Ray head did not listen", lambda: _listening(port))
        second = _start([f"--address=127.0.0.1:{port}", "--node-ip-address=127.0.0.1", cpus], temp / "second.log")
        ray.init(address=f"127.0.0.1:{port}", include_dashboard=False, log_to_driver=False,
                 logging_level=logging.ERROR)
        _wait_for("the second node did not join", lambda: sum(1 for x in ray.nodes() if x["Alive"]) >= 2)
        print(f"{n} episodes ({args.world}, {args.repeats} repeats), batch 32; 2 nodes on 127.0.0.1 with "
              f"{args.cpus_per_node} CPU(s) each; {args.reps} reps; this machine: {os.cpu_count()} CPUs", flush=True)
        for _ in range(args.reps):
            for nodes in (1, 2):
                with RayPool(config, nodes * args.cpus_per_node) as pool:
                    run_on_ray(config, temp / f"run-{next(outs)}", workers=nodes * args.cpus_per_node, pool=pool)
                    roots = [head.pid, second.pid]
                    tree, cpu, began = _tree_cpu(roots), time.process_time(), time.perf_counter()
                    run_on_ray(config, temp / f"run-{next(outs)}", workers=nodes * args.cpus_per_node, pool=pool)
                    wall, cpu = time.perf_counter() - began, time.process_time() - cpu
                    after = _tree_cpu(roots)
                shares[nodes].append({"driver": cpu / wall, **{k: (after[k] - tree[k]) / wall for k in tree}})
                rates[nodes].append(n / wall)
                driver[nodes].append((cpu / n * 1000, cpu / wall))
    finally:
        ray.shutdown()
        if second is not None:
            _kill(second)
        _kill(head)
        shutil.rmtree(temp, ignore_errors=True)
    one = statistics.median(rates[1])
    print(f"\n{'pool':<8}{'episodes/s':>11}{'per node':>10}{'per node vs 1':>15}{'driver ms/ep':>14}"
          f"{'cores busy: driver':>20}{'workers':>9}{'ray':>6}")
    for nodes in (1, 2):
        rate = statistics.median(rates[nodes])
        ms = statistics.median(d[0] for d in driver[nodes])
        busy = {k: statistics.median(x[k] for x in shares[nodes]) for k in ("driver", "workers", "ray")}
        print(f"{f'{nodes} node':<8}{rate:>11.0f}{rate / nodes:>10.0f}{rate / nodes / one:>15.2f}{ms:>14.2f}"
              f"{busy['driver']:>20.2f}{busy['workers']:>9.2f}{busy['ray']:>6.2f}")
    print("\nrates per rep:", {k: [round(x) for x in v] for k, v in rates.items()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
