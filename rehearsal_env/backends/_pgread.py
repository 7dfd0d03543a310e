"""Reading as the check role: the server-side layers under checks and agents' read-only SQL.

One pipeline, one round trip: ``BEGIN READ ONLY`` (or, inside a tool call's
transaction, a ``SAVEPOINT`` rolled back afterwards), ``SET LOCAL ROLE
rehearsal_checker`` (a role that may only SELECT the world's tables),
``SET LOCAL statement_timeout``, the statement through the extended protocol
(one statement only), then ``COMMIT`` (or ``ROLLBACK TO SAVEPOINT``, which also
undoes the role and the timeout). Validation against writes, several
statements, the server clock and session functions happens before, in the
callers (:mod:`.postgres`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import errors as pgerrors
from psycopg.pq import TransactionStatus

from ._database import DatabaseError, Row
from ._pgcluster import CHECK_ROLE
from ._pgsql import plain

_SAVEPOINT = "rehearsal_read"


class _RaisedPipelineError(logging.Filter):
    """Drops psycopg's "error ignored terminating <Pipeline>" warning: when a statement in our pipeline
    fails, psycopg raises that statement's error (handled by the callers) and also logs the pipeline's
    abort on the way out, which would print noise on every agent query that fails."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        return not (record.msg == "error ignored terminating %r: %s" and args
                    and isinstance(args[0], psycopg.Pipeline))


logging.getLogger("psycopg").addFilter(_RaisedPipelineError())


def read_as_checker(
    conn: psycopg.Connection[Any], text: str, params: Sequence[Any], *, timeout_ms: int, nested: bool
) -> tuple[tuple[str, ...], list[Row]]:
    """Column names and rows of ``text`` run read-only as the check role.

    Args:
        conn: The env's autocommit connection.
        text: PostgreSQL text (already validated and translated).
        params: Its parameters.
        timeout_ms: The statement timeout.
        nested: Whether a tool call's transaction is open (then a savepoint is used).

    Raises:
        psycopg.Error: the statement failed; the connection is back where it was.
    """
    try:
        with conn.pipeline():
            conn.execute(f"SAVEPOINT {_SAVEPOINT}" if nested else "BEGIN READ ONLY", prepare=False)
            conn.execute(f"SET LOCAL ROLE {CHECK_ROLE}", prepare=False)
            conn.execute(f"SET LOCAL statement_timeout = {int(timeout_ms)}", prepare=False)
            cur = conn.execute(text, plain(params), prepare=False)
            _end(conn, nested)
        columns = tuple(d.name for d in cur.description or ())
        return columns, [tuple(r) for r in cur.fetchall()]
    except psycopg.Error:
        _recover(conn, nested)
        raise


def _end(conn: psycopg.Connection[Any], nested: bool) -> None:
    if nested:
        conn.execute(f"ROLLBACK TO SAVEPOINT {_SAVEPOINT}", prepare=False)
        conn.execute(f"RELEASE SAVEPOINT {_SAVEPOINT}", prepare=False)
    else:
        conn.execute("COMMIT", prepare=False)


def _recover(conn: psycopg.Connection[Any], nested: bool) -> None:
    try:
        if nested:
            if conn.info.transaction_status == TransactionStatus.INERROR:
                _end(conn, nested)
        elif conn.info.transaction_status != TransactionStatus.IDLE:
            conn.execute("ROLLBACK", prepare=False)
    except psycopg.Error as exc:
        raise DatabaseError(f"PostgreSQL could not end a failed read-only query: {exc}") from exc


def refused(exc: psycopg.Error) -> bool:
    """Whether the server refused the statement for trying to write or lacking privileges."""
    return isinstance(exc, (pgerrors.ReadOnlySqlTransaction, pgerrors.InsufficientPrivilege))


def timed_out(exc: psycopg.Error) -> bool:
    return isinstance(exc, pgerrors.QueryCanceled)


def connection_lost(exc: psycopg.Error) -> bool:
    return isinstance(exc, psycopg.OperationalError) and not timed_out(exc)
