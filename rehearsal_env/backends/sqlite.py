"""The embedded default: SQLite in memory, one shared snapshot per world until a session writes.

The database is created and seeded once per process into an in-memory database and
serialized to bytes; the same snapshot is also held once in a process-wide
in-memory database (:mod:`._sqliteshare`). A new env's database reads that shared
snapshot (each thread through its own read-only connection) until its first write:
the statement the shared snapshot refuses, before it runs, is run on the env's own
copy, made then, in the same transaction. The copy is copied on write by page
(:mod:`._sqlitepages`: a private mapping of the snapshot held once in memory, so a
session owns only the pages it wrote; where that is not available, the snapshot's
bytes deserialized, about 0.1-0.3 ms for 1.5 MB). ``reset()`` drops the copy (the
connection is kept for the next one): the env reads the shared snapshot again. So
sessions that only read cost no copy of the world; a session costs its written pages
from its first write to its next reset (:data:`SHARE_SNAPSHOTS` turns sharing off).

Checks and agents' queries run read-only within bounds (:mod:`._sqliteread`):
``PRAGMA query_only`` (for checks: on the shared snapshot's reader, for good), an authorizer
that denies every action but reading (for checks, the connection's guard switched to that rule; for an
agent: only the world's tables and an allow-list of functions), SQLite's own size
limits, a deadline, a per-connection bound on the memory of sorters and temporary
tables (they spill to temporary files) and on the bytes fetched, on top of the
parser's decisions (:func:`~rehearsal_env.checks.validate_check_sql`,
:func:`~rehearsal_env.checks.agent_sql_refusal`). Nothing here sets a process-wide
limit: one env's statement can never make another env's reset or step fail.

The application's own statements (a tool's SQL, run with the agent's arguments) run
under :data:`APP_STATEMENT_TIMEOUT_S`, as PostgreSQL's ``statement_timeout`` would
stop them: an interrupted statement is a :class:`DatabaseError` on a live
connection, which the env records as the tool's crash (the episode goes on).
"""

from __future__ import annotations

import math
import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from ..checks import CheckError, CheckRefused, agent_sql_refusal, validate_check_sql
from ._database import APP_STATEMENT_TIMEOUT_S, ApplicationError, DatabaseError, Dialect, Row
from ._spec import DatabaseSpec
from ._sqlitepages import PageCopy, attach_pages
from ._sqliteread import (
    AGENT_LIMITS,
    PROGRESS_STEPS,
    Guard,
    ReadLimits,
    Ticker,
    agent_authorizer,
    agent_failure,
    authorize_read_only,
    fetch_capped,
    frozen_date_functions,
    reading,
    refused,
)
from ._sqliteshare import NeedsPrivate, Reader
from ._sqlitesnapshot import TOUCHED, shared_snapshot

CHECK_TIMEOUT_S = 5.0
"""A check running longer than this is stopped (it errors), as PostgreSQL's ``statement_timeout``."""

CHECK_MARK = "\n/* a rehearsal check */"
"""Appended to a check's text: its statement is prepared under the check's rule, never shared through the statement
cache with an application statement of the same text."""

SHARE_SNAPSHOTS = os.environ.get("REHEARSAL_SQLITE_SHARE_SNAPSHOTS", "1") != "0"
"""Whether databases read the process's shared snapshot until their first write (False, or the environment
variable ``REHEARSAL_SQLITE_SHARE_SNAPSHOTS=0`` when the module is imported: each holds its own copy from the
start, as before; for comparisons such as ``benchmarks/sessions_memory.py``)."""


class SQLiteDatabase:
    """One env's SQLite database of a :class:`DatabaseSpec`'s tables: the process's shared snapshot until its
    first write, then its own in-memory copy until the next reset (see the module docstring)."""

    dialect: Dialect = "sqlite"

    def __init__(self, spec: DatabaseSpec) -> None:
        self.tables = tuple(spec.tables)
        self._table_names = frozenset(t.name for t in self.tables)
        self._shared = shared_snapshot(spec)
        self._snapshot = self._shared.snapshot
        self._conn: sqlite3.Connection | None = None
        """The private copy (None: reads go to this thread's reader of the shared snapshot)."""
        self._pages: PageCopy | None = None
        """The private copy's pages, when it is copied on write by page."""
        self._kept: sqlite3.Connection | None = None
        """The connection of the last copy, without a database, kept for the next one."""
        self._guard = Guard()
        """The private copy's authorizer (allowing everything but while a check runs; :class:`._sqliteread.Guard`),
        installed once on its connection, kept with it."""
        self._in_transaction = False
        self._changes_at_begin: int | None = None
        self._generation = 0
        """Bumped whenever the copy is dropped or restored (a part of :meth:`state_mark`)."""
        self._lost: str | None = None
        """Why the database can no longer be used (closed, or its private copy could not be made)."""
        self._deadline = math.inf
        self._ticker: Ticker = (self._past_deadline, PROGRESS_STEPS)
        self.reset()

    def _past_deadline(self) -> int:
        return int(time.monotonic() > self._deadline)

    @property
    def private(self) -> bool:
        """Whether this database holds its own copy now (it wrote since the last reset, or sharing is off)."""
        return self._conn is not None

    def _reader(self) -> Reader:
        if self._lost is not None:
            raise DatabaseError(f"the SQLite database is gone: {self._lost}")
        return self._shared.reader()

    def _private(self) -> sqlite3.Connection:
        """The private copy, made from the snapshot on first use (inside a transaction, one is begun on it)."""
        if self._conn is not None:
            return self._conn
        self._reader()  # a closed or lost database stays so
        conn, self._kept = self._kept, None
        try:
            if conn is None:  # a kept connection has its settings already
                conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
                conn.execute("PRAGMA foreign_keys = ON")
                conn.execute("PRAGMA temp_store = FILE")  # sorters and temporary tables spill past cache_size
                conn.set_progress_handler(*self._ticker)
                conn.set_authorizer(self._guard)
            self._copy_snapshot(conn)
            if self._in_transaction:
                conn.execute("BEGIN")
                self._changes_at_begin = conn.total_changes
        except (sqlite3.Error, MemoryError) as exc:
            self._release_pages()
            if conn is not None:
                conn.close()
            self._lost = f"its own copy of the snapshot could not be made ({exc!r})"
            raise DatabaseError(f"SQLite could not copy the snapshot: {exc!r}") from exc
        self._conn = conn
        return conn

    def _copy_snapshot(self, conn: sqlite3.Connection) -> None:
        """Make ``conn``'s database the snapshot: mapped page by page where possible, else deserialized."""
        try:
            pages = self._shared.pages()
            if pages is not None:
                self._pages = attach_pages(conn, pages)
                return
        except OSError:
            pass  # no memory file or no address space for the mapping (a strict overcommit policy): a copy
        conn.deserialize(self._snapshot)

    def state_mark(self) -> tuple[int, ...] | None:
        """A value equal to the last one only if nothing the checks read changed since (None: unknown, inside a
        tool call's transaction). The shared snapshot never changes; the copy counts its row changes
        (``total_changes``, which only grows, rolled back or not) and its schema changes."""
        if self._in_transaction or self._lost is not None:
            return None
        if self._conn is None:
            return (self._generation,)
        try:
            schema = self._conn.execute("PRAGMA schema_version").fetchone()[0]
        except sqlite3.Error:
            return None
        return self._generation, self._conn.total_changes, schema

    def touched(self) -> dict[str, set[Any]]:
        conn = self._conn if self._conn is not None else self._reader().conn
        out: dict[str, set[Any]] = {}
        for table, pk in conn.execute(f"SELECT DISTINCT tbl, pk FROM {TOUCHED}"):
            out.setdefault(table, set()).add(pk)
        return out

    def touched_since(self, mark: int) -> tuple[dict[str, set[Any]], int]:
        """Keys written after ``mark`` (0: since the last reset) and the mark to pass next time: what changed between
        two calls, read from the log of written keys alone (an incremental checkpoint's database part)."""
        if self._conn is None:
            return {}, 0  # the shared snapshot: nothing written since the reset
        out: dict[str, set[Any]] = {}
        for rowid, table, pk in self._conn.execute(f"SELECT rowid, tbl, pk FROM {TOUCHED} WHERE rowid > ?", (mark,)):
            out.setdefault(table, set()).add(pk)
            mark = rowid
        return out, mark

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        return self._run(sql, params)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        return self._run(sql, params)

    def _run(self, sql: str, params: Sequence[Any]) -> list[Row]:
        try:
            if self._conn is None:
                try:
                    return self._reader().run(sql, tuple(params), APP_STATEMENT_TIMEOUT_S)
                except NeedsPrivate:
                    pass  # a write: this database's own copy from here on
            conn = self._private()
            self._deadline = time.monotonic() + APP_STATEMENT_TIMEOUT_S
            try:
                return conn.execute(sql, tuple(params)).fetchall()
            finally:
                self._deadline = math.inf
        except sqlite3.IntegrityError as exc:
            raise ApplicationError(f"the application refused the change: {exc}") from exc
        except sqlite3.Error as exc:
            if "interrupt" in str(exc):
                raise DatabaseError(f"the application's statement ran longer than {APP_STATEMENT_TIMEOUT_S:g} s "
                                    f"and was stopped ({sql.split(None, 1)[0]})") from exc
            raise DatabaseError(f"SQLite failed on {(sql.split(None, 1) or ['?'])[0]}: {exc}") from exc
        except (OverflowError, MemoryError, ValueError) as exc:  # a parameter SQLite cannot bind
            raise DatabaseError(f"SQLite could not run {(sql.split(None, 1) or ['?'])[0]}: {exc}") from exc

    @contextmanager
    def transaction(self) -> Iterator[None]:
        shared = self._conn is None
        if self._in_transaction:
            raise DatabaseError("SQLite failed on BEGIN: cannot start a transaction within a transaction")
        if shared:
            self._reader()  # a shared database begins on its own copy at its first write
            self._in_transaction = True
        else:
            self._command("BEGIN")
            self._changes_at_begin = self._private().total_changes
        try:
            yield
        except BaseException:
            self._in_transaction, self._changes_at_begin = False, None
            if self._conn is not None:
                self._command("ROLLBACK")
                if shared and SHARE_SNAPSHOTS:  # rolled back to the snapshot: shared again
                    self._drop_private()
            raise
        self._in_transaction, self._changes_at_begin = False, None
        if self._conn is not None:
            self._command("COMMIT")

    def _command(self, command: str) -> None:
        try:
            self._private().execute(command)
        except sqlite3.Error as exc:  # a closed or broken connection: the database failed
            raise DatabaseError(f"SQLite failed on {command}: {exc}") from exc

    def check_value(self, sql: str, params: Sequence[Any] = ()) -> Any:
        validate_check_sql(sql, dialect="sqlite")
        return self._check(sql, params)

    def _reading(self, authorizer: Callable[..., int], timeout_s: float,
                 limits: ReadLimits | None = None) -> AbstractContextManager[sqlite3.Connection]:
        """The connection to read from (the private copy, else this thread's reader) under :func:`reading`: a check
        (no ``limits``) switches the connection's guard, an agent's query sets its own authorizer."""
        if self._conn is not None:
            conn, ticker, guard = self._conn, self._ticker, self._guard
        else:
            reader = self._reader()
            conn, ticker, guard = reader.conn, reader.ticker, reader.guard
        if limits is None:
            return reading(conn, authorizer, timeout_s=timeout_s, restore=ticker, guard=guard)
        return reading(conn, authorizer, timeout_s=timeout_s, limits=limits, restore=ticker, restore_authorizer=guard)

    def _check(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """Run a check's text read-only under the check deadline (no parsing: the engine's layers alone).

        The text runs with :data:`CHECK_MARK` appended, so that its statement is prepared under the check's rule
        and never taken from the statement cache as one the application prepared with the same text (see
        :class:`._sqliteread.Guard`); a check that changed a row all the same makes the database unusable.
        """
        try:
            with self._reading(authorize_read_only, CHECK_TIMEOUT_S) as conn:
                changes = conn.total_changes
                rows = conn.execute(sql + CHECK_MARK, tuple(params)).fetchall()
                if conn.total_changes != changes:
                    self._lost = "a check changed rows (every layer that keeps checks read-only was passed)"
                    raise CheckRefused(f"the check tried to do more than read: it changed "
                                       f"{conn.total_changes - changes} rows; the database is no longer used")
        except sqlite3.DatabaseError as exc:
            if refused(exc):
                raise CheckRefused(f"the check tried to do more than read: {exc}") from exc
            if "interrupt" in str(exc):
                raise CheckError(f"the check ran longer than {CHECK_TIMEOUT_S:g} s and was stopped; make it "
                                 "cheaper (filter on indexed columns)") from exc
            raise CheckError(f"the check's query failed: {exc}") from exc
        return single_value(rows)

    def read_query(self, sql: str, *, max_rows: int, timeout_s: float) -> tuple[tuple[str, ...], list[Row], bool]:
        """An agent's read-only SELECT: (column names, at most ``max_rows`` rows, whether cut).

        Raises:
            ApplicationError: the query is refused, fails, runs past ``timeout_s`` or passes one of the
                limits of :data:`._sqliteread.AGENT_LIMITS` (the agent sees why).
            DatabaseError: a tool ran the agent's query after writing in the same call (a bug of the world).
        """
        refusal = agent_sql_refusal(sql, "sqlite", self._table_names)
        if refusal is not None:
            raise ApplicationError(f"the query is refused: {refusal}. Only one read-only SELECT statement "
                                   "on the world's tables runs")
        return self._agent_read(sql, max_rows=max_rows, timeout_s=timeout_s)

    def _agent_read(self, sql: str, *, max_rows: int, timeout_s: float) -> tuple[tuple[str, ...], list[Row], bool]:
        """An agent's text under the engine's layers alone (no parsing)."""
        if (self._changes_at_begin is not None and self._conn is not None
                and self._conn.total_changes != self._changes_at_begin):
            raise DatabaseError("a tool ran an agent's query after writing in the same call; agents' queries "
                                "read committed data (as on PostgreSQL): run them before the tool's writes")
        limits = AGENT_LIMITS
        try:
            with self._reading(agent_authorizer(self._table_names, (TOUCHED,)), timeout_s, limits) as conn, \
                    frozen_date_functions(conn):
                cursor = conn.execute(sql)
                try:
                    rows = fetch_capped(cursor, max_rows + 1, limits.result_bytes)
                    columns = tuple(d[0] for d in cursor.description or ())
                finally:
                    cursor.close()
        except MemoryError as exc:
            raise ApplicationError("the query needed more memory than the machine could give and was stopped; "
                                   "aggregate in the query or select shorter values") from exc
        except sqlite3.Error as exc:
            raise ApplicationError(agent_failure(exc, timeout_s)) from exc
        return columns, rows[:max_rows], len(rows) > max_rows

    def reset(self) -> None:
        if self._lost is not None and self._lost.startswith("closed"):
            raise DatabaseError("SQLite could not restore the snapshot: the database was closed")
        self._lost = None  # a copy that could not be made is retried at the next write
        self._generation += 1
        if not SHARE_SNAPSHOTS:
            if self._conn is None:
                self._private()
            else:
                try:
                    self._release_pages()
                    self._copy_snapshot(self._conn)
                except sqlite3.Error as exc:
                    raise DatabaseError(f"SQLite could not restore the snapshot: {exc}") from exc
            return
        self._drop_private()

    def _drop_private(self) -> None:
        conn, self._conn = self._conn, None
        self._generation += 1
        if conn is not None:
            if self._release_pages() and self._kept is None:
                self._kept = conn  # its database given back: the next copy reuses it (no new connection)
            else:
                conn.close()

    def _release_pages(self) -> bool:
        """Unmap the copy's pages, if it was copied by page; whether its connection is still open."""
        pages, self._pages = self._pages, None
        if pages is None:
            return False
        pages.detach()
        return _open(pages.conn)

    def close(self) -> None:
        self._lost = "closed (close() was called)"
        self._drop_private()
        kept, self._kept = self._kept, None
        if kept is not None:
            kept.close()


def _open(conn: sqlite3.Connection) -> bool:
    try:
        conn.total_changes  # noqa: B018  (raises on a closed connection)
    except sqlite3.ProgrammingError:
        return False
    return True


def single_value(rows: Sequence[Sequence[Any]]) -> Any:
    """The one value of a check's result, or :class:`CheckError` saying what arrived."""
    if len(rows) != 1:
        raise CheckError(f"a check must return exactly one row; it returned {len(rows)}")
    if len(rows[0]) != 1:
        raise CheckError(
            f"a check must return exactly one column; it returned {len(rows[0])}"
        )
    return rows[0][0]
