"""Database backends: the embedded SQLite default and PostgreSQL.

:func:`open_database` is the only way the env gets a database; every backend
implements :class:`Database`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._database import ApplicationError, Database, DatabaseError, Dialect, changes, digest, table_rows

if TYPE_CHECKING:
    from ..worlds import World

BACKENDS = ("sqlite", "postgres")


def open_database(world: World, backend: str = "sqlite", **options: Any) -> Database:
    """A private, seeded database of ``world`` on ``backend``.

    Args:
        world: The world whose schema and seed data to load.
        backend: ``"sqlite"`` (embedded, default) or ``"postgres"``.
        options: Backend options; PostgreSQL takes ``dsn`` (else ``REHEARSAL_POSTGRES_DSN``,
            else a private server is started).
    """
    if backend == "sqlite":
        from .sqlite import SQLiteDatabase

        if options:
            raise TypeError(f"the sqlite backend takes no options; got {sorted(options)}")
        return SQLiteDatabase(world)
    if backend == "postgres":
        from .postgres import PostgresDatabase

        return PostgresDatabase(world, **options)
    raise ValueError(f"unknown backend {backend!r}; expected one of {', '.join(BACKENDS)}")


__all__ = [
    "BACKENDS",
    "ApplicationError",
    "Database",
    "DatabaseError",
    "Dialect",
    "changes",
    "digest",
    "open_database",
    "table_rows",
]
