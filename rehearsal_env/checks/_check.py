"""Checks: one read-only SQL query, the value wanted, and one of six comparisons.

A check is the only thing that decides an outcome. Its query must be a single
``SELECT`` (or ``WITH … SELECT``) statement returning exactly one value; values
are bound as parameters (``?`` placeholders), never pasted into the text.
:func:`~rehearsal_env.checks.screen_check_sql` (sqlglot's tokens, both dialects)
refuses what it can see when the check is made; before the check reaches a database
the backend parses it (:func:`~rehearsal_env.checks.validate_check_sql`, or PostgreSQL's
own parser) and runs it read-only, as a reader that may only SELECT the world's tables.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from ._errors import CheckRefused
from ._statement import screen_check_sql

Op = Literal["eq", "ne", "gt", "ge", "lt", "le"]

OPS: dict[str, Callable[[Any, Any], bool]] = {
    "eq": operator.eq,
    "ne": operator.ne,
    "gt": operator.gt,
    "ge": operator.ge,
    "lt": operator.lt,
    "le": operator.le,
}

CheckKind = Literal["goal", "hard_rule"]


@dataclass(frozen=True)
class Check:
    """One read-only question to the world's database, with the wanted answer."""

    name: str
    """What the check asserts, in words ("exactly one refund on order 1042")."""
    sql: str
    """A single SELECT statement returning exactly one value; ``?`` marks each parameter."""
    op: Op
    """How the held value is compared with ``want``: eq ne gt ge lt le."""
    want: Any
    """The wanted value (int, float, str or None)."""
    params: tuple[Any, ...] = ()
    """Values bound to the ``?`` placeholders, in order."""

    def __post_init__(self) -> None:
        if self.op not in OPS:
            raise CheckRefused(
                f"check {self.name!r}: op must be one of {sorted(OPS)}, got {self.op!r}"
            )
        holes = screen_check_sql(self.sql, name=self.name)
        if not isinstance(self.params, tuple):
            object.__setattr__(self, "params", tuple(self.params))
        if holes != len(self.params):
            raise CheckRefused(
                f"check {self.name!r}: the query has {holes} '?' placeholder(s) but "
                f"{len(self.params)} parameter(s) were given; pass one value per '?'"
            )

    def compare(self, held: Any) -> bool:
        """True when ``held <op> want``; comparing None with an ordering op is False."""
        if held is None or self.want is None:
            if self.op in ("eq", "ne"):
                return OPS[self.op](held, self.want)
            return False
        return OPS[self.op](held, self.want)


@dataclass(frozen=True)
class CheckResult:
    """What one check found at the end of an episode."""

    name: str
    """The check's name."""
    kind: CheckKind
    """``goal`` (the request was done) or ``hard_rule`` (something that must never happen)."""
    op: str
    """The comparison used."""
    want: Any
    """The wanted value."""
    held: Any
    """The value the database held (None when the check errored)."""
    passed: bool
    """Whether ``held <op> want``; False when the check errored."""
    error: str | None = None
    """Why the check could not be evaluated (zero rows, several values, a database error)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "op": self.op,
            "want": self.want,
            "held": self.held,
            "passed": self.passed,
            "error": self.error,
        }
