"""An agent's SQL, run read-only with a row limit and a time limit.

The statement must first pass :func:`~rehearsal_env.checks.validate_check_sql`
(one ``SELECT``/``WITH`` statement, no word that writes or changes session
state). It then runs through the backend's :meth:`~rehearsal_env.backends.Database.read_query`,
read-only on every backend (SQLite: ``PRAGMA query_only``, a read-only authorizer
and a deadline; PostgreSQL: a read-only transaction as a role that cannot
write, with a ``statement_timeout``).

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
from ...checks import CheckRefused, validate_check_sql
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
    """Run one read-only statement of an agent, or raise :class:`ToolFailed` saying why not."""
    try:
        validate_check_sql(sql, name="run_sql")
    except CheckRefused as exc:
        raise ToolFailed(f"{exc}. run_sql runs one read-only SELECT statement") from None
    try:
        columns, rows, truncated = db.read_query(sql, max_rows=max_rows, timeout_s=timeout_s)
    except ApplicationError as exc:
        hint = "" if "longer than" in str(exc) else ". Check table and column names with list_tables / describe_table"
        raise ToolFailed(f"{exc}{hint}") from None
    return ReadResult(tuple(columns), tuple(tuple(r) for r in rows), bool(truncated))


def json_value(value: Any) -> Any:
    """A database value as JSON: numbers stay numbers, anything else becomes text."""
    if value is None or isinstance(value, (int, float, str)):
        return value
    return str(value)


def json_rows(rows: Sequence[Sequence[Any]]) -> list[list[Any]]:
    return [[json_value(v) for v in row] for row in rows]
