"""Episodes in flight: a model agent's run with ``--concurrency N`` against the serial run, same worker.

Usage::

    .venv/bin/python benchmarks/llm_concurrency.py [--concurrency 16] [--delay 0.2] [--episodes 32] [--reps 3]

The model is the scripted OpenAI-protocol server (:mod:`rehearsal_env.agents.testing`),
started as its own process on 127.0.0.1 as a provider would be, answering every
call after ``--delay`` seconds with the next call of the scenario's reference
solution, over real HTTP through the real ``openai`` SDK.
Both modes play the same plan (the shop world's first ``--episodes`` scenarios,
one repeat, SQLite) with :func:`rehearsal_env.runner.run`, ``--reps`` times each;
medians are printed. The serial run makes one model call at a time, so its time
is about calls x delay; with N in flight it should be about 1/N of that.

Printed: the wall time of each mode, its model calls, the ideal (calls x delay, and
that / N), the ratio serial / concurrent (ideal: N), and every run's outcomes
(they must be the same in both modes: concurrency changes no record).
"""

from __future__ import annotations

import argparse
import logging
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rehearsal_env.agents import AgentProfile, Endpoint, Sampling
from rehearsal_env.records import read_records
from rehearsal_env.runner import RunConfig, run
from rehearsal_env.worlds import load_world


def play(base_url: str, scenarios: tuple[str, ...], concurrency: int) -> tuple[float, list[Any]]:
    profile = AgentProfile(name="bench", model="scripted", sampling=Sampling(temperature=0.0))
    config = RunConfig(world="shop", agent=profile.name, agent_version=profile.label, scenarios=scenarios,
                       agent_profile=profile.to_toml(), endpoint=Endpoint(base_url=base_url), concurrency=concurrency,
                       batch_size=len(scenarios))
    out = Path(tempfile.mkdtemp(prefix="llm-concurrency-"))
    try:
        started = time.perf_counter()
        run(config, out)
        elapsed = time.perf_counter() - started
        return elapsed, read_records(out)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--delay", type=float, default=0.2, help="seconds the server waits per reply")
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    scenarios = tuple(s.id for s in load_world("shop").scenarios()[:args.episodes])
    times: dict[int, list[float]] = {1: [], args.concurrency: []}
    outcomes: dict[int, list[tuple[str, str, int | None]]] = {}
    calls = 0
    server = subprocess.Popen([sys.executable, "-m", "rehearsal_env.agents.testing", "--world", "shop",
                               "--delay", str(args.delay)], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().split()[-1]  # "serving http://127.0.0.1:PORT/v1"
        for _ in range(args.reps):
            for n in times:
                elapsed, records = play(base_url, scenarios, n)
                times[n].append(elapsed)
                outcomes[n] = sorted((r.scenario, r.outcome, r.model_calls) for r in records)
                calls = sum(r.model_calls or 0 for r in records)
    finally:
        server.terminate()
        server.wait(timeout=10)
    serial, concurrent = (statistics.median(times[n]) for n in times)
    ideal = calls * args.delay
    print(f"shop, {len(scenarios)} episodes, {calls} model calls per run, the server answering after "
          f"{args.delay * 1000:.0f} ms; medians of {args.reps} runs")
    print(f"{'mode':<16}{'wall s':>9}{'ideal s':>9}")
    print(f"{'serial':<16}{serial:>9.2f}{ideal:>9.2f}")
    print(f"{f'concurrency {args.concurrency}':<16}{concurrent:>9.2f}{ideal / args.concurrency:>9.2f}")
    print(f"ratio serial / concurrent: {serial / concurrent:.1f}x (ideal {args.concurrency}x)")
    print(f"same outcomes in both modes: {outcomes[1] == outcomes[args.concurrency]}")


if __name__ == "__main__":
    main()
