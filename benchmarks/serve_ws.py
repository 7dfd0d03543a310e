"""`rehearsal serve` over its WebSocket session against HTTP and the in-process env, in one run.

Usage::

    flock /tmp/bench.lock .venv/bin/python benchmarks/serve_ws.py [--sessions 1 100] [--episodes 3]

For each N (concurrent sessions, all started before the first step), in this order:

* **in-process**: ``benchmarks/serve.py``'s child process: N envs stepped round-robin with the
  reference agent (CPU per step = the child's CPU over its steps; no records are written);
* **http**: a fresh ``rehearsal serve`` child (recording into a temporary folder) driven by N
  ``httpx.AsyncClient`` sessions, one POST per step (``benchmarks/serve.py``'s driver);
* **websocket**: a fresh ``rehearsal serve`` child driven by N WebSocket connections
  (``websockets``, no compression), one frame per step, the same reference episodes;
* **ws unrecorded** (``--unrecorded``): the same WebSocket server with records off (``ServeConfig.out`` None,
  started through :func:`rehearsal_env.serve.run_server`): what writing the records costs a step.
* **ws step_many** (``--batched``): a fresh recording server driven by one connection holding all N sessions,
  stepped in lock-step, one ``step_many`` frame per round (a trainer with a batched policy); latency is the
  round's, per step.

Server CPU per step is the server process's user + system CPU (``/proc``) over the played steps
divided by the steps; latency is what the client sees per step (queueing behind the other N-1
included). Printed: p50/p99 ms, CPU ms per step of the server and of this client, and the ratios
websocket / in-process and http / in-process (the issue's goal: a WebSocket step costs the server at
most 2x the in-process step). One world (``--world``, default shop) and ``--episodes`` reference
episodes per session (4x as many for N = 1).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
import uuid
from dataclasses import asdict
from pathlib import Path
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

import rehearsal_env
from rehearsal_env.agents import make_agent

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serve as http_bench  # noqa: E402  (benchmarks/serve.py: its server, driver and in-process child)

GOAL = 2.0
"""The issue's goal: server CPU per WebSocket step at most this many times the in-process step's."""


async def drive_ws(url: str, world: str, sessions: int, episodes: int,
                   server_pid: int) -> tuple[list[float], int, int, float, float, float]:
    """N WebSocket sessions (one connection each) playing ``episodes`` reference episodes each."""
    ids = http_bench.scenarios(world)
    world_obj = rehearsal_env.load_world(world)
    latencies: list[float] = []
    counts = {"episodes": 0, "verified": 0}
    address = url.replace("http://", "ws://") + "/v1/ws"
    conns: list[ClientConnection] = [await connect(address, compression=None, max_size=None, open_timeout=600)
                                     for _ in range(sessions)]

    async def call(i: int, frame: dict[str, Any]) -> dict[str, Any]:
        await conns[i].send(json.dumps(frame, separators=(",", ":")))
        answer = json.loads(await conns[i].recv())
        if answer["code"] >= 400:
            raise RuntimeError(f"the server refused a frame: {answer}")
        return dict(answer["body"])

    async def start(i: int) -> dict[str, Any]:
        return await call(i, {"op": "start", "world": world, "scenario": ids[i % len(ids)], "seed": 0,
                              "request_id": uuid.uuid4().hex, "agent": {"name": "reference", "version": "bench"}})

    async def play(i: int, started: dict[str, Any]) -> None:
        for k in range(episodes):
            if k:
                started = await start(i)
            agent = make_agent("reference", world_obj.scenario(started["scenario"]))
            observation, info = started["observation"], {"tools": started["tools"]}
            index = 0
            while True:
                t0 = time.perf_counter()
                result = await call(i, {"action": agent(observation, info), "step_index": index})
                latencies.append((time.perf_counter() - t0) * 1000)
                observation, index = result["observation"], result["step_index"]
                if result["terminated"] or result["truncated"]:
                    counts["episodes"] += 1
                    counts["verified"] += result["verdict"]["outcome"] == "verified"
                    break

    try:
        opened = await asyncio.gather(*(start(i) for i in range(sessions)))
        began, server0, client0 = time.perf_counter(), http_bench.cpu_s(server_pid), time.process_time()
        await asyncio.gather(*(play(i, s) for i, s in enumerate(opened)))
        wall = time.perf_counter() - began
        server_cpu, client_cpu = http_bench.cpu_s(server_pid) - server0, time.process_time() - client0
    finally:
        await asyncio.gather(*(c.close() for c in conns))
    steps = max(1, len(latencies))
    return (latencies, counts["episodes"], counts["verified"], wall, server_cpu * 1000 / steps,
            client_cpu * 1000 / steps)


async def drive_batched(url: str, world: str, sessions: int, episodes: int,
                        server_pid: int) -> tuple[list[float], int, int, float, float, float]:
    """N sessions on one WebSocket connection, stepped in lock-step: one ``step_many`` frame per round."""
    ids = http_bench.scenarios(world)
    world_obj = rehearsal_env.load_world(world)
    latencies: list[float] = []
    counts = {"episodes": 0, "verified": 0}
    conn = await connect(url.replace("http://", "ws://") + "/v1/ws", compression=None, max_size=None,
                         open_timeout=600)

    async def call(frame: dict[str, Any]) -> dict[str, Any]:
        await conn.send(json.dumps(frame, separators=(",", ":")))
        answer = json.loads(await conn.recv())
        if answer["code"] >= 400:
            raise RuntimeError(f"the server refused a frame: {answer}")
        return dict(answer["body"])

    async def start(i: int) -> list[Any]:
        started = await call({"op": "start", "world": world, "scenario": ids[i % len(ids)], "seed": 0,
                              "request_id": uuid.uuid4().hex, "agent": {"name": "reference", "version": "bench"}})
        agent = make_agent("reference", world_obj.scenario(started["scenario"]))
        return [started["episode_id"], agent, started["observation"], {"tools": started["tools"]}, 0]

    try:
        live = {i: await start(i) for i in range(sessions)}
        left = dict.fromkeys(range(sessions), episodes)
        began, server0, client0 = time.perf_counter(), http_bench.cpu_s(server_pid), time.process_time()
        while live:
            order = list(live)
            steps = [{"episode_id": live[i][0], "action": live[i][1](live[i][2], live[i][3]),
                      "step_index": live[i][4]} for i in order]
            t0 = time.perf_counter()
            results = (await call({"op": "step_many", "steps": steps}))["results"]
            took = (time.perf_counter() - t0) * 1000 / len(order)
            for i, result in zip(order, results, strict=True):
                latencies.append(took)
                if result["code"] != 200:
                    raise RuntimeError(f"the server refused a step: {result}")
                body = result["body"]
                live[i][2], live[i][4] = body["observation"], body["step_index"]
                if body["terminated"] or body["truncated"]:
                    counts["episodes"] += 1
                    counts["verified"] += body["verdict"]["outcome"] == "verified"
                    left[i] -= 1
                    if left[i]:
                        live[i] = await start(i)
                    else:
                        del live[i]
        wall = time.perf_counter() - began
        server_cpu, client_cpu = http_bench.cpu_s(server_pid) - server0, time.process_time() - client0
    finally:
        await conn.close()
    steps_taken = max(1, len(latencies))
    return (latencies, counts["episodes"], counts["verified"], wall, server_cpu * 1000 / steps_taken,
            client_cpu * 1000 / steps_taken)


def batched(world: str, sessions: int, episodes: int) -> http_bench.Figures:
    with tempfile.TemporaryDirectory(prefix="rehearsal-bench-ws-") as out:
        server = http_bench.Server(world, sessions, Path(out))
        try:
            latencies, done, verified, wall, cpu, client_cpu = asyncio.run(
                drive_batched(server.url, world, sessions, episodes, server.proc.pid))
        finally:
            server.stop()
        return http_bench.Figures("ws step_many", sessions, done, len(latencies), wall,
                                  http_bench.percentile(latencies, 0.5), http_bench.percentile(latencies, 0.99),
                                  server.idle, server.peak, verified, cpu, client_cpu)


def over_ws(world: str, sessions: int, episodes: int, recorded: bool = True) -> http_bench.Figures:
    with tempfile.TemporaryDirectory(prefix="rehearsal-bench-ws-") as out:
        server = http_bench.Server(world, sessions, Path(out) if recorded else None)
        try:
            latencies, done, verified, wall, cpu, client_cpu = asyncio.run(
                drive_ws(server.url, world, sessions, episodes, server.proc.pid))
        finally:
            server.stop()
        return http_bench.Figures("websocket" if recorded else "ws unrecorded", sessions, done, len(latencies), wall,
                                  http_bench.percentile(latencies, 0.5), http_bench.percentile(latencies, 0.99),
                                  server.idle, server.peak, verified, cpu, client_cpu)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sessions", type=int, nargs="+", default=[1, 100], help="concurrent sessions (default 1 100)")
    p.add_argument("--episodes", type=int, default=3, help="episodes each session plays (default 3; 4x for N=1)")
    p.add_argument("--world", default="shop")
    p.add_argument("--json", type=Path, help="also write the figures as JSON here")
    p.add_argument("--unrecorded", action="store_true",
                   help="also the WebSocket server with records off (what recording costs a step)")
    p.add_argument("--batched", action="store_true",
                   help="also one connection stepping all N sessions in lock-step, one step_many frame per round")
    args = p.parse_args()
    print(f"world {args.world}; reference episodes; server CPU per step (ms) from /proc")
    print(f"{'mode':<18}{'N':>6}{'eps':>7}{'steps':>7}{'p50 ms':>9}{'p99 ms':>9}{'eps/s':>9}{'RSS MB':>9}"
          f"{'MB/sess':>9}{'cpu ms':>9}{'cli cpu':>9}")
    results: list[dict[str, Any]] = []
    for n in args.sessions:
        episodes = args.episodes * 4 if n == 1 else args.episodes
        local = http_bench.child(args.world, n, episodes)
        http = http_bench.over_http(args.world, n, episodes)
        ws = over_ws(args.world, n, episodes)
        bare = over_ws(args.world, n, episodes, recorded=False) if args.unrecorded else None
        many = batched(args.world, n, episodes) if args.batched else None
        for figures in (local, http, ws, *([bare] if bare else []), *([many] if many else [])):
            print(http_bench.show(figures), flush=True)
        if bare is not None:
            cost = ws.cpu_ms_per_step - bare.cpu_ms_per_step
            print(f"  N={n}: recording costs a WebSocket step {cost:+.2f} ms of server CPU; unrecorded "
                  f"{bare.cpu_ms_per_step / local.cpu_ms_per_step:.2f}x in-process", flush=True)
        ratio = ws.cpu_ms_per_step / local.cpu_ms_per_step
        print(f"  N={n}: server CPU/step websocket {ratio:.2f}x in-process (goal <= {GOAL:g}x: "
              f"{'met' if ratio <= GOAL else 'NOT met'}), http {http.cpu_ms_per_step / local.cpu_ms_per_step:.2f}x; "
              f"websocket/http {ws.cpu_ms_per_step / http.cpu_ms_per_step:.2f}x; p50 websocket "
              f"{ws.p50_ms:.2f} ms, http {http.p50_ms:.2f} ms", flush=True)
        if many is not None:
            print(f"  N={n}: server CPU/step with step_many {many.cpu_ms_per_step / local.cpu_ms_per_step:.2f}x "
                  f"in-process", flush=True)
        results += [asdict(local), asdict(http), asdict(ws), *([asdict(bare)] if bare else []),
                    *([asdict(many)] if many else [])]
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
