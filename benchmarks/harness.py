"""Per-step overhead of an outside harness: MCP (stdio, streamable HTTP) and the model gateway, against in process.

Usage::

    flock /tmp/bench.lock .venv/bin/python benchmarks/harness.py [--scenarios N] [--reps K] [--calls C]

* ``in process``: ``env.step`` of each action of the scenarios' reference solutions (shop, stress on, SQLite).
* ``mcp stdio`` / ``mcp http``: the same actions as ``tools/call`` from the mcp SDK's client to a real
  ``rehearsal mcp --scenario`` process (stdio) and to the episode server on uvicorn (streamable HTTP), each
  episode in its own MCP session; the time is the client's round trip of the call.
* ``gateway``: ``C`` chat completions (not streamed) from the ``openai`` SDK to the OpenAI-protocol test
  server directly, and the same through ``rehearsal gateway`` (which logs each call); the time is the
  client's round trip.

Printed: the median per step (per call) of each mode, and the overhead over in process (over direct) as a
difference of medians and a ratio. Needs the mcp extra.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import openai
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from rehearsal_env.agents.testing import ModelServer, Reply
from rehearsal_env.env import RehearsalEnv
from rehearsal_env.gateway import GatewayConfig, Ledger, gateway_app
from rehearsal_env.harness import EpisodeServerConfig, EpisodeSpec, Storage, episode_runtime, http_app
from rehearsal_env.serve import Principal, Scope, ServerThread
from rehearsal_env.worlds import load_world

WORLD = load_world("shop")
LOCAL = Principal("local", Scope.BUILD_AND_EVALUATE)


def _actions(scenario: Any) -> list[tuple[str, dict[str, Any]]]:
    return [(c.tool, dict(c.args)) for c in scenario.reference.calls]


def in_process(scenarios: Sequence[Any], reps: int) -> list[float]:
    times = []
    for _ in range(reps):
        for s in scenarios:
            env = RehearsalEnv(s, WORLD)
            env.reset(seed=0)
            for tool, args in _actions(s):
                action = json.dumps({"tool": tool, "args": args})
                t = time.perf_counter()
                _, _, done, cut, _ = env.step(action)
                times.append(time.perf_counter() - t)
                if done or cut:
                    break
            env.close()
    return times


async def _play(session: ClientSession, scenario: Any, times: list[float]) -> None:
    await session.initialize()
    await session.list_tools()
    for tool, args in _actions(scenario):
        t = time.perf_counter()
        result = await session.call_tool(tool, args)
        times.append(time.perf_counter() - t)
        if result.structured_content and result.structured_content.get("ended"):
            break


def mcp_stdio(scenarios: Sequence[Any], reps: int, out: Path) -> list[float]:
    times: list[float] = []
    cli = "import sys; from rehearsal_env.cli import main; sys.exit(main())"
    for _ in range(reps):
        for s in scenarios:
            params = StdioServerParameters(command=sys.executable, env=dict(os.environ), args=[
                "-c", cli, "mcp", "--scenario", f"shop/{s.id}", "--out", str(out / "stdio")])

            async def main(scenario: Any = s, p: StdioServerParameters = params) -> None:
                async with stdio_client(p) as (read, write), ClientSession(read, write) as session:
                    await _play(session, scenario, times)

            anyio.run(main)
    return times


def mcp_http(scenarios: Sequence[Any], reps: int, out: Path) -> list[float]:
    times: list[float] = []
    for s in scenarios:
        runtime = episode_runtime(EpisodeServerConfig(spec=EpisodeSpec(world=WORLD, scenario=s), who=LOCAL),
                                  Storage(out=out / "http"))
        with ServerThread(http_app(runtime.server)) as server:  # type: ignore[arg-type]
            for _ in range(reps):
                async def main(scenario: Any = s, url: str = server.url + "/mcp") -> None:
                    async with streamable_http_client(url) as (read, write), \
                            ClientSession(read, write) as session:
                        await _play(session, scenario, times)

                anyio.run(main)
        runtime.close()
    return times


def gateway(calls: int, out: Path) -> tuple[list[float], list[float]]:
    direct: list[float] = []
    through: list[float] = []
    with ModelServer() as provider:
        provider.script("m", *[Reply.text("ok") for _ in range(2 * calls + 2)])
        ledger = Ledger(out / "ledger")
        with ServerThread(gateway_app(GatewayConfig(upstream=provider.base_url, ledger=ledger))) as gw:
            clients = {"direct": openai.OpenAI(base_url=provider.base_url, api_key="k", max_retries=0),
                       "gateway": openai.OpenAI(base_url=f"{gw.url}/episodes/bench/v1", api_key="k", max_retries=0)}
            for name, client in clients.items():  # one warm-up call each
                client.chat.completions.create(model="m", messages=[{"role": "user", "content": name}])
            for _ in range(calls):  # interleaved, so both see the same machine
                for name, client in clients.items():
                    t = time.perf_counter()
                    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
                    (direct if name == "direct" else through).append(time.perf_counter() - t)
    return direct, through


def _ms(xs: list[float]) -> float:
    return statistics.median(xs) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenarios", type=int, default=6, help="shop dev scenarios (default 6)")
    parser.add_argument("--reps", type=int, default=3, help="episodes per scenario and mode (default 3)")
    parser.add_argument("--calls", type=int, default=200, help="chat completions per gateway mode (default 200)")
    args = parser.parse_args()
    scenarios = WORLD.scenarios("dev")[: args.scenarios]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        base = in_process(scenarios, args.reps)
        modes = {"mcp stdio": mcp_stdio(scenarios, args.reps, out), "mcp http": mcp_http(scenarios, args.reps, out)}
        direct, through = gateway(args.calls, out)
    print(f"{len(scenarios)} shop dev scenarios x {args.reps} episodes, reference actions; medians per step")
    print(f"  in process      {_ms(base):8.2f} ms  ({len(base)} steps)")
    for name, times in modes.items():
        print(f"  {name:<15} {_ms(times):8.2f} ms  ({len(times)} steps)  overhead {_ms(times) - _ms(base):+.2f} ms, "
              f"x{_ms(times) / _ms(base):.1f}")
    print(f"{args.calls} chat completions each; medians per call")
    print(f"  direct          {_ms(direct):8.2f} ms")
    print(f"  through gateway {_ms(through):8.2f} ms  overhead {_ms(through) - _ms(direct):+.2f} ms, "
          f"x{_ms(through) / _ms(direct):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
