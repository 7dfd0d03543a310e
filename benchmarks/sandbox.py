"""The Docker sandbox: reset next to restarting its containers, and the step latency of an http tool.

    python benchmarks/sandbox.py [--world reviews] [--resets 40] [--restarts 3] [--steps 60] [--json]

One sandbox of the world is started (network, PostgreSQL, emulator, application). Then, in the
same run:

- **reset**: play one reference episode (so the application has committed writes), then time
  ``reset()``: the row-level restore of the application's database, plus the verification
  that the digest and the probe request answer as after the first start. Also timed without
  the verification (``verify_reset=False`` is what the restore alone costs).
- **restart** (what WebArena does between episodes): remove the sandbox's containers and
  network and start them again (database initialised and seeded, emulator and application
  health-checked), checked to reach the same digest.
- **step**: ``env.step`` of an http read tool (``get_pull_request``) and of an http write tool
  (``post_comment``, each its own committed transaction in the application, the email emulator
  called), and the bare HTTP request without the env, for the env's own overhead.

Medians, and the ratio restart / reset. Restarts are few (each takes seconds). The report also
says what the sandbox enforced while it was measured (issue 32): whether the host rule was in place
and the application container's limits, so a figure before and after hardening can be told apart.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import time
from typing import Any

from rehearsal_env.agents import make_agent
from rehearsal_env.backends import digest, open_database
from rehearsal_env.env import RehearsalEnv
from rehearsal_env.runner import run_episode
from rehearsal_env.sandbox import SandboxDatabase
from rehearsal_env.worlds import load_world


def _median_ms(xs: list[float]) -> float:
    return round(statistics.median(xs) * 1000, 3)


def _enforced(db: SandboxDatabase) -> dict[str, Any]:
    """What the running sandbox enforces (read from Docker and the INPUT chain, not from our settings)."""
    import subprocess

    network = db.sandbox.network.id[:12]
    rules = subprocess.run(["iptables", "-w", "-S", "INPUT"], capture_output=True, text=True).stdout \
        if shutil.which("iptables") else ""
    app = db.sandbox.containers.get("app")
    host = app.container.attrs["HostConfig"] if app is not None else {}
    return {"host_rule": f"br-{network}" in rules, "user": app.container.attrs["Config"]["User"] if app else None,
            "read_only": host.get("ReadonlyRootfs"), "cap_drop": host.get("CapDrop"),
            "pids": host.get("PidsLimit"), "memory_mb": (host.get("Memory") or 0) >> 20,
            "cpus": (host.get("NanoCpus") or 0) / 1e9}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--world", default="reviews")
    parser.add_argument("--resets", type=int, default=40)
    parser.add_argument("--restarts", type=int, default=3)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    world = load_world(args.world)
    scenarios = [s for s in world.scenarios() if s.role == "maintainer"]
    started = time.perf_counter()
    db = open_database(world, "docker")
    assert isinstance(db, SandboxDatabase)
    first_start = time.perf_counter() - started
    enforced = _enforced(db)
    times: dict[str, list[float]] = {"reset": [], "reset_restore_only": [], "restart": [],
                                     "step_http_read": [], "step_http_write": [], "bare_http_read": []}
    try:
        seeded = digest(db)
        for i in range(args.resets):
            scenario = scenarios[i % len(scenarios)]
            run_episode(RehearsalEnv(scenario, world, database=db), make_agent("reference", scenario))
            db.verify_reset = i % 2 == 0
            t = time.perf_counter()
            db.reset()
            times["reset" if db.verify_reset else "reset_restore_only"].append(time.perf_counter() - t)
        db.verify_reset = True
        assert digest(db) == seeded, "a reset did not reach the seeded digest"

        scenario = world.scenario(next(s.id for s in scenarios if s.id.startswith("comment-once")))
        env = RehearsalEnv(scenario, world, database=db, stress=False)
        env.reset(seed=0)
        read = json.dumps({"tool": "get_pull_request", "args": {"repo": "atlas", "number": 4}})
        for i in range(args.steps):
            if env.episode.turn >= scenario.turn_limit - 2:
                env.reset(seed=0)
            write = json.dumps({"tool": "post_comment", "args": {"repo": "atlas", "number": 4, "body": f"c{i}"}})
            for key, action in (("step_http_read", read), ("step_http_write", write)):
                t = time.perf_counter()
                env.step(action)
                times[key].append(time.perf_counter() - t)
            t = time.perf_counter()
            db.request("GET", "/repos/atlas/pulls/4", query={}, body=None, headers={"X-Actor": "review-bot"})
            times["bare_http_read"].append(time.perf_counter() - t)
        db.reset()
    finally:
        db.close()

    for _ in range(args.restarts):
        t = time.perf_counter()
        again = open_database(world, "docker")
        try:
            times["restart"].append(time.perf_counter() - t)
            assert digest(again) == seeded, "a restarted sandbox did not reach the seeded digest"
        finally:
            t2 = time.perf_counter()
            again.close()
            times["restart"][-1] += time.perf_counter() - t2  # a restart removes the old containers too

    medians = {k: _median_ms(v) for k, v in times.items() if v}
    report: dict[str, Any] = {
        "world": world.name, "first_start_s": round(first_start, 2), "enforced": enforced,
        "median_ms": medians, "counts": {k: len(v) for k, v in times.items()},
        "restart_over_reset": round(medians["restart"] / medians["reset"], 1),
        "restart_over_restore_only": round(medians["restart"] / medians["reset_restore_only"], 1),
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"world {world.name}: sandbox first start {first_start:.1f}s; enforced: {enforced}")
    for key, value in medians.items():
        print(f"  {key:<20} median {value:>10.2f} ms  (n={len(times[key])})")
    print(f"  restart / reset (verified): {report['restart_over_reset']}x; "
          f"restart / restore only: {report['restart_over_restore_only']}x")


if __name__ == "__main__":
    main()
