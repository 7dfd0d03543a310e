"""SmolLM2-135M played through the documented local path (issue 38; the figures of docs/models.md).

Usage (the live extra installed; tau2-bench's data beside the clone)::

    flock /tmp/bench.lock .venv/bin/python benchmarks/live_round2.py [--shop 15] [--tau2 3] [--calls 8]

Serves the model with the documented command (``rehearsal models serve smollm2``, one thread, an 8192-token
context) and plays the documented profile (:func:`profile`: ``tool_choice = "required"``, streamed,
temperature 0, ``max_tokens`` 96, ``--calls`` model calls per episode) on the first ``--shop`` shop dev
scenarios and the first ``--tau2`` tau2-retail dev scenarios, one repeat each. Before each world the run's
preflight is sent (the run's own system message, as ``rehearsal run`` does), so the first call finds the
prompt cache holding it.

Printed per world: episodes, outcomes, episodes with a world-tool call, world-tool calls, rejected attempts by
kind, model calls, seconds per call, tokens per episode, the first call's seconds, drains after cut-off replies,
and the server's own counts (``GET /rehearsal/status``).
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from rehearsal_env.agents import AgentProfile, Endpoint, ModelAgents, Provider, Sampling
from rehearsal_env.cli._models import preflight
from rehearsal_env.importers.tau2 import build_tau2_world
from rehearsal_env.records import EpisodeRecord
from rehearsal_env.runner import RunConfig, plan, run_batch
from rehearsal_env.scenarios import Scenario
from rehearsal_env.worlds import World, load_world, register_world

TAU2 = Path(__file__).resolve().parents[1].parent / "shared/third_party/tau2-bench"
CONTEXT = 8192


def profile(calls: int) -> AgentProfile:
    """The documented profile for the tiny local model (docs/models.md)."""
    return AgentProfile(name="smollm2-local", model="smollm2", instructions="Use the tools.",
                        sampling=Sampling(temperature=0.0, seed=0, max_tokens=96), max_model_calls=calls,
                        context=CONTEXT, max_call_s=180.0, provider=Provider(tool_choice="required"))


def serve(log: Path) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-c", "import sys; from rehearsal_env.cli import main; "
                                 "sys.exit(main())", "models", "serve", "smollm2", "--port", str(port),
                                 "--n-ctx", str(CONTEXT), "--threads", "1"], stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 120
    while True:
        try:
            urllib.request.urlopen(base + "/models", timeout=2).close()
            return proc, base
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"the server did not start: {log.read_text()[-2000:]}") from None
            time.sleep(0.5)


def status(base: str) -> dict[str, Any]:
    with urllib.request.urlopen(base.removesuffix("/v1") + "/rehearsal/status", timeout=10) as answer:
        out: dict[str, Any] = json.loads(answer.read())
    out.pop("last", None)
    return out


class Keeping:
    """``ModelAgents`` that keeps each episode's agent (for its per-call times)."""

    def __init__(self, agents: ModelAgents) -> None:
        self.agents = agents
        self.made: list[Any] = []

    def __call__(self, scenario: Scenario) -> Any:
        agent = self.agents(scenario)
        self.made.append(agent)
        return agent


def play(world: World, scenarios: list[str], chosen: AgentProfile, base: str) -> dict[str, Any]:
    endpoint = Endpoint(base_url=base, timeout_s=600.0, max_retries=1)
    config = RunConfig(world=world.name, agent=chosen.name, scenarios=tuple(scenarios), agent_version=chosen.label,
                       agent_profile=chosen.to_toml(), endpoint=endpoint)
    started = time.perf_counter()
    preflight(config)  # the run's own system message: the cache holds it when the first call comes
    preflight_s = time.perf_counter() - started
    keeping = Keeping(ModelAgents(chosen, endpoint))
    started = time.perf_counter()
    records = run_batch(config, plan(config, world), world=world, agent_factory=keeping)
    wall = time.perf_counter() - started
    return describe(world, records, keeping, wall, preflight_s)


def describe(world: World, records: list[EpisodeRecord], keeping: Keeping, wall: float,
             preflight_s: float) -> dict[str, Any]:
    kinds = collections.Counter(t.rejected_kind or "?" for r in records for t in r.trace if t.rejected)
    calls = sum(r.model_calls or 0 for r in records)
    latency = sum(r.model_latency_ms or 0.0 for r in records)
    first = next((a.stats.latencies_ms[0] for a in keeping.made if a.stats.latencies_ms), None)
    return {"world": world.name, "episodes": len(records),
            "outcomes": dict(collections.Counter(r.outcome for r in records)),
            "episodes_with_a_world_tool_call": sum(bool(r.world_tool_calls) for r in records),
            "world_tool_calls": sum(r.world_tool_calls or 0 for r in records),
            "rejected_by_kind": dict(kinds), "model_calls": calls,
            "s_per_call": round(latency / calls / 1000, 2) if calls else None,
            "tokens_per_episode": round(sum(r.tokens or 0 for r in records) / len(records)) if records else None,
            "preflight_s": round(preflight_s, 2), "first_call_s": round(first / 1000, 2) if first else None,
            "drained_s": round(sum(a.stats.drained_ms for a in keeping.made) / 1000, 2),
            "wall_s": round(wall, 1), "scenarios": [r.scenario for r in records]}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--shop", type=int, default=15)
    parser.add_argument("--tau2", type=int, default=3)
    parser.add_argument("--calls", type=int, default=8)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    shop = load_world("shop")
    worlds = [(shop, [s.id for s in shop.scenarios() if s.split == "dev"][:args.shop])]
    if args.tau2:
        retail = build_tau2_world("tau2-retail", TAU2, "retail")
        register_world("tau2-retail", lambda: retail)
        worlds.append((retail, [s.id for s in retail.scenarios() if s.split == "dev"][:args.tau2]))
    folder = Path(tempfile.mkdtemp(prefix="live-round2-"))
    proc, base = serve(folder / "server.log")
    try:
        for world, scenarios in worlds:
            result = play(world, scenarios, profile(args.calls), base)
            result["server"] = status(base)
            print(json.dumps(result), flush=True)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


if __name__ == "__main__":
    main()
