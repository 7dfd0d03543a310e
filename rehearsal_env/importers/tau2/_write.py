"""How the tools write: only real changes, each changed row logged in ``row_changes``.

A tool computes a row's new values in Python (tau2's float arithmetic, in
tau2's order) and hands them here; a column is written only when its value
differs, and every inserted, updated or deleted row is logged once per call in
``row_changes`` (the application's audit log), which the scope check reads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...backends import Database
from ...tools import ToolFailed


def one(db: Database, sql: str, params: Sequence[Any], missing: str) -> tuple[Any, ...]:
    """The first row of ``sql``, or the tool error ``missing`` (tau2's own message)."""
    rows = db.query(sql, params)
    if not rows:
        raise ToolFailed(missing)
    return rows[0]


def _log(db: Database, table: str, row_id: int) -> None:
    db.execute("INSERT INTO row_changes (tbl, row_id) VALUES (?, ?)", (table, row_id))


def update(db: Database, table: str, row_id: int, values: Mapping[str, Any]) -> bool:
    """Set ``values`` on row ``row_id`` where they differ; True when something changed."""
    names = list(values)
    current = db.query(f"SELECT {', '.join(names)} FROM {table} WHERE id = ?", (row_id,))
    if not current:
        raise ToolFailed(f"{table} row {row_id} is missing")
    changed = {n: values[n] for n, old in zip(names, current[0], strict=True) if old != values[n]}
    if not changed:
        return False
    sets = ", ".join(f"{n} = ?" for n in changed)
    db.execute(f"UPDATE {table} SET {sets} WHERE id = ?", (*changed.values(), row_id))
    _log(db, table, row_id)
    return True


def insert(db: Database, table: str, values: Mapping[str, Any]) -> None:
    """Insert one row (its ``id`` given) and log it."""
    names = list(values)
    db.execute(f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
               tuple(values.values()))
    _log(db, table, values["id"])


def delete(db: Database, table: str, row_id: int) -> None:
    """Delete one row and log it."""
    db.execute(f"DELETE FROM {table} WHERE id = ?", (row_id,))
    _log(db, table, row_id)


def put_children(db: Database, table: str, parent: str, parent_id: int, base: int,
                 rows: Sequence[Mapping[str, Any]]) -> None:
    """Make ``parent_id``'s children in ``table`` exactly ``rows`` (by position; ids ``base + position``)."""
    existing = {r[0]: r[1] for r in db.query(f"SELECT position, id FROM {table} WHERE {parent} = ?",
                                             (parent_id,))}
    for pos, values in enumerate(rows):
        if pos in existing:
            update(db, table, existing.pop(pos), values)
        else:
            insert(db, table, {"id": base + pos, parent: parent_id, "position": pos, **values})
    for row_id in existing.values():
        delete(db, table, row_id)

