"""Seeded fuzzing: whatever an agent sends, the env answers; nothing crashes and nothing goes unscored.

A bad action is the agent's problem (a rejected attempt or a tool error the agent can read), never
an exception and never a not-scored episode, on either backend. This found integer overflow and NUL
characters reaching the database before argument validation refused them.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

import rehearsal_env
from rehearsal_env import RehearsalEnv
from rehearsal_env.backends import Database, open_database
from rehearsal_env.worlds import application_of

IN_PROCESS = [w for w in rehearsal_env.world_names() if application_of(rehearsal_env.load_world(w)) is None]
"""Worlds whose tools run in this process (a world calling an application over HTTP needs the sandbox)."""

VALUES: list[Any] = [None, 0, -1, 10**30, 2**63 - 1, -(2**63), 1.5, float("nan"), "x", "", "é中", "é\x00",
                     [], {}, [1, "a"], {"a": 1}, True, "' OR 1=1 --", "'; DROP TABLE orders; --", "%", "a" * 5000]
SQL = ["SELECT 1/0", "SELECT * FROM orders", "SELECT 1; SELECT 2", "SELECT * FROM nope", "DELETE FROM orders",
       "SELECT CAST('x' AS INTEGER) + id FROM orders"]


def fuzz(world: rehearsal_env.World, db: Database, every: int, steps: int, seed: int) -> int:
    """Play random actions on every ``every``-th scenario; return the episodes that ended."""
    rng = random.Random(seed)
    ended = 0
    for scenario in world.scenarios()[::every]:
        env = RehearsalEnv(scenario, world, database=db)
        env.reset(seed=seed)
        names: list[Any] = [*env.tools, "nope", 5, None]
        for _ in range(steps):
            name = rng.choice(names)
            tool = env.tools.get(name) if isinstance(name, str) else None
            params = list(tool.parameters["properties"]) if tool else ["a"]
            args: Any = {p: rng.choice(VALUES) for p in params if rng.random() < 0.85}
            if name == "run_sql":
                args = {"sql": rng.choice(SQL)}
            elif rng.random() < 0.1:
                args = rng.choice(VALUES)
            action = json.dumps({"tool": name, "args": args}) if rng.random() < 0.95 else rng.choice(["", "{", "[]"])
            observation, _, terminated, truncated, info = env.step(action)
            assert env.observation_space.contains(observation)
            if terminated or truncated:
                verdict = info["verdict"]
                assert verdict.outcome.value != "not_scored", (scenario.id, action, verdict.reason)
                ended += 1
                env.reset(seed=seed)
    return ended


@pytest.mark.parametrize("world", IN_PROCESS)
def test_random_actions_on_sqlite(world: str) -> None:
    w = rehearsal_env.load_world(world)
    db = open_database(w)
    assert fuzz(w, db, every=3, steps=30, seed=7) > 0
    db.close()


@pytest.mark.parametrize("world", IN_PROCESS)
def test_random_actions_on_postgres(world: str, postgres_dsn: str) -> None:
    w = rehearsal_env.load_world(world)
    db = open_database(w, "postgres", dsn=postgres_dsn)
    try:
        assert fuzz(w, db, every=6, steps=20, seed=11) > 0
    finally:
        db.close()
