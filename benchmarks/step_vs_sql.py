"""A step against the same statements run as raw SQL (SQLite): what the env adds to the application's own SQL.

Usage::

    flock /tmp/bench.lock .venv/bin/python benchmarks/step_vs_sql.py [--scenarios 20] [--reps 30]

The reference solutions of the first ``--scenarios`` shop scenarios (stress off: the same calls every time) are
played once with the SQLite backend's statements recorded per step (every statement a tool's code ran,
``BEGIN``/``COMMIT`` around its writes, and the checks the verdict ran at the episode's end). Then, interleaved
``--reps`` times:

- ``step``: ``env.reset()`` (untimed) and each ``env.step(action)`` timed;
- ``raw SQL``: the obvious alternative, the application running the very same statements itself with
  ``sqlite3`` on its own in-memory copy of the world (restored with ``deserialize`` before each episode,
  untimed), each step's statements timed together.

Printed: medians per step of both and their ratio, over every step and over the first step that writes after
a reset (where a session makes its own copy of the shared snapshot), and the same per scenario's whole episode.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import time
from collections.abc import Sequence
from typing import Any

import rehearsal_env
from rehearsal_env.agents import make_agent
from rehearsal_env.backends import sqlite as sqlite_backend

Statement = tuple[str, tuple[Any, ...]]


def record(scenario: str) -> tuple[list[str], list[list[Statement]]]:
    """The reference's actions and, per step, the statements the backend ran (``BEGIN``/``COMMIT`` included)."""
    env = rehearsal_env.make(f"shop/{scenario}", stress=False)
    steps: list[list[Statement]] = []
    cls = sqlite_backend.SQLiteDatabase
    run, command, check = cls._run, cls._command, cls._check

    def run_logged(db: Any, sql: str, params: Sequence[Any]) -> Any:
        steps[-1].append((sql, tuple(params)))
        return run(db, sql, params)

    def command_logged(db: Any, sql: str) -> None:
        steps[-1].append((sql, ()))
        command(db, sql)

    def check_logged(db: Any, sql: str, params: Sequence[Any] = ()) -> Any:
        steps[-1].append((sql, tuple(params)))
        return check(db, sql, params)

    obs, info = env.reset(seed=0)
    agent = make_agent("reference", env.scenario)
    actions: list[str] = []
    cls._run, cls._command, cls._check = run_logged, command_logged, check_logged  # type: ignore[method-assign,assignment]
    try:
        while True:
            action = agent(obs, info)
            actions.append(action)
            steps.append([])
            obs, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
    finally:
        cls._run, cls._command, cls._check = run, command, check  # type: ignore[method-assign]
    env.close()
    for batch in steps:  # a shared database begins on its new copy, inside the backend: BEGIN where the tool began
        if any(sql in ("COMMIT", "ROLLBACK") for sql, _ in batch) and not any(sql == "BEGIN" for sql, _ in batch):
            batch.insert(0, ("BEGIN", ()))
    return actions, steps


def writes(statements: list[Statement]) -> bool:
    return any(sql.split(None, 1)[0].upper() in {"INSERT", "UPDATE", "DELETE", "BEGIN"} for sql, _ in statements)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", type=int, default=20)
    parser.add_argument("--reps", type=int, default=30)
    args = parser.parse_args()
    ids = [s.id for s in rehearsal_env.load_world("shop").scenarios()][:args.scenarios]
    plans = {sid: record(sid) for sid in ids}
    envs = {sid: rehearsal_env.make(f"shop/{sid}", stress=False) for sid in ids}
    snapshot = envs[ids[0]].db._snapshot  # type: ignore[attr-defined]  # the world's serialized snapshot
    raw = sqlite3.connect(":memory:", isolation_level=None)
    raw.execute("PRAGMA foreign_keys = ON")
    step_ms: list[float] = []
    raw_ms: list[float] = []
    first_step: list[float] = []
    first_raw: list[float] = []
    episode_step: list[float] = []
    episode_raw: list[float] = []
    for _ in range(args.reps):
        for sid in ids:
            actions, statements = plans[sid]
            env = envs[sid]
            env.reset(seed=0)
            raw.deserialize(snapshot)
            wrote = False
            total_step = total_raw = 0.0
            for action, batch in zip(actions, statements, strict=True):
                t0 = time.perf_counter()
                env.step(action)
                t1 = time.perf_counter()
                for sql, params in batch:
                    raw.execute(sql, params).fetchall()
                t2 = time.perf_counter()
                step_ms.append((t1 - t0) * 1000)
                raw_ms.append((t2 - t1) * 1000)
                total_step += t1 - t0
                total_raw += t2 - t1
                if not wrote and writes(batch):
                    wrote = True
                    first_step.append((t1 - t0) * 1000)
                    first_raw.append((t2 - t1) * 1000)
            episode_step.append(total_step * 1000)
            episode_raw.append(total_raw * 1000)
    print(f"shop, {len(ids)} reference episodes x {args.reps}, stress off, SQLite; medians in ms")
    print(f"{'':28}{'step':>10}{'raw SQL':>10}{'ratio':>8}")
    for name, a, b in (("every step", step_ms, raw_ms), ("first write after a reset", first_step, first_raw),
                       ("whole episode", episode_step, episode_raw)):
        sa, sb = statistics.median(a), statistics.median(b)
        print(f"{name:28}{sa:10.3f}{sb:10.3f}{sa / sb:8.2f}x")
    ratio = statistics.median(step_ms) / statistics.median(raw_ms)
    print(f"goal: a step at most 2x its raw SQL: {'met' if ratio <= 2 else 'NOT met'} ({ratio:.2f}x)")


if __name__ == "__main__":
    main()
