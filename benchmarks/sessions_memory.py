"""Memory of many concurrent sessions: the shared SQLite snapshot against one copy per session (issue 24 §4).

Usage::

    flock /tmp/bench.lock .venv/bin/python benchmarks/sessions_memory.py [--quick]

Each row is one child process (so its RSS is its own), in one of two modes, in the same run:

* **shared** (the default since issue 24 §4): a session reads the world's snapshot, held once per process,
  until its first write; from then until its next reset it has its own copy;
* **private** (``REHEARSAL_SQLITE_SHARE_SNAPSHOTS=0``, the behaviour before): every session holds its own
  deserialized copy from its first reset.

and in one of two places: **in-process** (a child holds N envs made by ``rehearsal_env.make``) or **http**
(``rehearsal serve`` in a child process, N sessions started over HTTP by this process; the server's RSS).

For each row: the process's RSS once the world is loaded (``base``), after N sessions were started and
reset with none written (**idle**: a session waiting for its first model reply), and after M of them played
the scripted reference up to and including the step that first wrote to its database (**mid-episode**; in
process: the first step after which ``db.touched()`` is not empty; over HTTP: the first writing tool call that
answered ``ok``; a call refused by an injected fault writes nothing); ``peak`` is the
process's high-water mark (``VmHWM``; sampled every 50 ms for the server). Per session: (idle - base) / N,
and the added cost of a session that wrote, (mid - idle) / M. Timing: the median reset (in-process) and the
median step of the first writing call (where a shared session makes its copy). Rows whose private copies
would not fit this machine (10,000 private shop sessions: ~16 GB) are estimated from the 1,000 row and
marked so.

Then the steady state, the serial runner's shape: one env per scenario playing ``--loop-episodes`` reference
episodes round robin, in both modes: the median episode (reset and every step) and the median reset. A
shared session pays its copy at its first write instead of at its reset; this shows what that costs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

import rehearsal_env
from rehearsal_env.agents import make_agent

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve import listening_url  # noqa: E402  (benchmarks/serve.py: the address a started server prints)

GOAL_MB = 4096
"""The issue's goal: 10,000 concurrent shop sessions in at most 4 GB."""


def status_mb(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} for process {pid}")


def pss_mb(pid: int) -> float:
    """The process's proportional set size: each page counted once however many mappings share it (a session's copy
    on write by page maps the snapshot's shared pages once per session; ``VmRSS`` counts them once per mapping)."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no Pss for process {pid}")


def scenario_ids(world: str) -> list[str]:
    return [s.id for s in rehearsal_env.load_world(world).scenarios()]


def tool_of(action: str) -> str:
    return str(json.loads(action).get("tool", ""))


# -- in process ----------------------------------------------------------------------------------------
def in_process(world: str, sessions: int, mid: int) -> dict[str, Any]:
    ids = scenario_ids(world)
    warm = rehearsal_env.make(f"{world}/{ids[0]}")
    observation, info = warm.reset(seed=0)
    agent = make_agent("reference", warm.scenario)
    while True:  # one whole episode: every module and the world's snapshot are loaded before the base
        observation, _, terminated, truncated, step = warm.step(agent(observation, info))
        if terminated or truncated:
            break
    warm.close()
    pid = os.getpid()
    base, base_pss = status_mb(pid, "VmRSS"), pss_mb(pid)
    envs = [rehearsal_env.make(f"{world}/{ids[i % len(ids)]}") for i in range(sessions)]
    states, resets = [], []
    for env in envs:
        t0 = time.perf_counter()
        states.append(env.reset(seed=0))
        resets.append((time.perf_counter() - t0) * 1000)
    idle, idle_pss = status_mb(pid, "VmRSS"), pss_mb(pid)
    first_writes, steps = [], 0
    for env, (observation, info) in zip(envs[:mid], states[:mid], strict=True):
        agent = make_agent("reference", env.scenario)
        while True:
            action = agent(observation, info)
            t0 = time.perf_counter()
            observation, _, terminated, truncated, step = env.step(action)
            took = (time.perf_counter() - t0) * 1000
            steps += 1
            info = {**info, **step}
            if env.db.touched():  # the first step that wrote
                first_writes.append(took)
                break
            if terminated or truncated:
                break
    mid_rss, mid_pss = status_mb(pid, "VmRSS"), pss_mb(pid)
    private = sum(bool(getattr(env.db, "private", True)) for env in envs)
    return {"base": base, "idle": idle, "mid": mid_rss, "base_pss": base_pss, "idle_pss": idle_pss, "mid_pss": mid_pss,
            "peak": status_mb(pid, "VmHWM"), "wrote": len(first_writes),
            "steps": steps, "private": private, "reset_ms": statistics.median(resets),
            "first_write_ms": statistics.median(first_writes) if first_writes else float("nan")}


def loop(world: str, episodes: int) -> dict[str, Any]:
    """Steady state: one env per scenario playing reference episodes round robin (the serial runner's shape)."""
    envs = [rehearsal_env.make(f"{world}/{sid}") for sid in scenario_ids(world)]
    totals, resets = [], []
    for k in range(len(envs) + episodes):  # the first pass warms every env, untimed
        env = envs[k % len(envs)]
        t0 = time.perf_counter()
        observation, info = env.reset(seed=0)
        t1 = time.perf_counter()
        agent = make_agent("reference", env.scenario)
        while True:
            observation, _, terminated, truncated, step = env.step(agent(observation, info))
            if terminated or truncated:
                break
        if k >= len(envs):
            totals.append((time.perf_counter() - t0) * 1000)
            resets.append((t1 - t0) * 1000)
    return {"episode_ms": statistics.median(totals), "reset_ms": statistics.median(resets), "episodes": episodes,
            "peak": status_mb(os.getpid(), "VmHWM")}


# -- over HTTP -----------------------------------------------------------------------------------------
async def over_http(world: str, sessions: int, mid: int, share: bool) -> dict[str, Any]:
    ids = scenario_ids(world)
    world_obj = rehearsal_env.load_world(world)
    with tempfile.TemporaryDirectory(prefix="rehearsal-bench-memory-") as out:
        env = {**os.environ, "REHEARSAL_SQLITE_SHARE_SNAPSHOTS": "1" if share else "0"}
        proc = subprocess.Popen([str(Path(sys.executable).with_name("rehearsal")), "serve", "--port", "0",
                                 "--world", world, "--max-sessions", str(sessions + 10), "--max-sessions-per-key",
                                 str(sessions + 10), "--out", out, "--idle-timeout", "7200"],
                                stdout=subprocess.PIPE, text=True, env=env)
        url = listening_url(proc)
        peak = [0.0]
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(0.05):
                peak[0] = max(peak[0], status_mb(proc.pid, "VmRSS"))

        try:
            limits = httpx.Limits(max_connections=32, max_keepalive_connections=32)
            async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as http:
                for _ in range(300):
                    try:
                        (await http.get("/health")).raise_for_status()
                        break
                    except httpx.TransportError:
                        await asyncio.sleep(0.1)
                gate = asyncio.Semaphore(32)

                async def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
                    async with gate:
                        r = await http.post(path, json=body)
                        r.raise_for_status()
                        return dict(r.json())

                def start(i: int) -> Any:
                    return post("/v1/episodes", {"world": world, "scenario": ids[i % len(ids)], "seed": 0,
                                                 "request_id": uuid.uuid4().hex,
                                                 "agent": {"name": "reference", "version": "bench"}})

                warm = await start(0)  # the world and its snapshot loaded once
                await http.delete(f"/v1/episodes/{warm['episode_id']}")
                base = status_mb(proc.pid, "VmRSS")
                sampler = threading.Thread(target=sample, daemon=True)
                sampler.start()
                opened = await asyncio.gather(*(start(i) for i in range(sessions)))
                idle = status_mb(proc.pid, "VmRSS")
                first_writes: list[int] = []

                async def play(started: dict[str, Any]) -> None:
                    scenario = world_obj.scenario(started["scenario"])
                    tools = world_obj.tools_for(scenario.role, offers_retry=scenario.offers_retry)
                    agent = make_agent("reference", scenario)
                    observation, info, index = started["observation"], {"tools": started["tools"]}, 0
                    while True:
                        action = agent(observation, info)
                        result = await post(f"/v1/episodes/{started['episode_id']}/step",
                                            {"action": action, "step_index": index})
                        observation, index = result["observation"], result["step_index"]
                        name = tool_of(action)
                        answered = json.loads(observation).get("tool_result") or {}
                        if name in tools and tools[name].kind == "write" and answered.get("status") == "ok":
                            first_writes.append(index)
                            return
                        if result["terminated"] or result["truncated"]:
                            return

                await asyncio.gather(*(play(s) for s in opened[:mid]))
                mid_rss = status_mb(proc.pid, "VmRSS")
        finally:
            stop.set()
            proc.kill()  # not terminate: a graceful stop would end and record every open session first
            proc.wait(120)
    # no timings over HTTP: with N sessions in flight a step's latency is mostly queueing (benchmarks/serve.py)
    return {"base": base, "idle": idle, "mid": mid_rss, "peak": max(peak[0], mid_rss), "wrote": len(first_writes),
            "steps": 0, "private": -1, "reset_ms": float("nan"), "first_write_ms": float("nan")}


# -- the table -----------------------------------------------------------------------------------------
def child(place: str, world: str, sessions: int, mid: int, share: bool) -> dict[str, Any]:
    env = {**os.environ, "REHEARSAL_SQLITE_SHARE_SNAPSHOTS": "1" if share else "0"}
    done = subprocess.run([sys.executable, __file__, "--child", place, world, str(sessions), str(mid)],
                          capture_output=True, text=True, env=env)
    if done.returncode:
        raise RuntimeError(f"the {place} child ({world}, {sessions}) failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


HEADER = (f"{'place':<11}{'world':<10}{'mode':<9}{'N':>7}{'M':>6}{'base MB':>9}{'idle MB':>9}{'mid MB':>9}"
          f"{'peak MB':>9}{'idle/sess':>10}{'write/sess':>11}{'reset ms':>9}{'1st write ms':>13}")


def show(place: str, world: str, mode: str, n: int, m: int, f: dict[str, Any]) -> str:
    per_idle = (f["idle"] - f["base"]) / n
    per_write = (f["mid"] - f["idle"]) / max(1, f["wrote"])
    return (f"{place:<11}{world:<10}{mode:<9}{n:>7}{f['wrote']:>6}{f['base']:>9.0f}{f['idle']:>9.0f}{f['mid']:>9.0f}"
            f"{f['peak']:>9.0f}{per_idle:>10.3f}{per_write:>11.3f}{f['reset_ms']:>9.3f}{f['first_write_ms']:>13.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="100 and 1,000 sessions instead of 1,000 and 10,000")
    parser.add_argument("--no-http", action="store_true", help="in-process rows only")
    parser.add_argument("--loop-only", action="store_true", help="only the steady-state episode loop")
    parser.add_argument("--loop-episodes", type=int, default=600, help="timed episodes of the loop (default 600)")
    parser.add_argument("--written", type=int, metavar="N", help="only N in-process shop sessions, every one of them "
                        "played to its first write (shared mode), RSS and PSS (issue 37)")
    parser.add_argument("--child", nargs=4, metavar=("PLACE", "WORLD", "N", "M"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        place, world, n, m = args.child
        share = os.environ.get("REHEARSAL_SQLITE_SHARE_SNAPSHOTS", "1") != "0"
        figures = (in_process(world, int(n), int(m)) if place == "in-process" else loop(world, int(n))
                   if place == "loop" else asyncio.run(over_http(world, int(n), int(m), share)))
        print(json.dumps(figures))
        return
    if args.written:
        written(args.written)
        return
    if not args.loop_only:
        sessions_table(args.quick, args.no_http)
    print(f"steady state: one env per scenario, {args.loop_episodes} reference episodes round robin, medians")
    print(f"{'world':<10}{'mode':<9}{'episode ms':>11}{'reset ms':>10}{'peak MB':>9}")
    for world in ("shop", "analytics"):
        for mode in ("shared", "private"):
            f = child("loop", world, args.loop_episodes, 0, mode == "shared")
            print(f"{world:<10}{mode:<9}{f['episode_ms']:>11.3f}{f['reset_ms']:>10.3f}{f['peak']:>9.0f}", flush=True)


def written(n: int) -> None:
    """N shop sessions in process, all past their first write: MiB of RSS and of PSS (a page shared by several
    mappings counted once), total and per session, and the extrapolation to 10,000."""
    try:
        from rehearsal_env.backends._sqlitepages import available  # noqa: PLC0415

        by_page = available()
    except ImportError:  # before issue 37: every written session deserializes the whole snapshot
        by_page = False
    f = child("in-process", "shop", n, n, True)
    print(f"{n} shop sessions in process, {f['wrote']} past their first write; copies by page: {by_page}")
    for name, key in (("RSS", ""), ("PSS", "_pss")):
        base, idle, mid = f["base" + key], f["idle" + key], f["mid" + key]
        per_idle, per_write = (idle - base) / n, (mid - idle) / max(1, f["wrote"])
        at_10k = base + 10000 * (per_idle + per_write)
        print(f"{name}: base {base:.0f} MiB, idle {idle:.0f}, all written {mid:.0f}; per session idle {per_idle:.3f} "
              f"MiB, added by its first write {per_write:.3f} MiB; 10,000 written sessions: {at_10k:.0f} MiB "
              f"({'measured' if n >= 10000 else 'extrapolated'}; goal {GOAL_MB} MiB)")
    print(f"median first write {f['first_write_ms']:.3f} ms, median reset {f['reset_ms']:.3f} ms")


def sessions_table(quick: bool, no_http: bool) -> None:
    """The memory table: N sessions idle, M of them past their first write, both modes."""
    small, large = (100, 1000) if quick else (1000, 10000)
    plan = [("in-process", "shop", small, small), ("in-process", "analytics", small, small),
            ("in-process", "shop", large, small)]
    if not no_http:
        plan += [("http", "shop", small, small), ("http", "shop", large, small)]
    print(f"sessions' memory (issue 24 §4): {os.cpu_count()} cores; N sessions started and reset, M of them "
          "played to their first write; MB = MiB of RSS")
    print(HEADER)
    measured: dict[tuple[str, str, int, str], dict[str, Any]] = {}
    for place, world, n, m in plan:
        for mode in ("shared", "private"):
            key = (place, world, n, mode)
            if mode == "private" and n == large and (place, world, small, mode) in measured:
                f = measured[(place, world, small, mode)]
                per = (f["idle"] - f["base"]) / small
                est = f["base"] + per * n
                print(f"{place:<11}{world:<10}{mode:<9}{n:>7}{'':>6}{f['base']:>9.0f}{est:>9.0f}  estimated from "
                      f"N={small} ({per:.3f} MB a session; not run: it would not fit beside the other jobs)")
                continue
            f = measured[key] = child(place, world, n, m, mode == "shared")
            print(show(place, world, mode, n, m, f), flush=True)
    for place in ("in-process", "http"):
        found = measured.get((place, "shop", large, "shared"))
        if found is not None:
            f = found
            verdict = "met" if f["idle"] <= GOAL_MB and large >= 10000 else "not met"
            print(f"goal ({place}): 10,000 shop sessions in at most {GOAL_MB} MB: idle sessions {f['idle']:.0f} MB, "
                  f"with {f['wrote']} of them past their first write {f['mid']:.0f} MB, peak {f['peak']:.0f} MB: "
                  f"{verdict} (idle)")


if __name__ == "__main__":
    main()
