"""Runner throughput: episodes per second of the bare env loop, the serial runner and 1..N Ray workers.

Usage::

    .venv/bin/python benchmarks/throughput.py [--max-workers N] [--repeats R] [--reps K]

``--max-workers`` defaults to the CPU count (on 16 cores: 1..16 workers; the
plan grows so each worker gets at least 16 batches: ~8,200 episodes, ~5 minutes).

Every mode plays the same plan (the world's scenarios x ``--repeats``, scripted
reference agent, SQLite in memory) ``--reps`` times; medians are printed.

* ``bare loop``: ``env.reset`` / ``env.step`` with one env per scenario on one
  database, no records: the ceiling for one core.
* ``records``: the bare loop plus each episode's record (what a worker does), in memory.
* ``serial``: :func:`rehearsal_env.runner.run` (records, Parquet parts, summary).
* ``ray N``: :func:`rehearsal_env.runner.run_on_ray` over N warm actors (their
  start-up is timed apart), the driver writing the parts.

Printed per mode: episodes/s; per core (divided by the workers) as a ratio to
the bare loop and to ``records``; the per-episode overhead in ms over each; the
scaling efficiency ``rate(N) / (N * rate(1))``; the actors' start-up time.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from rehearsal_env.agents import make_agent
from rehearsal_env.backends import open_database
from rehearsal_env.env import RehearsalEnv
from rehearsal_env.runner import (
    EpisodeSpec,
    EpisodeWorker,
    RayPool,
    RunConfig,
    plan,
    resolve,
    run,
    run_episode,
    run_on_ray,
    world_for,
)


@dataclass(frozen=True)
class Result:
    """One mode's measurements."""

    mode: str
    """``bare loop``, ``serial`` or ``ray N``."""
    workers: int
    """Processes playing episodes (1 for bare and serial)."""
    rates: tuple[float, ...]
    """Episodes per second, one per repetition."""

    @property
    def rate(self) -> float:
        """The median rate."""
        return statistics.median(self.rates)


def bare_loop(config: RunConfig, specs: list[EpisodeSpec]) -> Callable[[], None]:
    """The plain Gymnasium loop over the plan, one env per scenario on one database, nothing recorded."""
    world = world_for(config)
    db = open_database(world, config.backend)
    envs = {s.id: RehearsalEnv(s, world, database=db, stress=config.stress) for s in world.scenarios()}

    def play() -> None:
        for spec in specs:
            env = envs[spec.scenario]
            run_episode(env, make_agent(config.agent, env.scenario), seed=spec.seed)

    return play


def records_loop(config: RunConfig, specs: list[EpisodeSpec]) -> Callable[[], None]:
    """The bare loop plus making each episode's record (a worker's whole job), nothing written."""
    worker = EpisodeWorker(resolve(config))
    return lambda: None if worker.play_batch(specs) else None


def timed(fns: Mapping[str, Callable[[], object]], episodes: int, reps: int) -> dict[str, list[float]]:
    """Episodes per second of each function, ``reps`` times, the functions interleaved in each repetition."""
    rates: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(reps):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            rates[name].append(episodes / (time.perf_counter() - start))
    return rates


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world", default="shop")
    parser.add_argument("--repeats", type=int, default=None,
                        help="episodes per scenario (default: enough for 16 batches per worker at "
                             "--max-workers, at least 20)")
    parser.add_argument("--max-workers", type=int, default=os.cpu_count() or 1,
                        help="measure 1..N Ray workers (default: the CPU count)")
    parser.add_argument("--reps", type=int, default=3, help="repetitions per mode; medians are printed")
    parser.add_argument("--batch-size", type=int, default=32, help="episodes per actor call (default: 32)")
    parser.add_argument("--inflight", type=int, default=2, help="batches queued per actor (default: 2)")
    args = parser.parse_args()

    import ray

    scenarios = len(plan(RunConfig(world=args.world), world_for(RunConfig(world=args.world))))
    repeats = args.repeats or max(20, -(-16 * args.batch_size * args.max_workers // scenarios))
    config = RunConfig(world=args.world, repeats=repeats, batch_size=args.batch_size)
    specs = plan(config, world_for(config))
    n = len(specs)
    print(f"{n} episodes ({args.world}, all splits, {repeats} repeats), batch {args.batch_size}, "
          f"{args.inflight} in flight per actor, {args.reps} reps, {os.cpu_count()} CPUs")
    if n < 4 * args.batch_size * args.max_workers:
        print(f"note: {-(-n // args.batch_size)} batches for up to {args.max_workers} workers; raise "
              "--repeats for at least 4 batches per worker, or the last batches leave workers idle")
    tmp = Path(tempfile.mkdtemp(prefix="rehearsal-throughput-"))
    outs = iter(range(1 << 30))

    def serial() -> None:
        run(config, tmp / f"serial-{next(outs)}")

    local = {"bare loop": bare_loop(config, specs), "records": records_loop(config, specs), "serial": serial}
    for fn in local.values():
        fn()  # warm: snapshot, provenance hash, imports
    results = [Result(name, 1, tuple(rates)) for name, rates in timed(local, n, args.reps).items()]

    ray.init(num_cpus=args.max_workers, include_dashboard=False, log_to_driver=False,
             logging_level=logging.ERROR)
    startups = {}
    try:
        for workers in range(1, args.max_workers + 1):
            start = time.perf_counter()
            pool = RayPool(config, workers, inflight=args.inflight)
            startups[workers] = time.perf_counter() - start
            with pool:
                def on_ray(pool: RayPool = pool, workers: int = workers) -> None:
                    run_on_ray(config, tmp / f"ray-{next(outs)}", workers=workers, pool=pool)

                on_ray()  # warm
                rates = timed({"ray": on_ray}, n, args.reps)["ray"]
                results.append(Result(f"ray {workers}", workers, tuple(rates)))
    finally:
        ray.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)
    report(results, startups)
    return 0


def report(results: list[Result], startups: dict[int, float]) -> None:
    """The table: rate, per-core ratios to the bare loop and to records, overheads, scaling, start-up."""
    bare = next(r.rate for r in results if r.mode == "bare loop")
    recs = next(r.rate for r in results if r.mode == "records")
    one = next(r.rate for r in results if r.mode == "ray 1")
    print(f"\n{'mode':<11}{'episodes/s':>11}{'/core vs bare':>15}{'vs records':>12}{'+ms/ep vs bare':>16}"
          f"{'vs records':>12}{'scaling':>9}{'start s':>9}")
    for r in results:
        core = r.rate / r.workers
        on_ray = r.mode.startswith("ray")
        scaling = f"{r.rate / (r.workers * one):>9.2f}" if on_ray else f"{'':>9}"
        startup = f"{startups[r.workers]:>9.1f}" if on_ray else f"{'':>9}"
        print(f"{r.mode:<11}{r.rate:>11,.0f}{core / bare:>15.2f}{core / recs:>12.2f}"
              f"{(1 / core - 1 / bare) * 1e3:>+16.3f}{(1 / core - 1 / recs) * 1e3:>+12.3f}{scaling}{startup}")
    print("\nrates per rep:", {r.mode: [round(x) for x in r.rates] for r in results})


if __name__ == "__main__":
    raise SystemExit(main())
