"""Checks: one read-only SQL query, the value wanted, and one of six comparisons.

A check is the only thing that decides an outcome. Its query must be a single
``SELECT`` (or ``WITH … SELECT``) statement returning exactly one value; values
are bound as parameters (``?`` placeholders), never pasted into the text.
:func:`validate_check_sql` refuses anything else before it reaches a database,
and every backend additionally runs checks in a read-only transaction.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

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


class CheckRefused(ValueError):
    """A check's SQL is not a single read-only statement (raised before it runs)."""


class CheckError(RuntimeError):
    """A check ran but did not return exactly one value (zero rows, several rows or columns)."""


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
        validate_check_sql(self.sql, name=self.name)
        if not isinstance(self.params, tuple):
            object.__setattr__(self, "params", tuple(self.params))
        holes = _count_placeholders(self.sql)
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


_STRINGS_AND_COMMENTS = re.compile(
    r"""'(?:[^']|'')*'      # string literal
      | "(?:[^"]|"")*"      # quoted identifier
      | --[^\n]*            # line comment
      | /\*.*?\*/           # block comment
    """,
    re.VERBOSE | re.DOTALL,
)
_WRITE_WORDS = re.compile(
    r"\b(insert|update|delete|upsert|merge|create|drop|alter|truncate|attach|detach|"
    r"pragma|vacuum|reindex|analyze|grant|revoke|copy|call|do|set|reset|lock|begin|commit|"
    r"rollback|savepoint|release|listen|notify|prepare|execute|deallocate|into|nextval|setval)\b",
    re.IGNORECASE,
)


SERVER_CLOCK = re.compile(
    r"\b(now\s*\(|current_date|current_time|current_timestamp|localtime|localtimestamp|"
    r"clock_timestamp|statement_timestamp|transaction_timestamp|timeofday)",
    re.IGNORECASE,
)
"""Functions that read the database server's clock (outside string literals)."""
CLOCK_LITERAL = re.compile(r"'\s*(now|today|tomorrow|yesterday)\s*'", re.IGNORECASE)
"""Date literals that mean the server's clock (``date('now')``, ``'today'::date``)."""


def code_only(sql: str) -> str:
    """The statement with string literals, quoted identifiers and comments blanked out."""
    return _STRINGS_AND_COMMENTS.sub(" ", sql)


def _count_placeholders(sql: str) -> int:
    return code_only(sql).count("?")


def validate_check_sql(sql: str, *, name: str = "<check>") -> None:
    """Refuse anything that is not a single read-only SELECT statement.

    Raises:
        CheckRefused: with a message that says what arrived and what is accepted.
    """
    code = code_only(sql).strip()
    body = code.rstrip().rstrip(";").strip()
    if not body:
        raise CheckRefused(f"check {name!r}: the query is empty; write one SELECT statement")
    if ";" in body:
        raise CheckRefused(
            f"check {name!r} holds more than one statement (a ';' before the end): {sql!r}. "
            "A check is a single SELECT; split it into separate checks"
        )
    first = body.split(None, 1)[0].lower()
    if first not in ("select", "with"):
        raise CheckRefused(
            f"check {name!r} starts with {first.upper()!r}; a check must be a read-only "
            "SELECT (or WITH ... SELECT) statement"
        )
    bad = _WRITE_WORDS.search(body)
    if bad:
        raise CheckRefused(
            f"check {name!r} uses {bad.group(0).upper()!r}, which can change data or "
            "session state; a check may only read. Rewrite it as a plain SELECT"
        )
    clock = SERVER_CLOCK.search(body) or CLOCK_LITERAL.search(sql)
    if clock:
        raise CheckRefused(
            f"check {name!r} reads the database server's clock ({clock.group(0).strip()!r}); the world's "
            "clock is frozen at its data_anchor: pass world.now (or a date computed from it) as a parameter"
        )
