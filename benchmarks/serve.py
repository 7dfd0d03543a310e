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

With ``--fairness`` (issue 21: no session can hurt another), instead: one well-behaved client (one API
key, one session playing reference shop episodes) alone on a fresh ``rehearsal serve --keys``, then on
another fresh server beside three hostile keys, each with several sessions sending one attack as
``run_sql`` of the analytics world step after step: the heap attack (~57 MB of DISTINCT strings in one
statement), a CPU-bound three-way cross join and an endless recursive count (a 5 s query each time).
Printed: the victim's steps, episodes, errors, p50/p99 step latency and ``/health`` p50 in each phase, and
attacked/solo ratios (the issue asks p50 and errors within 2x); ``--compare`` adds the obvious
alternative, the same attacks on a server whose keys share one thread pool with no per-key limit::

    flock /tmp/bench.lock .venv/bin/python benchmarks/serve.py --fairness --compare

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
import rehearsal_env.serve
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
UNRECORDED = ("import sys; from rehearsal_env.serve import ServeConfig, run_server; "
              "run_server(ServeConfig(worlds=(sys.argv[1],), max_sessions=int(sys.argv[2]), idle_timeout=600), "
              "port=0, on_listen=lambda url: print(f'listening on {url}', flush=True))")
"""The same server as ``rehearsal serve`` with records off (``ServeConfig.out`` None; the command always records)."""


def listening_url(proc: subprocess.Popen[str]) -> str:
    """The address a server started with ``--port 0`` prints first ("listening on URL")."""
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "listening on" not in line:
        raise RuntimeError(f"the server did not start: expected 'listening on URL' first, got {line!r}")
    return line.split("listening on ", 1)[1].split()[0]


class Server:
    """``rehearsal serve`` in a child process on a free port (``out`` None: the same server recording nothing)."""

    def __init__(self, world: str, sessions: int, out: Path | None) -> None:
        rehearsal = Path(sys.executable).with_name("rehearsal")
        argv = [sys.executable, "-c", UNRECORDED, world, str(sessions)] if out is None else [
            str(rehearsal), "serve", "--port", "0", "--world", world, "--max-sessions", str(sessions),
            "--out", str(out), "--idle-timeout", "600"]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        self.url = listening_url(self.proc)
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


# -- fairness: a well-behaved client alone, then beside hostile keys ---------------------------------
HOSTILE_SQL = {
    # ~57 MB of distinct 100-character strings held by one statement's sorter (the heap attack)
    "heap": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c LIMIT 570000) "
            "SELECT count(DISTINCT x || '" + "x" * 100 + "') AS n FROM c",
    # a three-way cross join of the warehouse's orders (CPU until the 5 s statement deadline)
    "cpu": "SELECT count(*) AS n FROM orders a, orders b, orders c WHERE a.id + b.id + c.id = -1",
    # an endless recursive count (a 5 s query, over and over)
    "slow": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) AS n FROM c",
}
"""The hostile keys' queries (``run_sql`` of the analytics world), one key per attack."""


@dataclass(frozen=True)
class Victim:
    """What the well-behaved client saw in one phase."""

    phase: str
    steps: int
    episodes: int
    verified: int
    errors: int
    """HTTP errors (4xx/5xx other than a refused start) and requests that got no response."""
    p50_ms: float
    p99_ms: float
    health_p50_ms: float
    hostile_steps: int = 0
    """Steps the hostile keys completed from their start to the victim's end (how hard they pushed)."""


def serve_with_keys(worlds: list[str], out: Path,
                    extra: list[str]) -> tuple[subprocess.Popen[str], str, dict[str, str]]:
    """``rehearsal serve`` with a keys file holding a victim key and one key per attack."""
    keys_file = out / "keys.json"
    store = rehearsal_env.serve.KeyStore(keys_file)
    keys = {name: store.create("evaluate", name)[1] for name in ("victim", *HOSTILE_SQL)}
    rehearsal = Path(sys.executable).with_name("rehearsal")
    args = [str(rehearsal), "serve", "--port", "0", "--max-sessions", "200", "--out", str(out / "runs"),
            "--idle-timeout", "600", "--keys", str(keys_file), *extra]
    for w in worlds:
        args += ["--world", w]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    url = listening_url(proc)
    for _ in range(600):
        try:
            httpx.get(f"{url}/health", timeout=5).raise_for_status()
            break
        except httpx.TransportError:
            time.sleep(0.1)
    return proc, url, keys


def attack(url: str, kind: str, key: str, sessions: int, seconds: float, scenario: str) -> None:
    """One hostile key: ``sessions`` sessions sending its query step after step for ``seconds``
    (run in a child process; prints a line per step completed, so that the parent can count them when it
    stops the attack)."""
    headers = {"Authorization": f"Bearer {key}"}
    action = json.dumps({"tool": "run_sql", "args": {"sql": HOSTILE_SQL[kind]}})
    stop = time.monotonic() + seconds

    async def one(http: httpx.AsyncClient) -> None:
        while time.monotonic() < stop:
            r = await http.post("/v1/episodes", json={"world": "analytics", "scenario": scenario,
                                                      "agent": {"name": f"hostile-{kind}", "version": "1"}})
            if r.status_code != 201:
                await asyncio.sleep(0.5)
                continue
            eid, index = r.json()["episode_id"], 0
            while time.monotonic() < stop:
                r = await http.post(f"/v1/episodes/{eid}/step", json={"action": action, "step_index": index})
                if r.status_code != 200:
                    break
                print("step", flush=True)
                index = r.json()["step_index"]
                if r.json()["terminated"] or r.json()["truncated"]:
                    break

    async def main() -> None:
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120) as http:
            print("ready", flush=True)
            await asyncio.gather(*(one(http) for _ in range(sessions)))

    asyncio.run(main())


def victim(url: str, key: str, seconds: float, phase: str) -> Victim:
    """The well-behaved client: one session playing reference episodes of the shop for ``seconds``; every
    20th step also times ``/health``."""
    world = rehearsal_env.load_world("shop")
    ids = scenarios("shop")
    latencies: list[float] = []
    health: list[float] = []
    errors = episodes = verified = 0
    stop = time.monotonic() + seconds
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=120) as http:
        while time.monotonic() < stop:
            scenario = ids[episodes % len(ids)]
            try:
                r = http.post("/v1/episodes", json={"world": "shop", "scenario": scenario,
                                                    "agent": {"name": "victim", "version": "1"}})
            except httpx.TransportError:
                errors += 1
                continue
            if r.status_code != 201:
                errors += 1
                continue
            started = r.json()
            agent = make_agent("reference", world.scenario(scenario))
            observation, info, index = started["observation"], {"tools": started["tools"]}, 0
            while True:
                t0 = time.perf_counter()
                try:
                    r = http.post(f"/v1/episodes/{started['episode_id']}/step",
                                  json={"action": agent(observation, info), "step_index": index})
                except httpx.TransportError:
                    errors += 1
                    break
                latencies.append((time.perf_counter() - t0) * 1000)
                if r.status_code != 200:
                    errors += 1
                    break
                result = r.json()
                observation, index = result["observation"], result["step_index"]
                if len(latencies) % 20 == 0:
                    t0 = time.perf_counter()
                    http.get("/health")
                    health.append((time.perf_counter() - t0) * 1000)
                if result["terminated"] or result["truncated"]:
                    episodes += 1
                    verified += result["verdict"]["outcome"] == "verified"
                    break
    return Victim(phase, len(latencies), episodes, verified, errors, percentile(latencies, 0.5),
                  percentile(latencies, 0.99), percentile(health or [0.0], 0.5))


def fairness_phase(phase: str, seconds: float, sessions: dict[str, int], extra: list[str]) -> Victim:
    """A fresh server; the victim alone (no ``sessions``) or beside the hostile keys, after they ramp up."""
    with tempfile.TemporaryDirectory(prefix="rehearsal-bench-fair-") as tmp:
        proc, url, keys = serve_with_keys(["shop", "analytics"], Path(tmp), extra)
        attackers: list[subprocess.Popen[str]] = []
        try:
            victim(url, keys["victim"], 2.0, "warm-up")
            ramp = 8.0 if sessions else 0.0
            target = scenarios("analytics")[0]
            for kind, n in sessions.items():
                attackers.append(subprocess.Popen(
                    [sys.executable, __file__, "--attack", url, kind, keys[kind], str(n), str(ramp + seconds + 600),
                     target], stdout=subprocess.PIPE, text=True))
            for a in attackers:  # each attacker has started (imports done) before the clock runs
                assert a.stdout is not None and a.stdout.readline().strip() == "ready"
            time.sleep(ramp)  # every hostile session is mid-query, and known slow, before the victim starts
            seen = victim(url, keys["victim"], seconds, phase)
            hostile = 0
            for a in attackers:  # stop the attack now: its queued steps would take minutes to drain
                a.kill()
                out, _ = a.communicate(timeout=60)
                hostile += out.count("step")
            return Victim(**{**asdict(seen), "hostile_steps": hostile})
        finally:
            for a in attackers:
                if a.poll() is None:
                    a.kill()
            proc.terminate()
            proc.wait(120)


def show_victim(v: Victim) -> str:
    return (f"{v.phase:<34}{v.steps:>7}{v.episodes:>6}{v.verified:>6}{v.errors:>7}{v.p50_ms:>9.2f}{v.p99_ms:>9.1f}"
            f"{v.health_p50_ms:>10.2f}{v.hostile_steps:>9}")


def fairness(seconds: float, sessions: dict[str, int], compare: bool) -> list[Victim]:
    """The issue's figure: the victim's step p50 and errors alone and beside the attacks (ratio <= 2 met)."""
    print(f"{os.cpu_count()} CPUs; victim: one session of reference shop episodes for {seconds:g} s; hostile keys "
          f"(analytics run_sql): " + ", ".join(f"{k} x{n}" for k, n in sessions.items()))
    print(f"{'phase':<34}{'steps':>7}{'eps':>6}{'ver':>6}{'errors':>7}{'p50 ms':>9}{'p99 ms':>9}"
          f"{'/health':>10}{'hostile':>9}")
    solo = fairness_phase("victim alone", seconds, {}, [])
    print(show_victim(solo), flush=True)
    attacked = fairness_phase("victim + attacks (fair shares)", seconds, sessions, [])
    print(show_victim(attacked), flush=True)
    results = [solo, attacked]
    if compare:  # the obvious alternative: one thread pool for everyone (a key may take every thread)
        unfair = fairness_phase("victim + attacks (no per-key share)", seconds, sessions,
                                ["--threads-per-key", "8", "--max-sessions-per-key", "200"])
        print(show_victim(unfair), flush=True)
        results.append(unfair)
    p50 = attacked.p50_ms / solo.p50_ms
    errors_ok = attacked.errors <= 2 * solo.errors
    print(f"  attacked/solo: step p50 {p50:.2f}x ({'met' if p50 <= 2 else 'NOT met'}: at most 2x), errors "
          f"{attacked.errors} vs {solo.errors} ({'met' if errors_ok else 'NOT met'}), steps "
          f"{attacked.steps / max(1, solo.steps):.2f}x")
    if compare:
        print(f"  without per-key shares: step p50 {results[2].p50_ms / solo.p50_ms:.2f}x, errors {results[2].errors}, "
              f"steps {results[2].steps / max(1, solo.steps):.2f}x")
    return results


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sessions", type=int, nargs="+", default=[100, 1000],
                   help="concurrent sessions (default 100 1000)")
    p.add_argument("--episodes", type=int, default=3, help="episodes each session plays (default 3)")
    p.add_argument("--world", default="shop")
    p.add_argument("--json", type=Path, help="also write the figures as JSON here")
    p.add_argument("--fairness", action="store_true",
                   help="instead: a well-behaved client alone, then beside hostile keys (heap, CPU and slow queries)")
    p.add_argument("--seconds", type=float, default=20.0, help="--fairness: seconds the victim plays per phase")
    p.add_argument("--hostile", nargs=3, type=int, default=[3, 3, 8], metavar=("HEAP", "CPU", "SLOW"),
                   help="--fairness: sessions per hostile key (default 3 3 8)")
    p.add_argument("--compare", action="store_true",
                   help="--fairness: also run the attacks on a server without per-key shares")
    p.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    p.add_argument("--attack", nargs=6, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.attack:
        url, kind, key, n, seconds, scenario = args.attack
        attack(url, kind, key, int(n), float(seconds), scenario)
        return
    if args.fairness:
        found = fairness(args.seconds, dict(zip(HOSTILE_SQL, args.hostile, strict=True)), args.compare)
        if args.json:
            args.json.write_text(json.dumps([asdict(v) for v in found], indent=2) + "\n")
        return
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
