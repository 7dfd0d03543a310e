"""An episode's database state as its difference from the world's snapshot, on any backend.

Every backend logs the primary keys written since its last reset
(:meth:`~rehearsal_env.backends.Database.touched`), so an episode's whole database
state is the snapshot plus the current rows of those keys (a key absent now was
deleted). :func:`capture_delta` reads exactly that (one query per touched table);
:func:`apply_delta` writes it into another database of the same world, freshly reset,
in one committed transaction, through the same application SQL on every backend
(SQLite, PostgreSQL, the Docker sandbox's PostgreSQL). Ids follow SQLite's rowid rule
on every backend (the next id is max(id) + 1), so the next inserted id agrees too.

This is what a fork copies and what a checkpoint carries: a few rows, not the database.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..backends import Database, DatabaseError

CHUNK = 500
"""Keys per ``IN (...)`` list (SQLite's default variable limit is far above this)."""


@dataclass(frozen=True)
class TableDelta:
    """The touched rows of one table."""

    table: str
    """The table's name."""
    present: tuple[tuple[Any, ...], ...]
    """The current rows of touched keys that exist, in key order (each in the table's column order)."""
    absent: tuple[Any, ...]
    """Touched keys that do not exist now (deleted, or inserted and deleted again), in order."""


@dataclass(frozen=True)
class DatabaseDelta:
    """A database's state as the world's snapshot plus these rows (tables in the world's order)."""

    tables: tuple[TableDelta, ...]
    """One entry per table with a touched key (parents first, as the world lists its tables)."""

    def to_json(self) -> list[dict[str, Any]]:
        """A JSON-able form (rows as lists; values are int, float, str or None on every backend)."""
        return [{"table": t.table, "present": [list(r) for r in t.present], "absent": list(t.absent)}
                for t in self.tables]

    @staticmethod
    def from_json(data: Sequence[Mapping[str, Any]]) -> DatabaseDelta:
        """The delta back from :meth:`to_json`."""
        return DatabaseDelta(tuple(TableDelta(str(t["table"]), tuple(tuple(r) for r in t["present"]),
                                              tuple(t["absent"])) for t in data))


def _rows(db: Database, table: str, columns: Sequence[str], key: str, keys: Sequence[Any]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for start in range(0, len(keys), CHUNK):
        chunk = keys[start:start + CHUNK]
        out.extend(tuple(r) for r in db.query(
            f"SELECT {', '.join(columns)} FROM {table} WHERE {key} IN ({', '.join('?' * len(chunk))})", chunk))
    return out


def capture_delta(db: Database) -> DatabaseDelta:
    """The touched rows of ``db`` now (call it between tool calls, never inside one)."""
    return read_rows(db, db.touched())


def read_rows(db: Database, keys_by_table: Mapping[str, Iterable[Any]]) -> DatabaseDelta:
    """The current rows of these keys of ``db`` (absent keys listed apart), tables in the world's order."""
    out = []
    for table in db.tables:
        keys = sorted(keys_by_table.get(table.name, ()))
        if not keys:
            continue
        rows = sorted(_rows(db, table.name, table.column_names, table.primary_key, keys), key=lambda r: r[0])
        found = {r[0] for r in rows}
        out.append(TableDelta(table.name, tuple(rows), tuple(k for k in keys if k not in found)))
    return DatabaseDelta(tuple(out))


def apply_delta(db: Database, delta: DatabaseDelta) -> None:
    """Write ``delta`` into ``db``, which must hold the world's snapshot (just reset), in one transaction.

    Rows new to the snapshot are inserted parents first, changed rows updated, rows the delta lacks
    deleted children first, so foreign keys hold after every statement.

    Raises:
        DatabaseError: a table of the delta is not one of ``db``'s, or the engine refused a row (the
            delta is not of this world).
    """
    tables = {t.name: t for t in db.tables}
    unknown = [t.table for t in delta.tables if t.table not in tables]
    if unknown:
        raise DatabaseError(f"the saved database state names tables {unknown} that this world does not have "
                            f"(expected some of {sorted(tables)}); it was taken from another world")
    plans = []
    for part in delta.tables:
        table = tables[part.table]
        keys = [r[0] for r in part.present] + list(part.absent)
        existing = {r[0] for r in _rows(db, table.name, (table.primary_key,), table.primary_key, keys)}
        plans.append((table, part, existing))
    try:
        with db.transaction():
            for table, part, existing in plans:
                cols = table.column_names
                marks = ", ".join("?" * len(cols))
                for row in part.present:
                    if len(row) != len(cols):
                        raise DatabaseError(f"a saved row of {table.name!r} has {len(row)} values; the table has "
                                            f"{len(cols)} columns ({', '.join(cols)})")
                    if row[0] in existing:
                        if len(cols) == 1:
                            continue
                        sets = ", ".join(f"{c} = ?" for c in cols[1:])
                        db.execute(f"UPDATE {table.name} SET {sets} WHERE {table.primary_key} = ?",
                                   (*row[1:], row[0]))
                    else:
                        db.execute(f"INSERT INTO {table.name} ({', '.join(cols)}) VALUES ({marks})", row)
            for table, part, existing in reversed(plans):
                gone = [k for k in part.absent if k in existing]
                for start in range(0, len(gone), CHUNK):
                    chunk = gone[start:start + CHUNK]
                    db.execute(f"DELETE FROM {table.name} WHERE {table.primary_key} IN "
                               f"({', '.join('?' * len(chunk))})", chunk)
    except DatabaseError:
        raise
    except Exception as exc:  # an ApplicationError: a constraint refused a saved row
        raise DatabaseError(f"the saved database state could not be written back: {exc}") from exc
