"""Import and reset time of the tau2 worlds, next to the obvious alternative (tau2's own reload of db.json).

    python benchmarks/tau2.py [--source DIR] [--resets 300]

- import: reading the source folder, pinning its files, building the rows and
  deriving every scenario (replaying the gold and the wrong solutions), per world;
- reset: ``Database.reset()`` of the embedded SQLite copy after a reference
  episode dirtied it (what an RL loop pays between episodes), against parsing
  ``db.json`` again (``json.loads``, the least tau2 does to start a fresh task);
  medians and p95, interleaved in one run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from rehearsal_env.agents import make_agent
from rehearsal_env.env import RehearsalEnv
from rehearsal_env.importers.tau2 import build_tau2_world
from rehearsal_env.runner import run_episode

DEFAULT_SOURCE = Path(__file__).resolve().parents[1].parent / "shared/third_party/tau2-bench"


def _ms(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[int(0.95 * (len(ordered) - 1))]
    return f"median {statistics.median(ordered) * 1000:.3f} ms, p95 {p95 * 1000:.3f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default=str(DEFAULT_SOURCE))
    parser.add_argument("--resets", type=int, default=300)
    args = parser.parse_args()
    for domain in ("retail", "airline"):
        started = time.perf_counter()
        world = build_tau2_world(f"tau2-{domain}", args.source, domain)
        scenarios = world.scenarios()
        imported = time.perf_counter() - started
        raw = (Path(args.source) / "data/tau2/domains" / domain / "db.json").read_text()
        scenario = next(s for s in scenarios if s.wrong)
        env = RehearsalEnv(scenario, world)
        run_episode(env, make_agent("reference", scenario))
        resets, reloads = [], []
        for _ in range(args.resets):
            run_episode(env, make_agent(scenario.wrong[0].name, scenario))  # dirty the state (it resets first)
            t = time.perf_counter()
            env.db.reset()
            resets.append(time.perf_counter() - t)
            t = time.perf_counter()
            json.loads(raw)
            reloads.append(time.perf_counter() - t)
        ratio = statistics.median(reloads) / statistics.median(resets)
        print(f"tau2-{domain}: import {imported:.2f} s ({len(scenarios)} scenarios)")
        print(f"  reset (SQLite deserialize)  {_ms(resets)}")
        print(f"  json.loads(db.json)         {_ms(reloads)}  -> reset is {ratio:.0f}x faster")


if __name__ == "__main__":
    main()
