"""What a backend needs to build a database: tables and their seed rows, nothing of a world.

A :class:`~rehearsal_env.worlds.World` satisfies :class:`DatabaseSpec` as it is
(``name``, ``tables``, ``seed_fingerprint``, ``seed_rows()``), so callers pass a
world to :func:`~rehearsal_env.backends.open_database`; code without a world passes
a :class:`SeedData`. Backends never import ``worlds`` (whose tools need the
:class:`~rehearsal_env.backends.Database` seam): the data flows one way.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..schema import Table


@runtime_checkable
class DatabaseSpec(Protocol):
    """The schema and starting rows of one database, and a key that changes when either does."""

    @property
    def name(self) -> str:
        """A short name (it appears in PostgreSQL template names and errors)."""
        ...

    @property
    def tables(self) -> tuple[Table, ...]:
        """Every table, parents before the tables whose foreign keys refer to them."""
        ...

    @property
    def seed_fingerprint(self) -> str:
        """A hash of every seed row: equal fingerprints (with equal tables) mean identical data."""
        ...

    def seed_rows(self) -> Mapping[str, Sequence[tuple[Any, ...]]]:
        """Rows per table name, each a tuple in the table's column order."""
        ...


@dataclass(frozen=True)
class SeedData:
    """A :class:`DatabaseSpec` from tables and rows given directly (no world needed)."""

    name: str
    """A short name (``[a-z0-9_]``, used in PostgreSQL template names)."""
    tables: tuple[Table, ...]
    """Every table, parents first."""
    rows: Mapping[str, Sequence[tuple[Any, ...]]] = field(default_factory=dict, repr=False, compare=False)
    """Rows per table name, in column order."""

    def seed_rows(self) -> Mapping[str, Sequence[tuple[Any, ...]]]:
        return self.rows

    @functools.cached_property
    def seed_fingerprint(self) -> str:
        h = hashlib.sha256()
        for table in self.tables:
            h.update(f"\x00{table.name}\n".encode())
            h.update(repr([tuple(r) for r in self.rows.get(table.name, ())]).encode())
        return h.hexdigest()
