"""Fork and checkpoint/restore an episode mid-way, against resetting and replaying its prefix.

Usage::

    flock /tmp/bench.lock .venv/bin/python benchmarks/fork.py [--reps 200] [--pg-reps 60] \
        [--backends sqlite,postgres,docker]

One scenario of the shop world (``refund-item-0001`` unless ``--scenario``), stress on, played by its
reference solution to ``--turns`` turns (default: all but its last call). Then, interleaved ``--reps``
times on each backend (the machine is shared and noisy; the ratios hold better than the absolute figures):

- ``fork``: ``env.fork()`` (the spare databases warm, as in a search that closes the branches it drops;
  closing, which resets the database and keeps it, is timed apart as ``fork close``);
- ``checkpoint``: ``env.checkpoint()``; ``restore``: ``rehearsal_env.restore(bytes)`` (warm spares too);
- ``cold fork``: a fork when no spare is kept (opens a database: the first fork of a search);
- ``replay``: the obvious alternative, ``reset`` a second env and step the prefix again;
- ``step``: one ``env.step`` of the reference path (median over its turns), and ``checkpoint per turn``:
  a checkpoint after every turn of the whole episode, per turn, as a share of a step; ``chain per turn``: the
  incremental checkpoint after every turn (issue 37: ``CheckpointChain.take``, the turn's delta record; its
  full checkpoint taken at the reset, untimed; amortized with a full one every ``FULL_EVERY`` turns in the
  report); ``turn record per turn``: the same chain keeping each turn as its input instead
  (``CheckpointChain(env, replay=True)``), and ``restore turn records``: restoring that chain at the episode's
  last turn (the full checkpoint, then every turn taken again); ``runner save per turn``: what the runner writes
  per turn to resume mid-episode (``runner._checkpoints``: the checkpoint, the agent and the answer, appended to
  the episode's log).

PostgreSQL is the process's private server (or ``REHEARSAL_POSTGRES_DSN``); the Docker sandbox runs only
when a daemon answers. Medians and p95 in milliseconds.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import rehearsal_env
from rehearsal_env.agents import make_agent
from rehearsal_env.env import close_spares
from rehearsal_env.runner import EpisodeSpec
from rehearsal_env.runner._checkpoints import EpisodeCheckpoints

try:
    from rehearsal_env.env import FULL_EVERY, CheckpointChain
except ImportError:  # before issue 37: no incremental checkpoints
    CheckpointChain, FULL_EVERY = None, 0  # type: ignore[assignment,misc]


def _ms(fn: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    out = fn()
    return (time.perf_counter() - started) * 1000, out


def _reference_actions(scenario: str, backend: str, seed: int) -> list[str]:
    env = rehearsal_env.make(f"shop/{scenario}", backend=backend)
    obs, info = env.reset(seed=seed)
    agent = make_agent("reference", env.scenario)
    actions = []
    while True:
        action = agent(obs, info)
        actions.append(action)
        obs, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            env.close()
            return actions


def _docker_up() -> bool:
    try:
        import docker

        docker.from_env(timeout=3).ping()
        return True
    except Exception:  # no SDK, no daemon: the sandbox is skipped, saying so
        return False


def bench(backend: str, scenario: str, turns: int | None, reps: int, seed: int) -> dict[str, list[float]]:
    folder = Path(tempfile.mkdtemp(prefix="fork-bench-"))
    actions = _reference_actions(scenario, backend, seed)
    k = len(actions) - 1 if turns is None else min(turns, len(actions) - 1)
    prefix = actions[:k]
    env = rehearsal_env.make(f"shop/{scenario}", backend=backend)
    other = rehearsal_env.make(f"shop/{scenario}", backend=backend)
    env.reset(seed=seed)
    for action in prefix:
        env.step(action)
    times: dict[str, list[float]] = {n: [] for n in ("fork", "fork close", "checkpoint", "restore", "replay",
                                                     "cold fork", "step", "checkpoint per turn",
                                                     "chain per turn", "turn record per turn",
                                                     "restore turn records", "runner save per turn")}
    env.fork().close()  # one spare
    for rep in range(reps):
        ms, child = _ms(env.fork)
        times["fork"].append(ms)
        ms, _ = _ms(child.close)
        times["fork close"].append(ms)
        ms, data = _ms(env.checkpoint)
        times["checkpoint"].append(ms)
        ms, back = _ms(lambda: rehearsal_env.restore(data))  # noqa: B023
        times["restore"].append(ms)
        back.close()

        def replay() -> None:
            other.reset(seed=seed)
            for action in prefix:
                other.step(action)
        ms, _ = _ms(replay)
        times["replay"].append(ms)
        if rep % 10 == 0:
            close_spares()
            ms, cold = _ms(env.fork)
            times["cold fork"].append(ms)
            cold.close()
        if rep % 5 == 0:  # the whole episode, stepped with and without a checkpoint after every turn
            other.reset(seed=seed)
            steps, saves, runner, chained, recorded = [], [], [], [], []
            agent = make_agent("reference", other.scenario)
            files = EpisodeCheckpoints(folder, EpisodeSpec(scenario, 0, seed))
            chain = CheckpointChain(other) if CheckpointChain is not None else None
            turned = _replay_chain(other)
            if chain is not None:
                chain.take()  # the full checkpoint, at the reset
            if turned is not None:
                turned.take()
            for action in actions[:-1]:
                ms, _ = _ms(lambda: other.step(action))  # noqa: B023
                steps.append(ms)
                ms, _ = _ms(other.checkpoint)
                saves.append(ms)
                if chain is not None:
                    ms, _ = _ms(chain.take)
                    chained.append(ms)
                if turned is not None:
                    ms, _ = _ms(turned.take)
                    recorded.append(ms)
                def save() -> None:
                    files.answer(1, action)  # noqa: B023
                    files.save(other, agent, "", {})  # noqa: B023
                ms, _ = _ms(save)
                runner.append(ms)
            times["step"].append(statistics.median(steps))
            times["checkpoint per turn"].append(statistics.median(saves))
            if chained:
                times["chain per turn"].append(statistics.median(chained))
            if turned is not None:
                times["turn record per turn"].append(statistics.median(recorded))
                data = turned.data()
                ms, back = _ms(lambda: rehearsal_env.restore(data))  # noqa: B023
                times["restore turn records"].append(ms)
                back.close()
            times["runner save per turn"].append(statistics.median(runner))
    times["checkpoint bytes"] = [float(len(env.checkpoint()))]
    env.close()
    other.close()
    close_spares()
    shutil.rmtree(folder, ignore_errors=True)
    return times


def _replay_chain(env: Any) -> Any:
    """A chain of turn records, where this tree has them (None before)."""
    if CheckpointChain is None:
        return None
    try:
        return CheckpointChain(env, replay=True)
    except TypeError:  # before turn records
        return None


def _replay_every() -> int:
    from rehearsal_env.env._replay import REPLAY_EVERY

    return REPLAY_EVERY


def _p95(values: list[float]) -> float:
    return sorted(values)[min(len(values) - 1, int(0.95 * len(values)))]


def report(backend: str, times: dict[str, list[float]], goal_ms: float) -> None:
    med = {n: statistics.median(v) for n, v in times.items() if v}
    print(f"\n== {backend} ==  (checkpoint {int(med['checkpoint bytes'])} bytes)")
    print(f"{'':22}{'p50 ms':>10}{'p95 ms':>10}{'x replay':>10}")
    for name in ("fork", "fork close", "cold fork", "checkpoint", "restore", "replay", "step", "checkpoint per turn",
                 "chain per turn", "turn record per turn", "restore turn records", "runner save per turn"):
        values = times[name]
        if not values:
            print(f"{name:22}{'n/a':>10}")
            continue
        print(f"{name:22}{med[name]:10.3f}{_p95(values):10.3f}{med['replay'] / med[name]:10.1f}")
    share = med["checkpoint per turn"] / med["step"]
    verdict = "met" if med["fork"] <= goal_ms else "NOT met"
    print(f"fork p50 {med['fork']:.3f} ms against the goal of {goal_ms:g} ms: {verdict}")
    print(f"checkpoint per turn: {100 * share:.1f}% of a step (goal under 10%: {'met' if share < 0.10 else 'NOT met'})")
    if times["chain per turn"]:
        every = FULL_EVERY
        amortized = ((every - 1) * med["chain per turn"] + med["checkpoint"]) / every / med["step"]
        delta = med["chain per turn"] / med["step"]
        print(f"incremental checkpoint per turn: {100 * delta:.1f}% of a step for a turn's delta; "
              f"{100 * amortized:.1f}% with a full one every {every} turns (goal under 10%: "
              f"{'met' if amortized < 0.10 else 'NOT met'})")
    if times["turn record per turn"]:
        every = _replay_every()
        amortized = ((every - 1) * med["turn record per turn"] + med["checkpoint"]) / every / med["step"]
        print(f"turn records: {100 * med['turn record per turn'] / med['step']:.1f}% of a step per turn; "
              f"{100 * amortized:.1f}% with a full one every {every} turns (goal under 10%: "
              f"{'met' if amortized < 0.10 else 'NOT met'}); a restore replays the turns since the full one")
    runner = med["runner save per turn"] / med["step"]
    print(f"the runner's save per turn (checkpoint, agent, answer: two log records): {100 * runner:.1f}% of a step")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="refund-item-0001")
    parser.add_argument("--turns", type=int, default=None, help="prefix length (default: all but the last call)")
    parser.add_argument("--reps", type=int, default=200, help="repetitions on SQLite")
    parser.add_argument("--pg-reps", type=int, default=60, help="repetitions on PostgreSQL and the sandbox")
    parser.add_argument("--backends", default="sqlite,postgres,docker")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    goals = {"sqlite": 1.0, "postgres": 5.0, "docker": 50.0}
    for backend in args.backends.split(","):
        if backend == "docker" and not _docker_up():
            print("\n== docker ==\nskipped: no Docker daemon answers (start dockerd and build the sandbox images: "
                  "python -m rehearsal_env.sandbox)")
            continue
        reps = args.reps if backend == "sqlite" else args.pg_reps
        report(backend, bench(backend, args.scenario, args.turns, reps, args.seed), goals[backend])


if __name__ == "__main__":
    main()
