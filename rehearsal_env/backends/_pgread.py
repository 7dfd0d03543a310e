"""Reading as the env's reader: checks and agents' SQL on a connection that logs in unprivileged.

:class:`Reader` owns the env's second connection, logged in as the env's own reader role
(:mod:`._pgsandbox`: SELECT on the world's tables and nothing else, read-only sessions).
Each read is one statement through the extended protocol (one statement only), in its own
transaction, read-only by the role's ``default_transaction_read_only``; the session's
``statement_timeout`` is set in the same round trip when a read wants another one. Nothing
that reaches the reader can change its session: texts are single SELECTs (the parsers) and
``set_config`` is revoked. The admin connection of the env never runs a check's or an
agent's text.

An agent's rows come back within :data:`RESULT_BYTES`: the statement is wrapped so that
the server measures each row (``octet_length(row::text)``) and sends only rows whose
running total fits, with the count of rows it had; fewer rows than that count means the
result was too large, which the agent is told.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import errors as pgerrors
from psycopg.pq import TransactionStatus

from ._database import ApplicationError, DatabaseError, Row
from ._pgsql import connect, plain

RESULT_BYTES = 4_000_000
"""Most bytes of rows (as text) an agent's query may return."""
_EXTRA_COLUMNS = 4


class _RaisedPipelineError(logging.Filter):
    """Drops psycopg's "error ignored terminating <Pipeline>" warning: when a statement in our pipeline
    fails, psycopg raises that statement's error (handled by the callers) and also logs the pipeline's
    abort on the way out, which would print noise on every agent query that fails."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        return not (record.msg == "error ignored terminating %r: %s" and args
                    and isinstance(args[0], psycopg.Pipeline))


logging.getLogger("psycopg").addFilter(_RaisedPipelineError())


def capped(body: str, max_rows: int, max_bytes: int) -> str:
    """An agent's statement (already checked) wrapped to return at most ``max_rows`` rows and ``max_bytes``."""
    return (
        "WITH rehearsal_rows AS MATERIALIZED (SELECT agent_query.*, row_number() OVER () AS rehearsal_n_, "
        f"octet_length(agent_query::text) AS rehearsal_size_ FROM (SELECT * FROM (\n{body}\n) AS agent_query "
        f"LIMIT {int(max_rows)}) AS agent_query) "
        "SELECT k.*, t.rehearsal_total_ FROM (SELECT count(*) AS rehearsal_total_ FROM rehearsal_rows) AS t "
        "LEFT JOIN (SELECT r.*, sum(r.rehearsal_size_) OVER (ORDER BY r.rehearsal_n_) AS rehearsal_cum_ "
        f"FROM rehearsal_rows AS r) AS k ON k.rehearsal_cum_ <= {int(max_bytes)} ORDER BY k.rehearsal_n_"
    )


def uncapped(columns: tuple[str, ...], rows: list[Row], max_bytes: int) -> tuple[tuple[str, ...], list[Row]]:
    """The agent's columns and rows out of :func:`capped`'s result, or :class:`ApplicationError` when cut."""
    kept = [row[:-_EXTRA_COLUMNS] for row in rows if row[-_EXTRA_COLUMNS] is not None]
    total = rows[0][-1] if rows else 0
    if len(kept) < total:
        raise ApplicationError(f"the query's result passed {max_bytes // 1_000_000} MB before {len(kept) + 1} "
                               "rows; select fewer or shorter columns, or aggregate in the query")
    return columns[:-_EXTRA_COLUMNS], kept


class Reader:
    """The env's reader connection (see the module docstring)."""

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._conn = connect(dsn, application_name="rehearsal-env reader", reader=True)
        self._timeout_ms: int | None = None

    def rows(self, text: str, params: Sequence[Any], *, timeout_ms: int) -> tuple[tuple[str, ...], list[Row]]:
        """Column names and rows of ``text`` run read-only under ``timeout_ms``.

        Raises:
            psycopg.Error: the statement failed; the connection is back to idle.
        """
        if self._conn.closed or self._conn.broken:
            self._conn = connect(self._dsn, application_name="rehearsal-env reader", reader=True)
            self._timeout_ms = None
        conn = self._conn
        try:
            with conn.pipeline():
                if timeout_ms != self._timeout_ms:
                    self._timeout_ms = None
                    conn.execute(f"SET statement_timeout = {int(timeout_ms)}", prepare=False)
                    self._timeout_ms = timeout_ms
                cur = conn.execute(text, plain(params))
            columns = tuple(d.name for d in cur.description or ())
            return columns, [tuple(r) for r in cur.fetchall()] if cur.description is not None else []
        except psycopg.Error:
            self._recover()
            raise

    def _recover(self) -> None:
        try:
            if not self._conn.broken and self._conn.info.transaction_status != TransactionStatus.IDLE:
                self._conn.execute("ROLLBACK", prepare=False)
        except psycopg.Error as exc:
            raise DatabaseError(f"PostgreSQL could not end a failed read-only query: {exc}") from exc

    def close(self) -> None:
        self._conn.close()


def refused(exc: psycopg.Error) -> bool:
    """Whether the server refused the statement for trying to write or lacking privileges."""
    return isinstance(exc, (pgerrors.ReadOnlySqlTransaction, pgerrors.InsufficientPrivilege))


def timed_out(exc: psycopg.Error) -> bool:
    return isinstance(exc, pgerrors.QueryCanceled)


def connection_lost(exc: psycopg.Error) -> bool:
    return isinstance(exc, psycopg.OperationalError) and not timed_out(exc)
