"""PostgreSQL: one private database per env, reset by restoring only the rows the episode touched.

Where the server comes from: ``dsn=``, else ``REHEARSAL_POSTGRES_DSN``, else a
private server the process starts from the local binaries (see :mod:`._pgcache`).
Each env gets its own database, cloned from a per-world template built once per
server (:mod:`._pgcluster`), and drops it on :meth:`PostgresDatabase.close`. An env
the garbage collector frees without ``close()`` only closes its connections then (a
finalizer takes no lock); its database is dropped by the next env created or closed,
or at exit (:func:`drop_unclosed`).

Every tool call commits, as a real application does (each write inside it runs
under a savepoint in the same round trip, so a refused write is undone alone, as on
SQLite); :meth:`PostgresDatabase.reset` still restores the exact snapshot (rows and
id sequences) with one function call in one round trip, because row triggers log
every touched key (:mod:`._pgreset`). No transaction is held across episodes.

Checks and agents' queries (:meth:`PostgresDatabase.read_query`) never run on that
connection: they run on a second one that logs in as the env's own unprivileged reader
(:mod:`._pgsandbox`, :mod:`._pgread`), so no text can act as the admin whatever it
holds. Before that, a real parser decides what a statement is: sqlglot for the portable
rules (:func:`~rehearsal_env.checks.validate_check_sql`), then PostgreSQL's own parser
on the exact text the server receives (:mod:`._pgguard`): one SELECT, no server clock,
and for agents only the world's tables and allowed functions.

Values, column names and refusals read back as on SQLite (:mod:`._pgcompat`), so
:func:`~rehearsal_env.backends.digest` and observations agree across backends. Ids
follow SQLite's rowid rule: after seeding, a rolled-back insert, a DELETE or an
explicit id, the next id is max(id) + 1.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import errors as pgerrors
from psycopg.pq import TransactionStatus

from ._database import APP_STATEMENT_TIMEOUT_S, ApplicationError, DatabaseError, Dialect, Row
from ._pgcache import shared_dsn
from ._pgcluster import Cluster, cluster
from ._pgcompat import sqlite_column_names, sqlite_integrity_message
from ._pgqueries import agent_text, check_text, first_line, run_agent, run_check
from ._pgread import Reader
from ._pgreset import SCHEMA as RESET_SCHEMA
from ._pgreset import dependency_order
from ._pgsql import SqlNotAllowed, connect, plain, translate
from ._spec import DatabaseSpec

CHECK_TIMEOUT_MS = 5000
"""A check running longer than this is cancelled (the check errors; the episode is not scored)."""


def server_dsn(dsn: str | None = None) -> tuple[str, bool]:
    """The DSN to use and whether it is this process's own private server."""
    if dsn:
        return dsn, False
    if os.environ.get("REHEARSAL_POSTGRES_DSN"):
        return os.environ["REHEARSAL_POSTGRES_DSN"], False
    return shared_dsn(), True


_UNCLOSED: deque[tuple[Cluster, str]] = deque()
"""The databases of envs the garbage collector freed without :meth:`PostgresDatabase.close`, waiting to be dropped
(see :func:`_release`)."""
_AT_EXIT = threading.Lock()
_EXIT_DRAIN: list[weakref.finalize[Any, Any]] = []
"""The finalizer that runs :func:`drop_unclosed` at exit (see :func:`_drop_unclosed_at_exit`)."""


def _release(where: Cluster, name: str, conn: psycopg.Connection[Any], reader: Reader) -> None:
    """The finalizer of an env never closed: close its connections and queue its database to be dropped.

    It takes no lock: the collector runs it wherever an allocation triggers it, also while this thread holds the
    cluster's admin lock (another env being created), so dropping the database here (through that lock) would
    deadlock the process. :func:`drop_unclosed` drops the queued databases: the next env created or closed calls
    it, and so does interpreter exit."""
    for closer in (reader.close, conn.close):  # closing a psycopg connection takes no lock
        try:
            closer()
        except Exception:  # best effort: the drop that follows ends its sessions anyway
            pass
    _UNCLOSED.append((where, name))  # one atomic append: no lock


def drop_unclosed() -> int:
    """Drop the databases (and readers) of envs freed without ``close()``; the number dropped.

    Called when an env is created or closed, and at interpreter exit; never from a finalizer. A drop the server
    refuses (it may be gone at exit) is given up: a private server drops its leftovers at its next start."""
    dropped = 0
    while True:
        try:
            where, name = _UNCLOSED.popleft()
        except IndexError:
            return dropped
        try:
            where.drop_env_database(name)
            dropped += 1
        except (psycopg.Error, DatabaseError):
            pass


def _drop_unclosed_at_exit() -> None:
    """Have :func:`drop_unclosed` run at exit, after the finalizers of the envs still open then (once per process).

    It is itself a finalizer (of this module's :data:`_UNCLOSED`, alive until exit), made before any env's: at
    exit the remaining finalizers run newest first, so the envs' own queue their databases before it drops them."""
    with _AT_EXIT:
        if not _EXIT_DRAIN:
            _EXIT_DRAIN.append(weakref.finalize(_UNCLOSED, drop_unclosed))


class PostgresDatabase:
    """One env's private PostgreSQL database of a :class:`DatabaseSpec` (see the module docstring).

    Args:
        spec: The tables and seed rows to load (a world, or a :class:`~rehearsal_env.backends.SeedData`).
        dsn: A libpq connection string of a server where this user may create databases
            and roles; None: ``REHEARSAL_POSTGRES_DSN``, else a private server.
        check_timeout_ms: The ``statement_timeout`` of a check.
    """

    dialect: Dialect = "postgres"

    def __init__(
        self, spec: DatabaseSpec, dsn: str | None = None, *, check_timeout_ms: int = CHECK_TIMEOUT_MS
    ) -> None:
        self.tables = tuple(spec.tables)
        self.check_timeout_ms = int(check_timeout_ms)
        self._keys = frozenset(t.primary_key for t in self.tables)
        self._table_names = frozenset(t.name.lower() for t in self.tables)
        dsn, private = server_dsn(dsn)
        self._cluster = cluster(dsn, private=private)
        _drop_unclosed_at_exit()
        drop_unclosed()  # envs freed without close() since the last env was created or closed
        self.name, password = self._cluster.create_env_database(spec)
        try:
            self._conn = connect(self._cluster.db_dsn(self.name))
            self._conn.execute(_app_timeout())
            self._reader = Reader(self._cluster.reader_dsn(self.name, password))
        except psycopg.Error as exc:
            self._cluster.drop_env_database(self.name)
            raise DatabaseError(f"could not connect to the env database {self.name!r}: {exc}") from exc
        self._finalizer = weakref.finalize(self, _release, self._cluster, self.name, self._conn, self._reader)
        self._in_transaction = False
        self._wrote = False
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
        except pgerrors.QueryCanceled as exc:
            raise DatabaseError(f"the application's statement ran longer than {APP_STATEMENT_TIMEOUT_S:g} s "
                                f"and was stopped ({sql.split(None, 1)[0]})") from exc
        except pgerrors.InFailedSqlTransaction as exc:
            raise DatabaseError(
                "PostgreSQL aborted this tool call's transaction after an earlier query failed with a "
                "DatabaseError; a tool must not run more SQL after catching one (fix the failing query)"
            ) from exc
        except psycopg.Error as exc:
            raise DatabaseError(f"PostgreSQL failed on {sql.split(None, 1)[0]}: {first_line(exc)}") from exc
        if self._in_transaction:
            self._moved_ids |= stmt.moves_ids
            self._inserted |= stmt.inserts
            self._wrote |= stmt.writes
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
        self._in_transaction, self._moved_ids, self._inserted, self._wrote = True, False, False, False
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
            raise DatabaseError(f"PostgreSQL could not commit: {first_line(exc)}") from exc
        if self._moved_ids:
            self._call("sync_sequences")

    # -- reading as the env's reader (see ._pgqueries) -------------------------------
    def check_value(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self._read_only(check_text(sql, self._keys), params)

    def _read_only(self, text: str, params: Sequence[Any] = ()) -> Any:
        """Run PostgreSQL text as a check on the reader (no parsing: the server's layers alone)."""
        if self._in_transaction:
            raise DatabaseError(
                "a check ran inside an open application transaction; run checks between tool calls")
        return run_check(self._reader, text, params, timeout_ms=self.check_timeout_ms)

    def read_query(
        self, sql: str, *, max_rows: int, timeout_s: float
    ) -> tuple[tuple[str, ...], list[Row], bool]:
        """An agent's read-only SELECT: (column names, at most ``max_rows`` rows, whether cut).

        Decided by both parsers, run on the reader; works inside a tool call's transaction (it
        reads committed data). Columns are named as SQLite names them (``COUNT(*)``, not ``count``).

        Raises:
            ApplicationError: the query is refused, fails, runs past ``timeout_s`` or returns more
                than :data:`._pgread.RESULT_BYTES` (the agent's problem: the agent sees why).
            DatabaseError: the connection failed, or a tool ran this after writing in the same call.
        """
        body = agent_text(sql, self._keys, self._table_names)
        columns, rows = self._agent_read(body, max_rows=max_rows, timeout_s=timeout_s)
        return sqlite_column_names(sql, columns), rows[:max_rows], len(rows) > max_rows

    def _agent_read(self, body: str, *, max_rows: int, timeout_s: float) -> tuple[tuple[str, ...], list[Row]]:
        """An agent's PostgreSQL text on the reader within the row, byte and time caps (no parsing)."""
        if self._in_transaction and self._wrote:
            raise DatabaseError("a tool ran an agent's query after writing in the same call; agents' queries "
                                "read committed data: run them before the tool's writes")
        return run_agent(self._reader, body, max_rows=max_rows, timeout_s=timeout_s)

    def state_mark(self) -> str | None:
        """A value equal to the last one only if nothing the checks read changed since (None: unknown): the
        server's current snapshot (``xmin:xmax:in-progress``), which moves at every commit that wrote anything,
        a sandboxed application's own connections included (writes of other databases of the server too: then
        the checks run again although nothing of this one changed)."""
        if self._in_transaction:
            return None
        try:
            _, rows = self._reader.rows("SELECT pg_current_snapshot()::text", (), timeout_ms=self.check_timeout_ms)
        except psycopg.Error:
            return None
        return str(rows[0][0]) if rows else None

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
        """Close the connections and drop the env's database and reader, and those of envs freed without
        ``close()`` since (see :func:`drop_unclosed`)."""
        if self._finalizer.detach() is None:
            return
        self._reader.close()
        self._conn.close()
        self._cluster.drop_env_database(self.name)
        drop_unclosed()

    # -- helpers -----------------------------------------------------------------
    def _command(self, command: str) -> None:
        try:
            self._conn.execute(command, prepare=False)
        except psycopg.Error as exc:
            raise DatabaseError(f"PostgreSQL failed on {command}: {first_line(exc)}") from exc

    def _call(self, function: str) -> None:
        """Run one of the env's own functions (reset, sequences): not a tool's SQL, so not under its timeout."""
        try:
            self._conn.execute(f"SET statement_timeout = 0; SELECT rehearsal.{function}(); {_app_timeout()}")
        except psycopg.Error as exc:
            raise DatabaseError(
                f"PostgreSQL could not run rehearsal.{function}() in {self.name!r}: {first_line(exc)}"
            ) from exc


def _app_timeout() -> str:
    """The application connection's timeout for a tool's own SQL (the env's own functions lift it)."""
    return f"SET statement_timeout = {max(1, int(APP_STATEMENT_TIMEOUT_S * 1000))}"


def _refused(exc: psycopg.Error) -> ApplicationError:
    return ApplicationError(f"the application refused the change: {sqlite_integrity_message(exc)}")
