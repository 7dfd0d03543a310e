"""A world's tables, written once and rendered for every backend.

Types are deliberately few so that values read back identically on SQLite and
PostgreSQL: ``int`` (money in cents, flags as 0/1), ``text`` (ISO-8601 dates and
times compare correctly as text) and ``real``. The backends turn a :class:`Table`
into DDL in :mod:`rehearsal_env.backends._dialect`, the one home of dialect
differences.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal

ColumnType = Literal["int", "text", "real"]


@dataclass(frozen=True)
class Column:
    """One column of a table."""

    name: str
    """Column name (lower case, no quoting needed)."""
    type: ColumnType
    """``int``, ``text`` or ``real``."""
    nullable: bool = False
    """Whether NULL is allowed."""
    references: str | None = None
    """``"table.column"`` for a foreign key, else None."""


@dataclass(frozen=True)
class Table:
    """One table; the first column is an integer primary key the database can assign."""

    name: str
    """Table name."""
    columns: tuple[Column, ...]
    """Columns in order; ``columns[0]`` is the integer primary key."""
    indexes: tuple[tuple[str, ...], ...] = ()
    """Secondary indexes, each a tuple of column names."""

    @property
    def primary_key(self) -> str:
        return self.columns[0].name

    @functools.cached_property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)


def col(name: str, type: ColumnType = "text", *, null: bool = False, ref: str | None = None) -> Column:
    """Shorthand for :class:`Column` used in world schemas."""
    return Column(name=name, type=type, nullable=null, references=ref)
