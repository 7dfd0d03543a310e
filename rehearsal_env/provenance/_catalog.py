"""Does a suite describe the world it is served on? (``capabilities.catalog_match``)

Every check and answer oracle is compiled (``EXPLAIN``, nothing runs) against
an empty in-memory SQLite database built from the world's catalog alone, so a
table or column the catalog lacks is found exactly, and every role, tool and
scope table a scenario names is looked up in the world.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

from ..backends._dialect import create_table
from ..scenarios import Scenario
from ..tools import BUILTIN_TOOLS, retry_operation
from ..worlds import World


def _catalog_connection(world: World) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    for table in world.tables:
        for statement in create_table(table, "sqlite"):
            conn.execute(statement)
    return conn


def _compile(conn: sqlite3.Connection, sql: str, params: Sequence[Any]) -> str | None:
    try:
        conn.execute(f"EXPLAIN {sql}", tuple(params)).fetchall()
    except sqlite3.Error as exc:
        return str(exc)
    return None


def _scenario_problems(world: World, conn: sqlite3.Connection, s: Scenario) -> Iterator[str]:
    where = f"scenario {s.id!r}"
    if s.world != world.name:
        yield f"{where}: belongs to world {s.world!r}, served on {world.name!r}"
    roles = {r.name for r in world.roles}
    if s.role not in roles:
        yield f"{where}: role {s.role!r} is not a role of the world (roles: {', '.join(sorted(roles))})"
    kinds = [("goal check", c) for c in s.goal_checks] + [("hard rule", c) for c in s.hard_rules]
    for kind, check in kinds:
        error = _compile(conn, check.sql, check.params)
        if error:
            yield f"{where}: {kind} {check.name!r} does not compile against the catalog: {error}"
    answer_sql = getattr(s, "answer_sql", None)
    if answer_sql:
        error = _compile(conn, answer_sql, ())
        if error:
            yield f"{where}: the answer oracle does not compile against the catalog: {error}"
    tables = {t.name for t in world.tables}
    for name in s.scope:
        if name not in tables:
            yield f"{where}: scope table {name!r} is not in the catalog"
    tools = {t.name for t in (*world.tools, *BUILTIN_TOOLS, retry_operation)}
    for solution in (s.reference, *s.wrong):
        for call in solution.calls:
            if call.tool not in tools:
                yield f"{where}: solution {solution.name!r} calls tool {call.tool!r}, which the world lacks"


@functools.lru_cache(maxsize=32)
def catalog_problems(world: World) -> tuple[str, ...]:
    """Every way the world's suite fails to describe the world (empty: ``catalog_match`` is true)."""
    conn = _catalog_connection(world)
    try:
        return tuple(p for s in world.scenarios() for p in _scenario_problems(world, conn, s))
    finally:
        conn.close()
