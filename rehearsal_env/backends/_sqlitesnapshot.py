"""A world's SQLite snapshot: created and seeded once per process, serialized, and shared.

:func:`build_snapshot` creates ``spec``'s tables in an in-memory database, seeds them, adds the
triggers that log every written key (:data:`TOUCHED`) and returns the serialized bytes, cached per
process (:data:`SNAPSHOT_CACHE_BYTES`). :func:`shared_snapshot` holds the same snapshot once in a
process-wide in-memory database that every database reads until its first write
(:class:`._sqliteshare.SharedSnapshot`).
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Sequence

from ..schema import Table
from ._dialect import create_table
from ._spec import DatabaseSpec
from ._sqliteshare import SharedSnapshot

SNAPSHOT_CACHE_BYTES = 256 * 2**20
"""Most bytes of seeded snapshots a process keeps (the least recently used go first; the newest always stays)."""
_SNAPSHOTS: OrderedDict[tuple[str, str, int], bytes] = OrderedDict()
_SHARED: dict[tuple[str, str, int], SharedSnapshot] = {}
_LOCK = threading.Lock()

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


def build_snapshot(spec: DatabaseSpec) -> bytes:
    """Create and seed ``spec``'s tables in memory and return the serialized database (cached)."""
    key = (spec.name, spec.seed_fingerprint, hash(spec.tables))
    with _LOCK:
        if key in _SNAPSHOTS:
            _SNAPSHOTS.move_to_end(key)
        else:
            conn = sqlite3.connect(":memory:", isolation_level=None)
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("BEGIN")
            for table in spec.tables:
                for statement in create_table(table, "sqlite"):
                    conn.execute(statement)
            rows = spec.seed_rows()
            for table in spec.tables:
                data = rows.get(table.name, [])
                if data:
                    marks = ", ".join("?" * len(table.columns))
                    conn.executemany(
                        f"INSERT INTO {table.name} ({', '.join(table.column_names)}) VALUES ({marks})",
                        data,
                    )
            _log_touched_keys(conn, spec.tables)
            conn.execute("COMMIT")
            _SNAPSHOTS[key] = conn.serialize()
            conn.close()
            while len(_SNAPSHOTS) > 1 and sum(map(len, _SNAPSHOTS.values())) > SNAPSHOT_CACHE_BYTES:
                _SNAPSHOTS.popitem(last=False)
        return _SNAPSHOTS[key]


def shared_snapshot(spec: DatabaseSpec) -> SharedSnapshot:
    """The process's shared snapshot of ``spec`` (made once per cached snapshot; see :func:`build_snapshot`)."""
    key = (spec.name, spec.seed_fingerprint, hash(spec.tables))
    snapshot = build_snapshot(spec)
    with _LOCK:
        shared = _SHARED.get(key)
        if shared is None or shared.snapshot is not snapshot:
            shared = _SHARED[key] = SharedSnapshot(snapshot)
        for gone in [k for k in _SHARED if k not in _SNAPSHOTS and k != key]:  # databases keep theirs alive
            del _SHARED[gone]
        return shared
