"""The one seam between the env and a database engine.

A :class:`Database` is one env's private copy of a world's database. Tools run
application SQL through :meth:`Database.query` and :meth:`Database.execute`
inside :meth:`Database.transaction` (one committed transaction per tool call,
as a real application commits each request); checks run through
:meth:`Database.check_value`, which is read-only on every backend;
:meth:`Database.reset` restores the snapshot taken right after seeding.

Application SQL uses ``?`` placeholders on every backend; the PostgreSQL
backend translates them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Literal, Protocol, runtime_checkable

from ..schema import Table

Dialect = Literal["sqlite", "postgres"]
Row = tuple[Any, ...]

APP_STATEMENT_TIMEOUT_S = 5.0
"""An application statement (a tool's own SQL) running longer than this is stopped, on every backend (SQLite:
an interrupt; PostgreSQL: ``statement_timeout``); the tool call fails and the database goes on."""


class DatabaseError(RuntimeError):
    """The database engine failed (infrastructure, not the agent): the episode is not scored."""


class ApplicationError(Exception):
    """The application refused a request (a constraint, a missing row): the agent sees an error."""


@runtime_checkable
class Database(Protocol):
    """One env's database: application access, read-only checks, snapshot reset."""

    dialect: Dialect
    tables: tuple[Table, ...]

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Run one statement and return all rows (application access)."""
        ...

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Run one writing statement; return rows of a RETURNING clause, if any."""
        ...

    def transaction(self) -> AbstractContextManager[None]:
        """Commit on success, roll back if the block raises."""
        ...

    def check_value(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """Run a check's single SELECT read-only and return its one value.

        Raises:
            CheckError: zero rows, several rows, or several columns.
            CheckRefused: the statement tried to write.
        """
        ...

    def read_query(self, sql: str, *, max_rows: int, timeout_s: float) -> tuple[tuple[str, ...], list[Row], bool]:
        """Run an agent's single SELECT read-only: (column names, at most ``max_rows`` rows, whether cut).

        Raises:
            ApplicationError: refused, failed or past ``timeout_s`` (the agent's problem; it sees why).
        """
        ...

    def touched(self) -> dict[str, set[Any]]:
        """Primary keys written (inserted, updated or deleted) per table since the last reset."""
        ...

    def reset(self) -> None:
        """Restore the exact snapshot taken after seeding (rows and id counters)."""
        ...

    def close(self) -> None:
        """Release the connection (and the private database, if any)."""
        ...


def table_rows(db: Database, table: Table) -> Iterator[Row]:
    """All rows of ``table`` ordered by primary key (for digests and diffs)."""
    cols = ", ".join(table.column_names)
    yield from db.query(f"SELECT {cols} FROM {table.name} ORDER BY {table.primary_key}")


def digest(db: Database) -> str:
    """A backend-neutral SHA-256 of every row of every table, in a fixed order.

    The same world state gives the same digest on SQLite and PostgreSQL,
    because world schemas only use int, text and real columns.
    """
    h = hashlib.sha256()
    for table in sorted(db.tables, key=lambda t: t.name):
        h.update(f"\x00table:{table.name}\n".encode())
        # Rows hold only int, float, str and None on every backend, whose repr is stable.
        h.update(repr(list(table_rows(db, table))).encode())
    return h.hexdigest()


_SNAPSHOT_INDEX: dict[int, tuple[Sequence[Row], dict[Any, Row]]] = {}


def _index(rows: Sequence[Row]) -> dict[Any, Row]:
    """Rows by primary key, cached per snapshot row sequence (which the cache keeps alive)."""
    cached = _SNAPSHOT_INDEX.get(id(rows))
    if cached is None or cached[0] is not rows:
        cached = (rows, {row[0]: tuple(row) for row in rows})
        _SNAPSHOT_INDEX[id(rows)] = cached
    return cached[1]


def changes(db: Database, snapshot: Mapping[str, Sequence[Row]]) -> dict[str, dict[str, list[Row]]]:
    """Rows inserted, updated (new values) and deleted in every table, against ``snapshot``.

    ``snapshot`` maps table name to its rows at reset (a world's seed rows).
    Together with the snapshot this rebuilds the end state offline. Only the keys the
    backend logged as touched since the reset are read (:meth:`Database.touched`).
    """
    out: dict[str, dict[str, list[Row]]] = {}
    touched = db.touched()
    for table in db.tables:
        keys = sorted(touched.get(table.name, ()))
        if not keys:
            continue
        snap = _index(snapshot.get(table.name, ()))
        before = {k: snap[k] for k in keys if k in snap}
        after: dict[Any, Row] = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start:start + 500]
            sql = (f"SELECT {', '.join(table.column_names)} FROM {table.name} "
                   f"WHERE {table.primary_key} IN ({', '.join('?' * len(chunk))})")
            after.update((row[0], tuple(row)) for row in db.query(sql, chunk))
        inserted = [after[k] for k in keys if k in after and k not in before]
        deleted = [before[k] for k in keys if k in before and k not in after]
        updated = [after[k] for k in keys if k in after and k in before and after[k] != before[k]]
        if inserted or updated or deleted:
            out[table.name] = {"inserted": inserted, "updated": updated, "deleted": deleted}
    return out
