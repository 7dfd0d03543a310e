"""An agent's SQL, run read-only with a row limit and a time limit.

The backend's :meth:`~rehearsal_env.backends.Database.read_query` decides, with a
real SQL parser of its dialect, that the statement is one ``SELECT``/``WITH``
statement that reads only the world's tables, calls only allowed functions and
not the server clock, then runs it read-only within bounds (SQLite: ``PRAGMA
query_only``, an authorizer, size limits, a deadline and a heap cap; PostgreSQL:
a connection that logs in as an unprivileged role with a ``statement_timeout``).

An agent's bad query is the agent's problem, not the environment's: every
refusal becomes :class:`~rehearsal_env.tools.ToolFailed` (status ``error``),
never a :class:`~rehearsal_env.backends.DatabaseError` that would end the
episode as not scored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...backends import ApplicationError, Database
from ...checks import size_refusal
from ...tools import ToolFailed


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
    """Run one read-only statement of an agent, or raise :class:`ToolFailed` saying why not. A statement too big
    for any parser (:func:`~rehearsal_env.checks.size_refusal`) is refused the same way on every backend."""
    too_big = size_refusal(sql)
    if too_big is not None:
        raise ToolFailed(f"the query is refused: {too_big}")
    try:
        columns, rows, truncated = db.read_query(sql, max_rows=max_rows, timeout_s=timeout_s)
    except ApplicationError as exc:
        hint = "" if "longer than" in str(exc) or "refused" in str(exc) else (
            ". Check table and column names with list_tables / describe_table")
        raise ToolFailed(f"{exc}{hint}") from None
    return ReadResult(tuple(columns), tuple(tuple(r) for r in rows), bool(truncated))


def json_value(value: Any) -> Any:
    """A database value as JSON: numbers stay numbers, anything else becomes text."""
    if value is None or isinstance(value, (int, float, str)):
        return value
    return str(value)


def json_rows(rows: Sequence[Sequence[Any]]) -> list[list[Any]]:
    return [[json_value(v) for v in row] for row in rows]
