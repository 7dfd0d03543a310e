"""The embedded default: SQLite in memory, reset by deserializing a snapshot.

The world is created and seeded once per process into an in-memory database,
serialized to bytes, and every env deserializes those bytes into its own
connection. ``reset()`` deserializes again (about 0.1-0.3 ms for 1.5 MB): the
exact snapshot is back even though every tool call committed.

Checks run with ``PRAGMA query_only`` and an authorizer that denies every
action but reading, on top of :func:`~rehearsal_env.checks.validate_check_sql`.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..checks import CheckError, CheckRefused, validate_check_sql
from ._database import ApplicationError, DatabaseError, Dialect, Row
from ._dialect import create_table

if TYPE_CHECKING:
    from ..schema import Table
    from ..worlds import World

_SNAPSHOTS: dict[tuple[str, str, int], bytes] = {}
_LOCK = threading.Lock()

_READ_ACTIONS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION}
# WITH clauses report SQLITE_RECURSIVE (33) on some builds.
_READ_ACTIONS.add(getattr(sqlite3, "SQLITE_RECURSIVE", 33))


def _authorize_read_only(action: int, *_: Any) -> int:
    return sqlite3.SQLITE_OK if action in _READ_ACTIONS else sqlite3.SQLITE_DENY


TOUCHED = "_rehearsal_touched"
"""The log of keys written since the snapshot; part of the snapshot, so a reset empties it."""


def _log_touched_keys(conn: sqlite3.Connection, tables: Sequence[Table]) -> None:
    """Triggers that log every written primary key into :data:`TOUCHED` (old and new keys)."""
    conn.execute(f"CREATE TABLE {TOUCHED} (tbl TEXT NOT NULL, pk INTEGER NOT NULL)")
    for table in tables:
        pk = table.primary_key
        for event, keys in (("INSERT", ("new",)), ("UPDATE", ("old", "new")), ("DELETE", ("old",))):
            values = ", ".join(f"('{table.name}', {k}.{pk})" for k in keys)
            conn.execute(f"CREATE TRIGGER _rehearsal_log_{event.lower()}_{table.name} AFTER {event} "
                         f"ON {table.name} BEGIN INSERT INTO {TOUCHED} VALUES {values}; END")


def build_snapshot(world: World) -> bytes:
    """Create and seed the world in memory and return the serialized database."""
    key = (world.name, world.seed_fingerprint, hash(world.tables))
    with _LOCK:
        if key not in _SNAPSHOTS:
            conn = sqlite3.connect(":memory:", isolation_level=None)
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("BEGIN")
            for table in world.tables:
                for statement in create_table(table, "sqlite"):
                    conn.execute(statement)
            rows = world.seed_rows()
            for table in world.tables:
                data = rows.get(table.name, [])
                if data:
                    marks = ", ".join("?" * len(table.columns))
                    conn.executemany(
                        f"INSERT INTO {table.name} ({', '.join(table.column_names)}) VALUES ({marks})",
                        data,
                    )
            _log_touched_keys(conn, world.tables)
            conn.execute("COMMIT")
            _SNAPSHOTS[key] = conn.serialize()
            conn.close()
        return _SNAPSHOTS[key]


class SQLiteDatabase:
    """One env's in-memory SQLite copy of a world (see the module docstring)."""

    dialect: Dialect = "sqlite"

    def __init__(self, world: World) -> None:
        self.tables = world.tables
        self._snapshot = build_snapshot(world)
        self._conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA foreign_keys = ON")
        self.reset()

    def touched(self) -> dict[str, set[Any]]:
        out: dict[str, set[Any]] = {}
        for table, pk in self._conn.execute(f"SELECT DISTINCT tbl, pk FROM {TOUCHED}"):
            out.setdefault(table, set()).add(pk)
        return out

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        return self._run(sql, params)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        return self._run(sql, params)

    def _run(self, sql: str, params: Sequence[Any]) -> list[Row]:
        try:
            return self._conn.execute(sql, tuple(params)).fetchall()
        except sqlite3.IntegrityError as exc:
            raise ApplicationError(f"the application refused the change: {exc}") from exc
        except sqlite3.Error as exc:
            raise DatabaseError(f"SQLite failed on {sql.split(None, 1)[0]}: {exc}") from exc

    @contextmanager
    def transaction(self) -> Iterator[None]:
        self._conn.execute("BEGIN")
        try:
            yield
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    @contextmanager
    def _read_only(self, timeout_s: float | None = None) -> Iterator[None]:
        """``PRAGMA query_only``, an authorizer that allows only reading, and an optional deadline."""
        self._conn.execute("PRAGMA query_only = ON")
        self._conn.set_authorizer(_authorize_read_only)
        if timeout_s is not None:
            deadline = time.monotonic() + timeout_s
            self._conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
        try:
            yield
        finally:
            self._conn.set_progress_handler(None, 0)
            self._conn.set_authorizer(None)
            self._conn.execute("PRAGMA query_only = OFF")

    def check_value(self, sql: str, params: Sequence[Any] = ()) -> Any:
        validate_check_sql(sql)
        try:
            with self._read_only():
                rows = self._conn.execute(sql, tuple(params)).fetchall()
        except sqlite3.DatabaseError as exc:
            if _refused(exc):
                raise CheckRefused(f"the check tried to do more than read: {exc}") from exc
            raise CheckError(f"the check's query failed: {exc}") from exc
        return single_value(rows)

    def read_query(self, sql: str, *, max_rows: int, timeout_s: float) -> tuple[tuple[str, ...], list[Row], bool]:
        """An agent's read-only SELECT: (column names, at most ``max_rows`` rows, whether cut).

        Raises:
            ApplicationError: the query is refused, fails or runs past ``timeout_s`` (the agent sees why).
        """
        try:
            validate_check_sql(sql, name="query")
        except CheckRefused as exc:
            raise ApplicationError(f"{exc}. Only one read-only SELECT statement runs") from exc
        try:
            with self._read_only(timeout_s):
                cursor = self._conn.execute(sql)
                rows = cursor.fetchmany(max_rows + 1)
                columns = tuple(d[0] for d in cursor.description or ())
                cursor.close()
        except sqlite3.Error as exc:
            if "interrupt" in str(exc):
                raise ApplicationError(f"the query ran longer than {timeout_s:g}s and was stopped; filter "
                                       "earlier, join on keys, or aggregate in the query") from exc
            if _refused(exc):
                raise ApplicationError(f"the query tried to do more than read: {exc}") from exc
            raise ApplicationError(f"the query failed: {exc}") from exc
        return columns, rows[:max_rows], len(rows) > max_rows

    def reset(self) -> None:
        try:
            self._conn.deserialize(self._snapshot)
        except sqlite3.Error as exc:
            raise DatabaseError(f"SQLite could not restore the snapshot: {exc}") from exc

    def close(self) -> None:
        self._conn.close()


def _refused(exc: sqlite3.Error) -> bool:
    return "not authorized" in str(exc) or "readonly" in str(exc)


def single_value(rows: Sequence[Sequence[Any]]) -> Any:
    """The one value of a check's result, or :class:`CheckError` saying what arrived."""
    if len(rows) != 1:
        raise CheckError(f"a check must return exactly one row; it returned {len(rows)}")
    if len(rows[0]) != 1:
        raise CheckError(
            f"a check must return exactly one column; it returned {len(rows[0])}"
        )
    return rows[0][0]
