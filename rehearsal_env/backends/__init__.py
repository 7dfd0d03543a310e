"""Database backends: the embedded SQLite default, PostgreSQL, and the Docker sandbox (a plugin).

:func:`open_database` is the only way the env gets a database; every backend
implements :class:`Database` and is built from a :class:`DatabaseSpec` (tables and
seed rows; a world is one). A new backend registers a factory with
:func:`register_backend`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from ._database import ApplicationError, Database, DatabaseError, Dialect, changes, digest, table_rows
from ._spec import DatabaseSpec, SeedData
from .sqlite import SQLiteDatabase

BackendFactory = Callable[..., Database]
"""``(spec, **options) -> Database``: builds one env's private database of ``spec``."""


def _sqlite(spec: DatabaseSpec, **options: Any) -> Database:
    if options:
        raise TypeError(f"the sqlite backend takes no options; got {sorted(options)}")
    return SQLiteDatabase(spec)


def _postgres(spec: DatabaseSpec, **options: Any) -> Database:
    # Imported on first use: psycopg is only loaded by processes that use PostgreSQL.
    from .postgres import PostgresDatabase

    return PostgresDatabase(spec, **options)


def plugin(target: str) -> BackendFactory:
    """A factory named by ``"module:attribute"``, imported on first use (a backend built on this package).

    The Docker sandbox (``rehearsal_env.sandbox``) builds on the PostgreSQL backend, so this
    package names it rather than importing it: the import graph keeps pointing down.
    """
    module, _, attribute = target.partition(":")

    def factory(spec: DatabaseSpec, **options: Any) -> Database:
        found: BackendFactory = getattr(importlib.import_module(module), attribute)
        return found(spec, **options)

    factory.__qualname__ = f"plugin({target!r})"
    return factory


BACKENDS: dict[str, BackendFactory] = {
    "sqlite": _sqlite,
    "postgres": _postgres,
    "docker": plugin("rehearsal_env.sandbox:SandboxDatabase"),
}
"""Backend name -> factory, in the order the CLI lists them (see :func:`register_backend`)."""


def register_backend(name: str, factory: BackendFactory) -> None:
    """Make ``open_database(spec, name, **options)`` call ``factory(spec, **options)``.

    Raises:
        ValueError: ``name`` is already registered to another factory.
    """
    if BACKENDS.get(name, factory) is not factory:
        raise ValueError(f"backend {name!r} is already registered; choose another name")
    BACKENDS[name] = factory


def open_database(spec: DatabaseSpec, backend: str = "sqlite", **options: Any) -> Database:
    """A private, seeded database of ``spec`` on ``backend``.

    Args:
        spec: The tables and seed rows to load: a world, or a :class:`SeedData`.
        backend: ``"sqlite"`` (embedded, default), ``"postgres"``, or a registered backend.
        options: Backend options; PostgreSQL takes ``dsn`` (else ``REHEARSAL_POSTGRES_DSN``,
            else a private server is started) and ``check_timeout_ms``.
    """
    factory = BACKENDS.get(backend)
    if factory is None:
        raise ValueError(f"unknown backend {backend!r}; expected one of {', '.join(BACKENDS)}")
    return factory(spec, **options)


__all__ = [
    "BACKENDS",
    "ApplicationError",
    "BackendFactory",
    "Database",
    "DatabaseError",
    "DatabaseSpec",
    "Dialect",
    "SQLiteDatabase",
    "SeedData",
    "changes",
    "digest",
    "open_database",
    "plugin",
    "register_backend",
    "table_rows",
]
