"""An agent's SQL, run read-only with a row limit and a time limit.

The statement must first pass :func:`~rehearsal_env.checks.validate_check_sql`
(one ``SELECT``/``WITH`` statement, no word that writes or changes session
state). It then runs read-only on the episode's database:

- a backend that offers ``read_query(sql, max_rows=, timeout_s=) -> (columns, rows, truncated)``
  runs it (the seam the backends are asked to grow);
- on SQLite: ``PRAGMA query_only``, an authorizer that allows nothing but
  reading, and a progress handler that interrupts the query at the deadline;
- on PostgreSQL: ``SET TRANSACTION READ ONLY`` and ``SET LOCAL statement_timeout``
  inside the tool call's transaction (column names are then ``c1``, ``c2``, ...).

An agent's bad query is the agent's problem, not the environment's: every
failure becomes :class:`~rehearsal_env.tools.ToolFailed` (status ``error``),
never a :class:`~rehearsal_env.backends.DatabaseError` that would end the
episode as not scored.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...backends import Database, DatabaseError
from ...checks import CheckRefused, validate_check_sql
from ...tools import ToolFailed

_READ_ACTIONS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION,
                 getattr(sqlite3, "SQLITE_RECURSIVE", 33)}


@dataclass(frozen=True)
class ReadResult:
    """The rows a read-only query returned, cut at the row limit."""

    columns: tuple[str, ...]
    """Column names, in order."""
    rows: tuple[tuple[Any, ...], ...]
    """At most the row limit of rows."""
    truncated: bool
    """Whether the query returned more rows than the limit."""


def read_only_query(db: Database, sql: str, *, max_rows: int, timeout_s: float) -> ReadResult:
    """Run one read-only statement of an agent, or raise :class:`ToolFailed` saying why not."""
    try:
        validate_check_sql(sql, name="run_sql")
    except CheckRefused as exc:
        raise ToolFailed(f"{exc}. run_sql runs one read-only SELECT statement") from None
    hook = getattr(db, "read_query", None)
    if callable(hook):
        columns, rows, truncated = hook(sql, max_rows=max_rows, timeout_s=timeout_s)
        return ReadResult(tuple(columns), tuple(tuple(r) for r in rows), bool(truncated))
    if db.dialect == "sqlite":
        return _sqlite(db, sql, max_rows, timeout_s)
    return _postgres(db, sql, max_rows, timeout_s)


def _authorize(action: int, *_: Any) -> int:
    return sqlite3.SQLITE_OK if action in _READ_ACTIONS else sqlite3.SQLITE_DENY


def _sqlite(db: Database, sql: str, max_rows: int, timeout_s: float) -> ReadResult:
    conn: sqlite3.Connection | None = getattr(db, "_conn", None)
    if conn is None:
        raise DatabaseError("this SQLite backend exposes no connection and no read_query(); "
                            "add Database.read_query to run agents' SQL read-only")
    deadline = time.monotonic() + timeout_s
    conn.execute("PRAGMA query_only = ON")
    conn.set_authorizer(_authorize)
    conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
    try:
        cursor = conn.execute(sql)
        rows = cursor.fetchmany(max_rows + 1)
        columns = tuple(d[0] for d in cursor.description or ())
        cursor.close()
    except sqlite3.Error as exc:
        raise ToolFailed(_explain(str(exc), timeout_s)) from None
    finally:
        conn.set_progress_handler(None, 0)
        conn.set_authorizer(None)
        conn.execute("PRAGMA query_only = OFF")
    return ReadResult(columns, tuple(rows[:max_rows]), len(rows) > max_rows)


def _postgres(db: Database, sql: str, max_rows: int, timeout_s: float) -> ReadResult:
    body = sql.strip().rstrip(";")
    try:
        db.query("SET TRANSACTION READ ONLY")
        db.query(f"SET LOCAL statement_timeout = {max(1, int(timeout_s * 1000))}")
        rows = db.query(f"SELECT * FROM ({body}) AS agent_query LIMIT {max_rows + 1}")
    except DatabaseError as exc:
        raise ToolFailed(_explain(str(exc), timeout_s)) from None
    width = len(rows[0]) if rows else 0
    return ReadResult(tuple(f"c{i + 1}" for i in range(width)), tuple(tuple(r) for r in rows[:max_rows]),
                      len(rows) > max_rows)


def _explain(error: str, timeout_s: float) -> str:
    if "interrupt" in error or "statement timeout" in error or "canceling statement" in error:
        return (f"the query ran longer than {timeout_s:g}s and was stopped; "
                "filter earlier, join on keys, or aggregate in the query")
    if "not authorized" in error or "read-only" in error or "readonly" in error:
        return f"the query tried to do more than read ({error}); run_sql only reads"
    return f"the query failed: {error}. Check table and column names with list_tables / describe_table"


def json_value(value: Any) -> Any:
    """A database value as JSON: numbers stay numbers, anything else becomes text."""
    if value is None or isinstance(value, (int, float, str)):
        return value
    return str(value)


def json_rows(rows: Sequence[Sequence[Any]]) -> list[list[Any]]:
    return [[json_value(v) for v in row] for row in rows]
