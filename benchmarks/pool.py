"""The Ray env pool against the env in process: steps per second per core, medians.

Usage::

    flock /tmp/bench.lock .venv/bin/python benchmarks/pool.py [--actors N] [--repeats R] [--reps K]

Every mode plays the same episodes (the world's scenarios x ``--repeats``, the reference agent deciding in
this process, SQLite in memory) ``--reps`` times:

* ``in process``: ``env.reset`` / ``env.step`` on one database, one env per scenario (one core).
* ``pool``: :class:`rehearsal_env.pool.EnvPool` over N actors on a local Ray with N CPUs, every episode
  in flight at once, one ``await pool.step`` per step (each step a Ray call; the checkpoint after every
  step kept by the driver; records written to a run directory).
* ``pool batched``: the same with one :meth:`~rehearsal_env.pool.EnvPool.step_many` per round (one Ray call
  per actor per round for every session on it).

Printed: steps/s, steps/s per core (the pool's divided by its actors), the ratio to in process per core,
and the driver's CPU seconds per step (it runs the agents and the asyncio loop).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import statistics
import tempfile
import time
from pathlib import Path

from rehearsal_env.agents import make_agent
from rehearsal_env.backends import open_database
from rehearsal_env.env import RehearsalEnv
from rehearsal_env.pool import EnvPool, Stepped
from rehearsal_env.runner import EpisodeSpec, RunConfig, plan, world_for


def in_process(config: RunConfig, specs: list[EpisodeSpec]) -> int:
    """Play the plan with the env in this process; the steps taken."""
    world = world_for(config)
    db = open_database(world, config.backend)
    envs = {s.id: RehearsalEnv(s, world, database=db, stress=config.stress) for s in world.scenarios()}
    steps = 0
    for spec in specs:
        env = envs[spec.scenario]
        agent = make_agent(config.agent, env.scenario)
        observation, info = env.reset(seed=spec.seed)
        while True:
            observation, _, terminated, truncated, info = env.step(agent(observation, info))
            steps += 1
            if terminated or truncated:
                break
    db.close()
    return steps


async def pooled(pool: EnvPool, specs: list[EpisodeSpec], batched: bool) -> int:
    """Play the plan through the pool, every episode at once; the steps taken."""
    world = pool.run.world
    opened = await pool.reset_many([s.scenario for s in specs])
    live = {}
    for spec, o in zip(specs, opened, strict=True):
        assert not isinstance(o, BaseException), o
        live[o.session] = (make_agent(pool.config.agent, world.scenario(spec.scenario)), o.observation, o.info)
    steps = 0

    def advance(session: str, result: Stepped | BaseException) -> None:
        assert not isinstance(result, BaseException), result
        agent = live[session][0]
        if result.terminated or result.truncated:
            del live[session]
        else:
            live[session] = (agent, result.observation, result.info)

    while live:
        calls = [(s, agent(obs, info)) for s, (agent, obs, info) in live.items()]
        if batched:
            results = await pool.step_many(calls)
        else:
            results = list(await asyncio.gather(*(pool.step(s, a) for s, a in calls), return_exceptions=True))
        for (session, _), result in zip(calls, results, strict=True):
            advance(session, result)
        steps += len(calls)
    return steps


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world", default="shop")
    parser.add_argument("--actors", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()

    import ray

    config = RunConfig(world=args.world, repeats=args.repeats, run_id="run_pool_bench")
    specs = plan(config, world_for(config))
    print(f"{len(specs)} episodes ({args.world}, {args.repeats} repeats), {args.actors} actors, {args.reps} reps, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    ray.init(num_cpus=args.actors, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    tmp = Path(tempfile.mkdtemp(prefix="rehearsal-pool-bench-"))
    rates: dict[str, list[float]] = {"in process": [], "pool": [], "pool batched": []}
    driver_cpu: dict[str, list[float]] = {"pool": [], "pool batched": []}
    try:
        in_process(config, specs[:20])  # warm
        for rep in range(args.reps):
            begin = time.perf_counter()
            steps = in_process(config, specs)
            rates["in process"].append(steps / (time.perf_counter() - begin))
            for mode in ("pool", "pool batched"):
                pool = EnvPool(config, tmp / f"{mode.replace(' ', '-')}-{rep}", actors=args.actors,
                               sessions_per_actor=len(specs), strategy="DEFAULT")
                asyncio.run(pooled(pool, specs[:20], mode == "pool batched"))  # warm the actors
                cpu, start = time.process_time(), time.perf_counter()
                steps = asyncio.run(pooled(pool, specs, mode == "pool batched"))
                wall = time.perf_counter() - start
                rates[mode].append(steps / wall)
                driver_cpu[mode].append((time.process_time() - cpu) / steps * 1000)
                pool.finish()
    finally:
        ray.shutdown()
    base = statistics.median(rates["in process"])
    print(f"{'mode':<14} {'steps/s':>9} {'per core':>9} {'ratio/core':>11} {'driver ms/step':>15}")
    for mode, values in rates.items():
        cores = 1 if mode == "in process" else args.actors
        rate = statistics.median(values)
        ms = f"{statistics.median(driver_cpu[mode]):.2f}" if mode in driver_cpu else "-"
        print(f"{mode:<14} {rate:>9.0f} {rate / cores:>9.0f} {rate / cores / base:>11.2f} {ms:>15}")
    print("note: on a machine with as many cores as actors plus one for the driver; with fewer, the driver "
          "(agents, asyncio, Ray calls) competes with the actors for the same cores")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
