"""Databases for forks and restored episodes: spare copies of a world, and the state written into one.

A fork needs a database of its own in the parent's exact state. Opening one costs
little on SQLite (deserializing the world's snapshot) but a template clone on
PostgreSQL (tens to hundreds of milliseconds) and a container start in the Docker
sandbox (seconds), so forks draw from a per-process pool of *spare* databases,
already seeded and reset: :func:`take_database` pops one (or opens one when the pool
is empty), :func:`copy_database` writes the parent's touched rows into it
(:mod:`._delta`), and closing a forked or restored env resets its database and puts
it back (:func:`give_back`, at most :data:`MAX_SPARES` per world and backend). A
search that keeps K branches alive and closes the ones it drops therefore never waits
for a database after its first K forks; :func:`prepare_spares` opens them ahead of time.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from ..backends import Database, DatabaseError, open_database
from ..worlds import World
from ._delta import apply_delta, capture_delta

MAX_SPARES = 16
"""Spare databases kept per world and backend (more are closed when given back)."""

_LOCK = threading.Lock()
_SPARES: dict[tuple[int, str, str], tuple[World, list[Database]]] = {}


def _key(world: World, backend: str, options: Mapping[str, Any]) -> tuple[int, str, str]:
    return id(world), backend, repr(sorted(options.items()))


def take_database(world: World, backend: str, options: Mapping[str, Any]) -> Database:
    """A reset database of ``world`` on ``backend``: a spare if one is kept, else a new one."""
    with _LOCK:
        kept = _SPARES.get(_key(world, backend, options))
        if kept is not None and kept[1]:
            return kept[1].pop()
    return open_database(world, backend, **options)


@contextmanager
def spare_database(world: World, backend: str, options: Mapping[str, Any]) -> Iterator[Database]:
    """A reset database of ``world`` on ``backend`` for the ``with`` block (a spare, given back after it)."""
    db = take_database(world, backend, options)
    try:
        yield db
    finally:
        give_back(world, backend, options, db)


def give_back(world: World, backend: str, options: Mapping[str, Any], db: Database) -> None:
    """Reset ``db`` and keep it as a spare (close it if it cannot be reset or the pool is full)."""
    try:
        db.reset()
    except DatabaseError:
        _close(db)
        return
    with _LOCK:
        kept = _SPARES.setdefault(_key(world, backend, options), (world, []))[1]
        if len(kept) < MAX_SPARES:
            kept.append(db)
            return
    _close(db)


def prepare_spares(world: World, backend: str, options: Mapping[str, Any], count: int) -> int:
    """Open spares until ``count`` are kept for ``world`` on ``backend`` (at most :data:`MAX_SPARES`);
    returns how many are kept."""
    count = min(int(count), MAX_SPARES)
    while True:
        with _LOCK:
            kept = _SPARES.setdefault(_key(world, backend, options), (world, []))[1]
            if len(kept) >= count:
                return len(kept)
        db = open_database(world, backend, **options)
        with _LOCK:
            kept.append(db)


def close_spares() -> None:
    """Close every spare database of this process (PostgreSQL drops them; the sandbox stops them)."""
    with _LOCK:
        kept = [db for _, dbs in _SPARES.values() for db in dbs]
        _SPARES.clear()
    for db in kept:
        _close(db)


def copy_database(source: Database, world: World, backend: str, options: Mapping[str, Any], *,
                  into: Database | None = None) -> Database:
    """A database of ``world`` on ``backend`` in ``source``'s exact state (rows and next ids): ``into`` (a reset
    database of ``world``, e.g. from a server's own pool) when given, else a spare."""
    delta = capture_delta(source)
    db = into if into is not None else take_database(world, backend, options)
    try:
        apply_delta(db, delta)
    except BaseException:
        if into is None:
            _close(db)
        raise
    return db


def _close(db: Database) -> None:
    try:
        db.close()
    except DatabaseError:
        pass
