"""Spare databases per world, so that starting an episode rarely opens one."""

from __future__ import annotations

import threading
from typing import Any

from ..backends import Database, DatabaseError, open_database
from ..worlds import World


class DatabasePool:
    """Opened databases of each world, always handed out in the world's snapshot state.

    A database is reset when it is given back, so whatever an episode (of any key) wrote never reaches the
    next user of that database: a fork or a restore, which writes its own state into a database without
    resetting it first, starts from the snapshot plus that state and nothing else. The env also resets at
    each episode's start.

    An idle SQLite database is a full copy of the world in memory: keep few spare. A PostgreSQL
    database lives in the server and costs a template clone to make: keep them all.
    """

    def __init__(self, backend: str, options: dict[str, Any], spare: int) -> None:
        self.backend, self.options, self.spare = backend, dict(options), spare
        self._pool: dict[int, list[Database]] = {}
        self._lock = threading.Lock()
        self._opening = threading.Lock()

    def acquire(self, world: World) -> Database:
        """A spare database of ``world``, else a new one (raises :class:`DatabaseError`)."""
        with self._lock:
            spare = self._pool.get(id(world))
            if spare:
                return spare.pop()
        with self._opening:  # one database opened at a time (PostgreSQL: the first builds the world's template)
            return open_database(world, self.backend, **self.options)

    def release(self, world: World, db: Database) -> None:
        """Reset ``db`` and keep it spare, or close it when enough are kept (or it cannot be reset)."""
        try:
            db.reset()
        except DatabaseError:
            _close(db)
            return
        with self._lock:
            spare = self._pool.setdefault(id(world), [])
            if len(spare) < self.spare:
                spare.append(db)
                return
        _close(db)

    def warm(self, world: World) -> None:
        """Open one database of ``world`` and keep it spare (the snapshot or template is built now)."""
        self.release(world, self.acquire(world))

    def close(self) -> None:
        """Close every spare database."""
        with self._lock:
            pools, self._pool = self._pool, {}
        for spare in pools.values():
            for db in spare:
                _close(db)


def _close(db: Database) -> None:
    try:
        db.close()
    except DatabaseError:
        pass
