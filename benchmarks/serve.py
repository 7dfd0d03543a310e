"""`rehearsal serve` under load: N concurrent sessions playing reference episodes over HTTP, against
the in-process env in the same run.

Usage::

    .venv/bin/python benchmarks/serve.py [--sessions 100 1000] [--episodes 3] [--world shop] [--reps 1]

For each N, in this order:

* **in-process**: a child process holds N envs (``rehearsal_env.make``, one database each), resets
  them all, then steps them round-robin with the scripted reference agent, each session playing
  ``--episodes`` episodes. Step latency is ``env.step``; RSS is the child's.
* **http**: ``rehearsal serve`` in a child process (one worker, the default options, recording into a
  temporary directory); this process drives N concurrent sessions with ``httpx.AsyncClient`` (one
  coroutine per session, each starting ``--episodes`` episodes one after the other and playing the
  reference). All N sessions are started before the first step, so N are held at once. Step latency is
  what the client sees (queueing behind the other N-1 sessions included); RSS is the server's, sampled
  every 50 ms (peak).
* **http, one session**: the same with N = 1: the bare round trip, no queueing.

Printed per N: p50/p99 step latency, episodes/s, peak RSS, RSS per session ((peak - idle) / N), CPU
per step of the process holding the sessions (and of the HTTP client), and the ratios http /
in-process. Both sides share this machine's cores (the HTTP client is Python too), so on a small
machine the client's CPU is part of what the HTTP figures pay.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

import rehearsal_env
from rehearsal_env.agents import make_agent


@dataclass(frozen=True)
class Figures:
    """One mode's measurements."""

    mode: str
    sessions: int
    episodes: int
    steps: int
    wall_s: float
    p50_ms: float
    p99_ms: float
    idle_rss_mb: float
    peak_rss_mb: float
    verified: int
    cpu_ms_per_step: float
    """CPU of the process that holds the sessions (the server's, or the in-process env's) per step."""
    client_cpu_ms_per_step: float = 0.0
    """CPU of the HTTP client (this process) per step; 0 in-process."""

    @property
    def episodes_per_s(self) -> float:
        return self.episodes / self.wall_s

    @property
    def rss_per_session_mb(self) -> float:
        return (self.peak_rss_mb - self.idle_rss_mb) / self.sessions


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    """Resident set size of a process, from /proc (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def scenarios(world: str) -> list[str]:
    return [s.id for s in rehearsal_env.load_world(world).scenarios()]


# -- in-process (a child process, so its RSS is its own) --------------------------------------------
def in_process(world: str, sessions: int, episodes: int) -> dict[str, Any]:
    ids = scenarios(world)
    warm = rehearsal_env.make(f"{world}/{ids[0]}")
    warm.reset(seed=0)
    warm.close()  # the world and its snapshot are loaded once per process, not per session
    idle = rss_mb(os.getpid())
    envs = [rehearsal_env.make(f"{world}/{ids[i % len(ids)]}") for i in range(sessions)]
    agents: list[Any] = [None] * sessions
    state: list[tuple[str, dict[str, Any]]] = []
    started = time.perf_counter()
    for i, env in enumerate(envs):
        agents[i] = make_agent("reference", env.scenario)
        state.append(env.reset(seed=0))
    peak = rss_mb(os.getpid())
    cpu0 = time.process_time()
    left = [episodes] * sessions
    latencies: list[float] = []
    done = verified = 0
    while any(left):
        for i, env in enumerate(envs):
            if not left[i]:
                continue
            observation, info = state[i]
            action = agents[i](observation, info)
            t0 = time.perf_counter()
            observation, _, terminated, truncated, step_info = env.step(action)
            latencies.append((time.perf_counter() - t0) * 1000)
            state[i] = (observation, {**info, **step_info})
            if terminated or truncated:
                done += 1
                verified += step_info["outcome"] == "verified"
                left[i] -= 1
                if left[i]:
                    agents[i] = make_agent("reference", env.scenario)
                    state[i] = env.reset(seed=0)
        peak = max(peak, rss_mb(os.getpid()))
    wall = time.perf_counter() - started
    cpu = (time.process_time() - cpu0) * 1000 / len(latencies)
    return asdict(Figures("in-process", sessions, done, len(latencies), wall, percentile(latencies, 0.5),
                          percentile(latencies, 0.99), idle, peak, verified, cpu))


# -- over HTTP ---------------------------------------------------------------------------------------
class Server:
    """``rehearsal serve`` in a child process on a free port."""

    def __init__(self, world: str, sessions: int, out: Path) -> None:
        rehearsal = Path(sys.executable).with_name("rehearsal")
        self.proc = subprocess.Popen(
            [str(rehearsal), "serve", "--port", "0", "--world", world, "--max-sessions", str(sessions),
             "--out", str(out), "--idle-timeout", "600"], stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if "listening on" not in line:
            raise RuntimeError(f"the server did not start: {line!r}")
        self.url = line.split("listening on ", 1)[1].split()[0]
        for _ in range(300):
            try:
                httpx.get(f"{self.url}/health", timeout=5).raise_for_status()
                break
            except httpx.TransportError:
                time.sleep(0.1)
        first = httpx.post(f"{self.url}/v1/episodes", json={"world": world, "scenario": scenarios(world)[0]}).json()
        httpx.delete(f"{self.url}/v1/episodes/{first['episode_id']}")  # load the world and its snapshot once
        self.peak = self.idle = rss_mb(self.proc.pid)
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.05):
            self.peak = max(self.peak, rss_mb(self.proc.pid))

    def stop(self) -> None:
        self._stop.set()
        self._sampler.join()
        self.proc.terminate()
        self.proc.wait(60)


async def drive(url: str, world: str, sessions: int, episodes: int,
                server_pid: int) -> tuple[list[float], int, int, float, float, float]:
    """N sessions, each its own client and connection (httpx's pool scans its connections per request,
    so one pool of N connections would measure the client), started before the first step."""
    ids = scenarios(world)
    world_obj = rehearsal_env.load_world(world)
    latencies: list[float] = []
    counts = {"episodes": 0, "verified": 0}
    clients = [httpx.AsyncClient(base_url=url, timeout=600) for _ in range(sessions)]

    async def send(http: httpx.AsyncClient, path: str, body: dict[str, Any]) -> httpx.Response:
        for attempt in range(5):  # a lost response is sent again: step_index / request_id make it safe
            try:
                r = await http.post(path, json=body)
                r.raise_for_status()
                return r
            except httpx.TransportError:
                if attempt == 4:
                    raise
                await asyncio.sleep(0.1)
        raise AssertionError("unreachable")

    async def start(i: int) -> dict[str, Any]:
        body = {"world": world, "scenario": ids[i % len(ids)], "seed": 0, "request_id": uuid.uuid4().hex,
                "agent": {"name": "reference", "version": "bench"}}
        return dict((await send(clients[i], "/v1/episodes", body)).json())

    async def play(i: int, started: dict[str, Any]) -> None:
        for k in range(episodes):
            if k:
                started = await start(i)
            agent = make_agent("reference", world_obj.scenario(started["scenario"]))
            observation, info = started["observation"], {"tools": started["tools"]}
            index = 0
            while True:
                body = {"action": agent(observation, info), "step_index": index}
                t0 = time.perf_counter()
                r = await send(clients[i], f"/v1/episodes/{started['episode_id']}/step", body)
                latencies.append((time.perf_counter() - t0) * 1000)
                result = r.json()
                observation, index = result["observation"], result["step_index"]
                if result["terminated"] or result["truncated"]:
                    counts["episodes"] += 1
                    counts["verified"] += result["verdict"]["outcome"] == "verified"
                    break

    try:
        opened = await asyncio.gather(*(start(i) for i in range(sessions)))  # N sessions held at once
        began, server0, client0 = time.perf_counter(), cpu_s(server_pid), time.process_time()
        await asyncio.gather(*(play(i, s) for i, s in enumerate(opened)))
        wall = time.perf_counter() - began
        server_cpu, client_cpu = cpu_s(server_pid) - server0, time.process_time() - client0
    finally:
        await asyncio.gather(*(c.aclose() for c in clients))
    steps = max(1, len(latencies))
    return (latencies, counts["episodes"], counts["verified"], wall, server_cpu * 1000 / steps,
            client_cpu * 1000 / steps)


def over_http(world: str, sessions: int, episodes: int) -> Figures:
    with tempfile.TemporaryDirectory(prefix="rehearsal-bench-serve-") as out:
        server = Server(world, sessions, Path(out))
        try:
            latencies, done, verified, wall, cpu, client_cpu = asyncio.run(
                drive(server.url, world, sessions, episodes, server.proc.pid))
        finally:
            server.stop()
        return Figures("http" if sessions > 1 else "http, one session", sessions, done, len(latencies), wall,
                       percentile(latencies, 0.5), percentile(latencies, 0.99), server.idle, server.peak, verified,
                       cpu, client_cpu)


def child(world: str, sessions: int, episodes: int) -> Figures:
    done = subprocess.run([sys.executable, __file__, "--child", world, str(sessions), str(episodes)],
                          capture_output=True, text=True, check=True)
    return Figures(**json.loads(done.stdout.strip().splitlines()[-1]))


def show(f: Figures) -> str:
    return (f"{f.mode:<18}{f.sessions:>6}{f.episodes:>7}{f.steps:>7}{f.p50_ms:>9.2f}{f.p99_ms:>9.2f}"
            f"{f.episodes_per_s:>9.1f}{f.peak_rss_mb:>9.0f}{f.rss_per_session_mb:>9.2f}{f.cpu_ms_per_step:>9.2f}"
            f"{f.client_cpu_ms_per_step:>9.2f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sessions", type=int, nargs="+", default=[100, 1000],
                   help="concurrent sessions (default 100 1000)")
    p.add_argument("--episodes", type=int, default=3, help="episodes each session plays (default 3)")
    p.add_argument("--world", default="shop")
    p.add_argument("--json", type=Path, help="also write the figures as JSON here")
    p.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        world, sessions, episodes = args.child
        print(json.dumps(in_process(world, int(sessions), int(episodes))))
        return
    print(f"{os.cpu_count()} CPUs; world {args.world}; reference episodes; {args.episodes} per session")
    print(f"{'mode':<18}{'N':>6}{'eps':>7}{'steps':>7}{'p50 ms':>9}{'p99 ms':>9}{'eps/s':>9}{'RSS MB':>9}"
          f"{'MB/sess':>9}{'cpu ms':>9}{'cli cpu':>9}")
    single = over_http(args.world, 1, args.episodes * 4)
    print(show(single), flush=True)
    results: list[dict[str, Any]] = [asdict(single)]
    for n in args.sessions:
        local = child(args.world, n, args.episodes)
        print(show(local), flush=True)
        remote = over_http(args.world, n, args.episodes)
        print(show(remote), flush=True)
        print(f"  N={n}: http/in-process  p50 {remote.p50_ms / local.p50_ms:.1f}x "
              f"(+{remote.p50_ms - local.p50_ms:.2f} ms)"
              f"  episodes/s {remote.episodes_per_s / local.episodes_per_s:.2f}x"
              f"  RSS/session {remote.rss_per_session_mb / local.rss_per_session_mb:.2f}x"
              f"  CPU/step {remote.cpu_ms_per_step / local.cpu_ms_per_step:.1f}x"
              f"  per-step cost at saturation {1000 * remote.wall_s / remote.steps:.2f} ms vs "
              f"{1000 * local.wall_s / local.steps:.2f} ms", flush=True)
        results += [asdict(local), asdict(remote)]
    print(f"  one session over HTTP: p50 {single.p50_ms:.2f} ms per step (the bare round trip)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
