"""Per-turn checks run again only when the database changed (``state_mark``, :class:`GoalShare`).

A backend's ``state_mark()`` must stay equal while nothing a check reads changes (reads, a lookup, a rejected
call) and must move on every change: a committed write, a rolled-back one, a schema change, a reset, and on
PostgreSQL a write by another connection (what a sandboxed application does). Whatever the marks say, the shaped
rewards must be those of running every check every turn.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

import rehearsal_env
from rehearsal_env.agents import make_agent
from rehearsal_env.backends import ApplicationError, Database, open_database
from rehearsal_env.rewards.shaping import GoalShare, goal_share

WORLD = rehearsal_env.load_world("shop")


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> Iterator[tuple[str, dict[str, Any]]]:
    if request.param == "postgres":  # the fixture skips without PostgreSQL (fails under REHEARSAL_REQUIRE_POSTGRES=1)
        yield "postgres", {"dsn": request.getfixturevalue("postgres_dsn")}
    else:
        yield "sqlite", {}


def _order(db: Database) -> tuple[Any, ...]:
    return db.query("SELECT id, status FROM orders ORDER BY id LIMIT 1")[0]


def test_the_mark_stays_while_reading_and_moves_on_every_change(backend: tuple[str, dict[str, Any]]) -> None:
    name, options = backend
    db = open_database(WORLD, name, **options)
    try:
        first = db.state_mark()  # type: ignore[attr-defined]
        assert first is not None
        order_id, status = _order(db)
        db.check_value("SELECT COUNT(*) FROM orders")
        assert db.state_mark() == first, "reads moved the mark"  # type: ignore[attr-defined]

        with db.transaction():
            db.execute("UPDATE orders SET status = ? WHERE id = ?", ("cancelled", order_id))
            assert db.state_mark() is None  # type: ignore[attr-defined]  # unknown inside a tool call
        wrote = db.state_mark()  # type: ignore[attr-defined]
        assert wrote != first
        db.check_value("SELECT COUNT(*) FROM orders")
        assert db.state_mark() == wrote  # type: ignore[attr-defined]

        with db.transaction():  # a write that changes nothing still counts (conservative), never the reverse
            db.execute("UPDATE orders SET status = ? WHERE id = ?", ("cancelled", order_id))
        rewrote = db.state_mark()  # type: ignore[attr-defined]
        assert rewrote != wrote

        with pytest.raises(ApplicationError):
            with db.transaction():
                db.execute("UPDATE orders SET status = ? WHERE id = ?", (status, order_id))
                raise ApplicationError("the tool gave up after writing")
        assert db.state_mark() not in (None, first, wrote, rewrote)  # type: ignore[attr-defined]
        assert _order(db) == (order_id, "cancelled")

        db.reset()
        after_reset = db.state_mark()  # type: ignore[attr-defined]
        assert after_reset not in (wrote, rewrote) and _order(db) == (order_id, status)
    finally:
        db.close()


def test_a_schema_change_moves_the_sqlite_mark() -> None:
    db = open_database(WORLD, "sqlite")
    try:
        with db.transaction():
            db.execute("UPDATE orders SET status = status WHERE id = (SELECT MIN(id) FROM orders)")
        before = db.state_mark()  # type: ignore[attr-defined]
        db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY)")  # no row changes, a new table
        assert db.state_mark() != before  # type: ignore[attr-defined]
    finally:
        db.close()


def test_another_connections_commit_moves_the_postgres_mark(postgres_dsn: str) -> None:
    import psycopg

    db = open_database(WORLD, "postgres", dsn=postgres_dsn)
    try:
        before = db.state_mark()  # type: ignore[attr-defined]
        dsn = db._cluster.db_dsn(db.name)  # type: ignore[attr-defined]  # as a sandboxed application connects
        with psycopg.connect(dsn, autocommit=True) as app:
            app.execute("UPDATE orders SET status = 'cancelled' WHERE id = (SELECT MIN(id) FROM orders)")
        assert db.state_mark() != before  # type: ignore[attr-defined]
    finally:
        db.close()


def _act(tool: str, **args: Any) -> str:
    return json.dumps({"tool": tool, "args": args})


def test_goal_share_runs_the_checks_only_after_a_change(backend: tuple[str, dict[str, Any]]) -> None:
    name, options = backend
    scenario = WORLD.scenario("change-address-0001")
    env = rehearsal_env.RehearsalEnv(scenario, WORLD, backend=name, stress=False, reward_profile="rl_turns",
                                     **options)
    try:
        env.reset(seed=0)
        share = GoalShare(scenario.goal_checks)
        assert share(env.db) == goal_share(env.db, scenario.goal_checks)
        ran = share.evaluated
        kinds = []
        for call in scenario.reference.calls[:-1]:
            env.step(_act(call.tool, **dict(call.args)))
            kinds.append(env.tools[call.tool].kind)
            assert share(env.db) == goal_share(env.db, scenario.goal_checks)
            if kinds[-1] == "read":
                assert share.evaluated == ran, f"the checks ran again after {call.tool}, which only reads"
            else:
                assert share.evaluated == ran + 1, f"the checks did not run again after {call.tool}, a write"
            ran = share.evaluated
        assert "read" in kinds and "write" in kinds, kinds
        assert share(env.db) == goal_share(env.db, scenario.goal_checks) and share.evaluated == ran
        env.step("not an action")  # rejected: nothing changed
        assert share(env.db) == goal_share(env.db, scenario.goal_checks) and share.evaluated == ran
        assert ran >= 2  # the start and the write at least
    finally:
        env.close()


def test_shaped_rewards_are_those_of_running_every_check(backend: tuple[str, dict[str, Any]]) -> None:
    name, options = backend
    for scenario in WORLD.scenarios("train")[::9]:
        for agent in ("reference", *(w.name for w in scenario.wrong[:1])):
            rewards = []
            for marks in (True, False):
                env = rehearsal_env.RehearsalEnv(scenario, WORLD, backend=name, stress=True,
                                                 reward_profile="rl_turns", **options)
                if not marks:
                    env._goal_share = _Unmarked(scenario.goal_checks)  # type: ignore[assignment]
                try:
                    observation, info = env.reset(seed=5)
                    policy = make_agent(agent, scenario)
                    got = []
                    while True:
                        observation, reward, terminated, truncated, info = env.step(policy(observation, info))
                        got.append(reward)
                        if terminated or truncated:
                            break
                    rewards.append(got)
                finally:
                    env.close()
            assert rewards[0] == rewards[1], (scenario.id, agent)


class _Unmarked(GoalShare):
    """Every check every time (the behaviour before marks)."""

    def __call__(self, db: Database) -> float:
        return goal_share(db, self.goal_checks)
