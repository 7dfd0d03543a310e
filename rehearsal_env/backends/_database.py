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
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Literal, Protocol, runtime_checkable

from ..schema import Table

Dialect = Literal["sqlite", "postgres"]
Row = tuple[Any, ...]


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


def changes(db: Database, snapshot: dict[str, Sequence[Row]]) -> dict[str, dict[str, list[Row]]]:
    """Rows inserted, updated (new values) and deleted in every table, against ``snapshot``.

    ``snapshot`` maps table name to its rows at reset (a world's seed rows).
    Together with the snapshot this rebuilds the end state offline.
    """
    out: dict[str, dict[str, list[Row]]] = {}
    for table in db.tables:
        before = {row[0]: tuple(row) for row in snapshot.get(table.name, ())}
        after = {row[0]: tuple(row) for row in table_rows(db, table)}
        inserted = [after[k] for k in sorted(after.keys() - before.keys())]
        deleted = [before[k] for k in sorted(before.keys() - after.keys())]
        updated = [after[k] for k in sorted(after.keys() & before.keys()) if after[k] != before[k]]
        if inserted or updated or deleted:
            out[table.name] = {"inserted": inserted, "updated": updated, "deleted": deleted}
    return out
