"""What PostgreSQL will run, decided by PostgreSQL's own parser (pglast) on the exact text it receives.

:func:`server_text` turns a translated statement (psycopg's ``%s`` placeholders) into
what the server parses (``$1``, ``$2``, ...); :func:`refusal` reads that text with
pglast and says why it may not run, or None:

- exactly one ``SELECT`` (``WITH`` and set operations included), no ``INTO``, no
  ``FOR UPDATE``, no data-modifying ``WITH``;
- no server clock: ``CURRENT_DATE`` and the other SQL value functions of time, ``now()``
  and the other clock functions, a string ``'now'``/``'today'``/... anywhere;
- for an agent (``tables`` given) also: only the functions of
  :data:`~rehearsal_env.checks.AGENT_FUNCTIONS` ``["postgres"]`` (unqualified or in
  ``pg_catalog``), only the world's tables and its own ``WITH`` names (unqualified or in
  ``public``), no other SQL value function (``current_user``, ...), and casts to a date
  or time type only of a literal (a computed ``'no' || 'w'`` cast to a date is the clock).

Because the parser is the server's, a text cannot read one way here and another way
there (``E'\\''`` is a literal to both). Decisions are cached by text.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

import pglast
from pglast import ast, enums
from pglast.visitors import Visitor

from ..checks import AGENT_FUNCTIONS, CLOCK_FUNCTIONS, CLOCK_WORDS
from ._pgcompat import SCHEMA

_CLOCK_OPS = frozenset(op for op in enums.SQLValueFunctionOp
                       if not op.name.endswith(("ROLE", "USER", "CATALOG", "SCHEMA")))
_TIME_TYPES = frozenset({"date", "time", "timetz", "timestamp", "timestamptz", "interval", "abstime", "reltime"})
_PLACEHOLDER = re.compile(r"%(%|s)")
_COMPAT = {(SCHEMA, "to_real"), (SCHEMA, "to_integer")}
"""The SQLite casts :func:`._pgsql.translate` writes in (see :mod:`._pgcompat`)."""


def server_text(text: str) -> str:
    """``text`` as psycopg sends it: ``%s`` numbered ``$1``, ``$2``, ..., ``%%`` as ``%``."""
    counter = iter(range(1, 1 << 30))
    return _PLACEHOLDER.sub(lambda m: "%" if m.group(1) == "%" else f"${next(counter)}", text)


def _name(names: Sequence[Any] | None) -> tuple[str | None, str]:
    parts = [(n.sval or "").lower() for n in names or () if isinstance(n, ast.String)]
    return (parts[-2] if len(parts) > 1 else None), parts[-1] if parts else ""


class _Reader(Visitor):  # type: ignore[misc]
    """Walks a parsed statement and keeps the first reason to refuse it."""

    def __init__(self, tables: frozenset[str] | None, ctes: frozenset[str]) -> None:
        super().__init__()
        self.tables, self.ctes = tables, ctes
        self.why: str | None = None

    def _refuse(self, why: str) -> None:
        if self.why is None:
            self.why = why

    def visit_SQLValueFunction(self, ancestors: Any, node: ast.SQLValueFunction) -> None:
        op = node.op.name.removeprefix("SVFOP_") if node.op is not None else "?"
        if node.op in _CLOCK_OPS:
            self._refuse(_clock(op.removesuffix("_N")))
        elif self.tables is not None:
            self._refuse(f"it reads {op}, which an agent's query may not read")

    def visit_FuncCall(self, ancestors: Any, node: ast.FuncCall) -> None:
        schema, name = _name(node.funcname)
        if name in CLOCK_FUNCTIONS:
            self._refuse(_clock(f"{name}()"))
        elif self.tables is not None and (schema, name) not in _COMPAT and (
                schema not in (None, "pg_catalog") or name not in AGENT_FUNCTIONS["postgres"]):
            shown = f"{schema}.{name}" if schema else name
            self._refuse(f"it calls {shown}(), which an agent's query may not call; the functions allowed are "
                         f"{', '.join(sorted(AGENT_FUNCTIONS['postgres']))}")

    def visit_A_Const(self, ancestors: Any, node: ast.A_Const) -> None:
        value = node.val
        if isinstance(value, ast.String) and (value.sval or "").strip().lower() in CLOCK_WORDS:
            self._refuse(_clock(f"'{value.sval}'"))

    def visit_TypeCast(self, ancestors: Any, node: ast.TypeCast) -> None:
        _, type_name = _name(node.typeName.names if node.typeName is not None else None)
        if self.tables is not None and type_name in _TIME_TYPES and not isinstance(node.arg, ast.A_Const):
            self._refuse(f"it casts a computed value to {type_name}, which can read the server's clock; dates are "
                         "ISO text: compare and slice them as text, or cast a literal date")

    def visit_RangeVar(self, ancestors: Any, node: ast.RangeVar) -> None:
        if self.tables is None:
            return
        name, schema = (node.relname or "").lower(), (node.schemaname or "").lower() or None
        if node.catalogname or schema not in (None, "public"):
            self._refuse(f"it reads {schema}.{name}; an agent's query reads only the world's tables "
                         f"({', '.join(sorted(self.tables))})")
        elif name not in self.tables and not (schema is None and name in self.ctes):
            self._refuse(f"it reads {name}, which is not one of the world's tables "
                         f"({', '.join(sorted(self.tables))})")


def _clock(what: str) -> str:
    return (f"it reads the database server's clock ({what}); the world's clock is frozen at its data_anchor: "
            "pass world.now (or a date computed from it) as a parameter, or write the date")


class _Shape(Visitor):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.why: str | None = None
        self.ctes: set[str] = set()

    def visit_CommonTableExpr(self, ancestors: Any, node: ast.CommonTableExpr) -> None:
        self.ctes.add((node.ctename or "").lower())
        if not isinstance(node.ctequery, ast.SelectStmt) and self.why is None:
            self.why = (f"its WITH {node.ctename} runs {type(node.ctequery).__name__.removesuffix('Stmt').upper()}; "
                        "only reading is accepted")

    def visit_SelectStmt(self, ancestors: Any, node: ast.SelectStmt) -> None:
        if self.why is None and node.intoClause is not None:
            self.why = "it uses 'INTO', which creates a table; only reading is accepted"
        if self.why is None and node.lockingClause:
            self.why = "it locks rows (FOR UPDATE / FOR SHARE); only reading is accepted"


@functools.lru_cache(maxsize=16384)
def clock_refusal(text: str) -> str | None:
    """Why server ``text`` (any statement, application SQL included) reads the server clock; None if not.

    A text PostgreSQL cannot parse is left to the server, which will refuse it with its own message.
    """
    try:
        statements = pglast.parse_sql(text)
    except pglast.parser.ParseError:
        return None
    reader = _Reader(None, frozenset())
    for statement in statements:
        if statement.stmt is not None:
            reader(statement.stmt)
    return reader.why


@functools.lru_cache(maxsize=16384)
def refusal(text: str, tables: frozenset[str] | None = None) -> str | None:
    """Why PostgreSQL server ``text`` may not run (see the module docstring); ``tables``: an agent's world."""
    try:
        statements = pglast.parse_sql(text)
    except pglast.parser.ParseError as exc:
        return f"PostgreSQL cannot parse it ({exc}); write one plain SELECT statement"
    if len(statements) != 1:
        return ("the query is empty; write one SELECT statement" if not statements else
                "it holds more than one statement (a ';' before the end); one statement is accepted")
    stmt = statements[0].stmt
    if stmt is None or not isinstance(stmt, ast.SelectStmt):
        word = type(stmt).__name__.removesuffix("Stmt").upper()
        return f"it is a {word} statement; only a read-only SELECT (or WITH ... SELECT) statement is accepted"
    shape = _Shape()
    shape(stmt)
    if shape.why is not None:
        return shape.why
    reader = _Reader(tables, frozenset(shape.ctes))
    reader(stmt)
    return reader.why
