"""SmolLM2-135M on shop dev and tau2-retail dev, before and after issue 28 (the figures of docs/models.md).

Usage (the live extra installed; tau2-bench's data beside the clone)::

    flock /tmp/bench.lock .venv/bin/python benchmarks/live_figures.py [--shop 8] [--tau2 6] [--threads 1]

Both sides play the live test's profile (temperature 0, seed 0, ``max_tokens`` 48, 3 model calls per
episode, not streamed: llama-cpp-python cannot stream a reply that chooses a tool) against
llama-cpp-python's OpenAI server (``chatml-function-calling``, one thread), on the first ``--shop`` shop
dev scenarios and the first ``--tau2`` tau2-retail dev scenarios, one repeat each:

- **before**: what the committed code sent before: no ``tool_choice`` (``[provider] tool_choice = "omit"``,
  so the server leaves the tools out of the prompt), no ``context`` on the profile, the live setup's
  4096-token server;
- **after**: ``tool_choice = "auto"`` (the default now), ``context = 8192`` on the profile and the server.

Printed per side and world: episodes, outcomes, world-tool calls, rejected attempts by kind, gave-up
reasons, model calls and ms per call, and the first request's prompt tokens as the server counted them.
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from llm_concurrency import llama_profile, start_llama

from rehearsal_env.agents import AgentProfile, Endpoint, Provider
from rehearsal_env.importers.tau2 import build_tau2_world
from rehearsal_env.records import EpisodeRecord
from rehearsal_env.runner import RunConfig, plan, run_batch
from rehearsal_env.worlds import World, load_world

TAU2 = Path(__file__).resolve().parents[1].parent / "shared/third_party/tau2-bench"


def side_profile(after: bool) -> AgentProfile:
    profile = llama_profile()
    if after:
        return replace(profile, name="smollm2-after")
    return replace(profile, name="smollm2-before", context=None, provider=Provider(tool_choice="omit", stream=False))


def play(world: World, scenarios: list[str], profile: AgentProfile, base_url: str) -> tuple[list[EpisodeRecord], float]:
    config = RunConfig(world=world.name, agent=profile.name, scenarios=tuple(scenarios), agent_version=profile.label,
                       agent_profile=profile.to_toml(), endpoint=Endpoint(base_url=base_url, timeout_s=600.0,
                                                                          max_retries=1))
    started = time.perf_counter()
    records = run_batch(config, plan(config, world), world=world)
    return records, time.perf_counter() - started


def describe(side: str, world: World, records: list[EpisodeRecord], wall: float) -> dict[str, Any]:
    outcomes = collections.Counter(r.outcome for r in records)
    kinds = collections.Counter(t.rejected_kind or "?" for r in records for t in r.trace if t.rejected)
    gave_up = collections.Counter(json.loads(r.trace[-1].action).get("args", {}).get("reason", "")[:70]
                                  for r in records if r.trace and r.trace[-1].tool == "give_up")
    calls = sum(r.model_calls or 0 for r in records)
    latency = sum(r.model_latency_ms or 0.0 for r in records)
    return {"side": side, "world": world.name, "episodes": len(records), "outcomes": dict(outcomes),
            "world_tool_calls": sum(r.world_tool_calls or 0 for r in records),
            "episodes_with_a_world_tool_call": sum(bool(r.world_tool_calls) for r in records),
            "rejected_by_kind": dict(kinds), "gave_up": dict(gave_up), "model_calls": calls,
            "ms_per_call": round(latency / calls) if calls else None, "wall_s": round(wall, 1),
            "tokens_per_episode": (sum(r.tokens or 0 for r in records) / len(records)) if records else None,
            "scenarios": [r.scenario for r in records]}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--shop", type=int, default=8)
    parser.add_argument("--tau2", type=int, default=6)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--sides", nargs="+", default=["before", "after"], choices=["before", "after"])
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    shop = load_world("shop")
    retail = build_tau2_world("tau2-retail", TAU2, "retail")
    worlds = [(shop, [s.id for s in shop.scenarios() if s.split == "dev"][:args.shop]),
              (retail, [s.id for s in retail.scenarios() if s.split == "dev"][:args.tau2])]
    results = []
    for side in args.sides:
        after = side == "after"
        folder = Path(tempfile.mkdtemp(prefix=f"live-{side}-"))
        server, base_url = start_llama(args.threads, folder / "server.log", context=8192 if after else 4096)
        try:
            for world, scenarios in worlds:
                if scenarios:
                    records, wall = play(world, scenarios, side_profile(after), base_url)
                    results.append(describe(side, world, records, wall))
                    print(json.dumps(results[-1]), flush=True)
        finally:
            server.terminate()
            server.wait(timeout=30)
            shutil.rmtree(folder, ignore_errors=True)
    json.dump(results, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
