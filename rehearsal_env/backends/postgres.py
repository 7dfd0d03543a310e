"""PostgreSQL: one private database per env, reset by restoring only the rows the episode touched.

Where the server comes from: ``dsn=``, else ``REHEARSAL_POSTGRES_DSN``, else a
private server the process starts from the local binaries (see :mod:`._pgcache`).
Each env gets its own database, cloned from a per-world template built once per
server (:mod:`._pgcluster`), and drops it on :meth:`PostgresDatabase.close`.

Every tool call commits, as a real application does (each write inside it runs
under a savepoint in the same round trip, so a refused write is undone alone, as on
SQLite); :meth:`PostgresDatabase.reset` still restores the exact snapshot (rows and
id sequences) with one function call in one round trip, because row triggers log
every touched key (:mod:`._pgreset`). No transaction is held across episodes.

Checks (and agents' queries, :meth:`PostgresDatabase.read_query`) are refused by
:func:`~rehearsal_env.checks.validate_check_sql`, for reading the server clock, or
for calling session functions (``set_config``, ...) before reaching the server; then
they run ``READ ONLY``, as ``rehearsal_checker`` (a role that may only SELECT) under
a ``statement_timeout``, through the extended protocol (a second statement is refused
by the server too); see :mod:`._pgread`.

Values, column names and refusals read back as on SQLite (:mod:`._pgcompat`), so
:func:`~rehearsal_env.backends.digest` and observations agree across backends. Ids
follow SQLite's rowid rule: after seeding, a rolled-back insert, a DELETE or an
explicit id, the next id is max(id) + 1.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import errors as pgerrors
from psycopg.pq import TransactionStatus

from ..checks import CheckError, CheckRefused, validate_check_sql
from ._database import ApplicationError, DatabaseError, Dialect, Row
from ._pgcache import shared_dsn
from ._pgcluster import Cluster, cluster
from ._pgcompat import sqlite_column_names, sqlite_integrity_message
from ._pgread import connection_lost, read_as_checker, refused, timed_out
from ._pgreset import SCHEMA as RESET_SCHEMA
from ._pgreset import dependency_order
from ._pgsql import SqlNotAllowed, connect, guard_check, plain, translate
from .sqlite import single_value

if TYPE_CHECKING:
    from ..worlds import World

CHECK_TIMEOUT_MS = 5000
"""A check running longer than this is cancelled (the check errors; the episode is not scored)."""


def server_dsn(dsn: str | None = None) -> tuple[str, bool]:
    """The DSN to use and whether it is this process's own private server."""
    if dsn:
        return dsn, False
    if os.environ.get("REHEARSAL_POSTGRES_DSN"):
        return os.environ["REHEARSAL_POSTGRES_DSN"], False
    return shared_dsn(), True


def _release(where: Cluster, name: str, conn: psycopg.Connection[Any]) -> None:
    """Close the env's connection and drop its database (also run if an env is never closed)."""
    try:
        conn.close()
        where.drop_database(name)
    except (psycopg.Error, DatabaseError):
        pass  # at interpreter exit the private server may already be gone; it drops leftovers next start


class PostgresDatabase:
    """One env's private PostgreSQL database of a world (see the module docstring).

    Args:
        world: The world whose schema and seed data to load.
        dsn: A libpq connection string of a server where this user may create databases
            and roles; None: ``REHEARSAL_POSTGRES_DSN``, else a private server.
        check_timeout_ms: The ``statement_timeout`` of a check.
    """

    dialect: Dialect = "postgres"

    def __init__(
        self, world: World, dsn: str | None = None, *, check_timeout_ms: int = CHECK_TIMEOUT_MS
    ) -> None:
        self.tables = world.tables
        self.check_timeout_ms = int(check_timeout_ms)
        self._keys = frozenset(t.primary_key for t in world.tables)
        dsn, private = server_dsn(dsn)
        self._cluster = cluster(dsn, private=private)
        self.name = self._cluster.create_env_database(world)
        try:
            self._conn = connect(self._cluster.db_dsn(self.name))
        except psycopg.Error as exc:
            self._cluster.drop_database(self.name)
            raise DatabaseError(f"could not connect to the env database {self.name!r}: {exc}") from exc
        self._finalizer = weakref.finalize(self, _release, self._cluster, self.name, self._conn)
        self._in_transaction = False
        self._moved_ids = False
        self._inserted = False

    # -- application access ----------------------------------------------------
    def query(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        return self._run(sql, params)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        return self._run(sql, params)

    def _run(self, sql: str, params: Sequence[Any]) -> list[Row]:
        try:
            stmt = translate(sql, self._keys)
        except SqlNotAllowed as exc:
            raise DatabaseError(f"the application's SQL is not allowed: {exc}") from exc
        try:
            if self._in_transaction and stmt.writes:
                rows = self._statement_atomic(stmt.text, plain(params))
            else:
                cur = self._conn.execute(stmt.text, plain(params))
                rows = cur.fetchall() if cur.description is not None else []
        except pgerrors.IntegrityError as exc:
            raise _refused(exc) from exc
        except pgerrors.InFailedSqlTransaction as exc:
            raise DatabaseError(
                "PostgreSQL aborted this tool call's transaction after an earlier query failed with a "
                "DatabaseError; a tool must not run more SQL after catching one (fix the failing query)"
            ) from exc
        except psycopg.Error as exc:
            raise DatabaseError(f"PostgreSQL failed on {sql.split(None, 1)[0]}: {_first_line(exc)}") from exc
        if self._in_transaction:
            self._moved_ids |= stmt.moves_ids
            self._inserted |= stmt.inserts
        elif stmt.moves_ids:
            self._call("sync_sequences")
        return [tuple(r) for r in rows]

    def _statement_atomic(self, text: str, params: tuple[Any, ...]) -> list[Row]:
        """Run a write under a savepoint (one round trip): if it fails, only it is undone."""
        conn = self._conn
        try:
            with conn.pipeline():
                conn.execute("SAVEPOINT rehearsal_statement", prepare=False)
                cur = conn.execute(text, params)
                conn.execute("RELEASE SAVEPOINT rehearsal_statement", prepare=False)
            return cur.fetchall() if cur.description is not None else []
        except psycopg.Error:
            self._moved_ids = True  # a failed INSERT still advanced its sequence
            if conn.info.transaction_status == TransactionStatus.INERROR:
                self._command("ROLLBACK TO SAVEPOINT rehearsal_statement")
                self._command("RELEASE SAVEPOINT rehearsal_statement")
            raise

    @contextmanager
    def transaction(self) -> Iterator[None]:
        if self._in_transaction:
            raise RuntimeError("transaction() is not reentrant: one tool call is one transaction")
        self._command("BEGIN")
        self._in_transaction, self._moved_ids, self._inserted = True, False, False
        try:
            yield
        except BaseException:
            self._in_transaction = False
            self._command("ROLLBACK")
            if self._inserted or self._moved_ids:
                self._call("sync_sequences")  # the rolled-back inserts still advanced the sequences
            raise
        self._in_transaction = False
        try:
            self._conn.execute("COMMIT")
        except pgerrors.IntegrityError as exc:
            raise _refused(exc) from exc
        except psycopg.Error as exc:
            raise DatabaseError(f"PostgreSQL could not commit: {_first_line(exc)}") from exc
        if self._moved_ids:
            self._call("sync_sequences")

    # -- reading as the check role ---------------------------------------------------
    def check_value(self, sql: str, params: Sequence[Any] = ()) -> Any:
        validate_check_sql(sql)
        try:
            guard_check(sql)
            text = translate(sql, self._keys).text
        except SqlNotAllowed as exc:
            raise CheckRefused(f"the check is not allowed: {exc}") from exc
        return self._read_only(text, params)

    def _read_only(self, text: str, params: Sequence[Any] = ()) -> Any:
        """Run PostgreSQL text read-only, as the check role, under the timeout (no validation)."""
        if self._in_transaction:
            raise DatabaseError(
                "a check ran inside an open application transaction; run checks between tool calls")
        try:
            _, rows = read_as_checker(self._conn, text, params, timeout_ms=self.check_timeout_ms,
                                      nested=False)
        except psycopg.Error as exc:
            if refused(exc):
                raise CheckRefused(f"the check tried to do more than read: {_first_line(exc)}") from exc
            if timed_out(exc):
                raise CheckError(f"the check ran longer than {self.check_timeout_ms} ms and was cancelled; "
                                 "make it cheaper (filter on indexed columns)") from exc
            if connection_lost(exc):
                raise DatabaseError(f"PostgreSQL failed while running a check: {_first_line(exc)}") from exc
            raise CheckError(f"the check's query failed: {_first_line(exc)}") from exc
        return single_value(rows)

    def read_query(
        self, sql: str, *, max_rows: int, timeout_s: float
    ) -> tuple[tuple[str, ...], list[Row], bool]:
        """An agent's read-only SELECT: (column names, at most ``max_rows`` rows, whether cut).

        Same layers as a check; works inside a tool call's transaction too. Columns are
        named as SQLite names them (``COUNT(*)``, not ``count``).

        Raises:
            ApplicationError: the query is refused, fails or runs past ``timeout_s`` (the agent's
                problem: the agent sees why).
            DatabaseError: the connection failed.
        """
        try:
            validate_check_sql(sql, name="query")
            guard_check(sql)
            body = translate(sql, self._keys).text.strip().rstrip(";")
        except (CheckRefused, SqlNotAllowed) as exc:
            raise ApplicationError(f"{exc}. Only one read-only SELECT statement runs") from exc
        text = f"SELECT * FROM ({body}) AS agent_query LIMIT {int(max_rows) + 1}"
        timeout_ms = max(1, int(timeout_s * 1000))
        try:
            columns, rows = read_as_checker(self._conn, text, (), timeout_ms=timeout_ms,
                                            nested=self._in_transaction)
        except psycopg.Error as exc:
            if connection_lost(exc):
                raise DatabaseError(f"PostgreSQL failed while running a query: {_first_line(exc)}") from exc
            if timed_out(exc):
                raise ApplicationError(f"the query ran longer than {timeout_s:g}s and was stopped; filter "
                                       "earlier, join on keys, or aggregate in the query") from exc
            if refused(exc):
                raise ApplicationError(f"the query tried to do more than read: {_first_line(exc)}") from exc
            raise ApplicationError(f"the query failed: {_first_line(exc)}") from exc
        return sqlite_column_names(sql, columns), rows[:max_rows], len(rows) > max_rows

    # -- reset and close -------------------------------------------------------------
    def touched(self) -> dict[str, set[Any]]:
        """Keys the reset's triggers logged since the last reset (the rows ``reset()`` will restore)."""
        names = {i: t.name for i, t in enumerate(dependency_order(self.tables), start=1)}
        out: dict[str, set[Any]] = {}
        for number, key in self.query(f"SELECT tbl, id FROM {RESET_SCHEMA}.touched"):
            out.setdefault(names[number], set()).add(key)
        return out

    def reset(self) -> None:
        if self._conn.info.transaction_status != TransactionStatus.IDLE:
            self._command("ROLLBACK")
            self._in_transaction = False
        self._call("restore")

    def close(self) -> None:
        if self._finalizer.detach() is None:
            return
        self._conn.close()
        self._cluster.drop_database(self.name)

    # -- helpers -----------------------------------------------------------------
    def _command(self, command: str) -> None:
        try:
            self._conn.execute(command, prepare=False)
        except psycopg.Error as exc:
            raise DatabaseError(f"PostgreSQL failed on {command}: {_first_line(exc)}") from exc

    def _call(self, function: str) -> None:
        try:
            self._conn.execute(f"SELECT rehearsal.{function}()")
        except psycopg.Error as exc:
            raise DatabaseError(
                f"PostgreSQL could not run rehearsal.{function}() in {self.name!r}: {_first_line(exc)}"
            ) from exc


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().split("\n", 1)[0]


def _refused(exc: psycopg.Error) -> ApplicationError:
    return ApplicationError(f"the application refused the change: {sqlite_integrity_message(exc)}")
