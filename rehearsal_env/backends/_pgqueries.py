"""Checks and agents' queries on PostgreSQL: what they must pass first, and how their failures read.

A check's text is translated (:func:`._pgsql.translate`, sqlglot's tokens) and must pass
PostgreSQL's own parser on the exact text the server receives (:func:`._pgguard.refusal`:
one SELECT, no clock); an agent's the same parser with the agent's allow-list of
functions and tables. Both then run on the env's reader (:class:`._pgread.Reader`), whose failures
become what the caller's contract says: for a check :class:`~rehearsal_env.checks.CheckRefused`
or :class:`~rehearsal_env.checks.CheckError`; for an agent an
:class:`~rehearsal_env.backends.ApplicationError` it reads; a lost connection is a
:class:`~rehearsal_env.backends.DatabaseError` either way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from ..checks import CheckError, CheckRefused, agent_bounds_refusal
from ._database import ApplicationError, DatabaseError, Row
from ._pgguard import refusal, server_text
from ._pgread import RESULT_BYTES, Reader, capped, connection_lost, refused, timed_out, uncapped
from ._pgsql import SqlNotAllowed, translate
from .sqlite import single_value


def first_line(exc: BaseException) -> str:
    return str(exc).strip().split("\n", 1)[0]


def check_text(sql: str, keys: frozenset[str]) -> str:
    """A check's PostgreSQL text, or :class:`CheckRefused` saying why it may not run."""
    try:
        text = translate(sql, keys).text
    except SqlNotAllowed as exc:
        raise CheckRefused(f"the check is refused: {exc}") from exc
    why = refusal(server_text(text))
    if why is not None:
        raise CheckRefused(f"the check is refused: {why}: {sql!r}")
    return text


def run_check(reader: Reader, text: str, params: Sequence[Any], *, timeout_ms: int) -> Any:
    """The one value of a check's text run on ``reader`` (no parsing: the server's layers alone)."""
    try:
        _, rows = reader.rows(text, params, timeout_ms=timeout_ms)
    except psycopg.Error as exc:
        if refused(exc):
            raise CheckRefused(f"the check tried to do more than read: {first_line(exc)}") from exc
        if timed_out(exc):
            raise CheckError(f"the check ran longer than {timeout_ms} ms and was cancelled; "
                             "make it cheaper (filter on indexed columns)") from exc
        if connection_lost(exc):
            raise DatabaseError(f"PostgreSQL failed while running a check: {first_line(exc)}") from exc
        raise CheckError(f"the check's query failed: {first_line(exc)}") from exc
    return single_value(rows)


def agent_text(sql: str, keys: frozenset[str], tables: frozenset[str]) -> str:
    """An agent's PostgreSQL text (no trailing ``;``), or :class:`ApplicationError` saying why not. The bounds
    of :func:`~rehearsal_env.checks.agent_bounds_refusal` come first, read on the agent's (SQLite) text exactly
    as the SQLite backend reads them, so both refuse the same texts with the same words."""
    body = ""
    why = agent_bounds_refusal(sql)
    if why is None:
        try:
            body = translate(sql, keys).text.strip().rstrip(";")
        except SqlNotAllowed as exc:
            why = str(exc)
        else:
            why = refusal(server_text(body), tables)
    if why is not None:
        raise ApplicationError(f"the query is refused: {why}. Only one read-only SELECT statement on the "
                               "world's tables runs")
    return body


def run_agent(reader: Reader, body: str, *, max_rows: int, timeout_s: float) -> tuple[tuple[str, ...], list[Row]]:
    """Columns and at most ``max_rows + 1`` rows of an agent's text within the byte and time caps."""
    try:
        columns, rows = reader.rows(capped(body, max_rows + 1, RESULT_BYTES), (),
                                    timeout_ms=max(1, int(timeout_s * 1000)))
    except psycopg.Error as exc:
        if connection_lost(exc):
            raise DatabaseError(f"PostgreSQL failed while running a query: {first_line(exc)}") from exc
        if timed_out(exc):
            raise ApplicationError(f"the query ran longer than {timeout_s:g}s and was stopped; filter "
                                   "earlier, join on keys, or aggregate in the query") from exc
        if refused(exc):
            raise ApplicationError(f"the query tried to do more than read: {first_line(exc)}") from exc
        raise ApplicationError(f"the query failed: {first_line(exc)}") from exc
    return uncapped(columns, rows, RESULT_BYTES)
