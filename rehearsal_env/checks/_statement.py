"""What one SQL statement is, decided by a real parser (sqlglot) and cached per text.

:func:`parse_statement` parses a text in one dialect (``sqlite`` or ``postgres``)
and records the facts every decision needs: whether it is exactly one ``SELECT``
(``WITH ... SELECT`` and ``UNION`` included; no ``INTO``, no ``FOR UPDATE``, no
data-modifying ``WITH``), whether it reads the server's clock (``now()``,
``CURRENT_DATE``, ``date('now')``, ``'today'::date``, a date function without a
time value, ... in any spelling the parser sees), its placeholders, the functions
it calls and the tables it reads. A text the parser cannot read is refused with
the parser's message: a statement that is not understood is not run.

:func:`screen_check_sql` looks at a check when it is made, from sqlglot's tokens in both
dialects (a check is portable, and the dialects read some texts differently: ``E'\\''``
is a complete literal on PostgreSQL only); :func:`validate_check_sql` parses it in full,
in the backend's dialect just before it runs (or in both). Decisions are cached by text
(:func:`functools.lru_cache`), so the hot path parses a statement once per process.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Any, Literal

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import SqlglotError
from sqlglot.tokens import TokenType

from ._bounds import bounds_refusal
from ._errors import CheckRefused

SqlDialect = Literal["sqlite", "postgres"]

CLOCK_WORDS = frozenset({"now", "today", "tomorrow", "yesterday"})
"""String values that mean the server's clock (SQLite ``date('now')``, PostgreSQL ``'today'::date``)."""
CLOCK_KEYWORDS = frozenset({"current_date", "current_time", "current_timestamp", "localtime", "localtimestamp"})
"""SQL keywords that read the server's clock (written without parentheses)."""
CLOCK_FUNCTIONS = CLOCK_KEYWORDS | {
    "now", "clock_timestamp", "statement_timestamp", "transaction_timestamp", "timeofday",
    "getdate", "sysdate", "systimestamp", "unix_timestamp",
}
"""Functions and keywords that read the server's clock, by name."""
_CLOCK_CLASSES: tuple[type[Any], ...] = (
    exp.CurrentDate, exp.CurrentTime, exp.CurrentTimestamp, exp.CurrentDatetime,
    exp.Localtime, exp.Localtimestamp)
# SQLite's date functions: with no time value (date(), strftime('%Y')) they read the clock.
_SQLITE_DATE_FUNCTIONS = {"date": 1, "time": 1, "datetime": 1, "julianday": 1, "unixepoch": 1, "strftime": 2,
                          "timediff": 2}
_WRITES: tuple[type[Any], ...] = (
    exp.DML, exp.DDL, exp.Command, exp.Into, exp.Lock, exp.Set, exp.Pragma, exp.Transaction, exp.Commit,
    exp.Rollback, exp.Copy, exp.Use, exp.Attach, exp.Detach)
_SELECTS: tuple[type[Any], ...] = (exp.Select, exp.SetOperation)


class _DropCommandFallback(logging.Filter):
    """sqlglot logs a warning when it reads a statement it does not know as a raw command; we refuse it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Falling back to parsing as a 'Command'" not in record.getMessage()


logging.getLogger("sqlglot").addFilter(_DropCommandFallback())


@dataclass(frozen=True)
class Statement:
    """What the parser found in one SQL text."""

    sql: str
    """The text as given."""
    dialect: SqlDialect
    """The dialect it was parsed in."""
    refusal: str | None
    """Why it is not one read-only SELECT without the server clock; None when it is."""
    placeholders: int = 0
    """How many ``?`` parameters it takes."""
    functions: frozenset[str] = frozenset()
    """The functions it calls, by sqlglot's name for them (lower case; ``trim``, ``count``, ...)."""
    tables: frozenset[str] = frozenset()
    """The tables it reads (lower case), CTE names left out; ``""`` for a table-valued function."""
    qualified: bool = False
    """Whether it names a schema or database (``main.t``, ``pg_catalog.pg_database``)."""
    aggregates: bool = False
    """Whether the database aggregates or ranks (an aggregate, ``GROUP BY``, ``ORDER BY ... LIMIT``)."""
    bounds: str | None = None
    """Read in the ``sqlite`` dialect only (an agent's): why the text passes one of the bounds of
    :mod:`._bounds` (expression depth, parser nesting, terms), or cannot be measured (too big for the parser, not
    parsed: then the same words as ``refusal``); None when it is within them."""

    @property
    def ok(self) -> bool:
        return self.refusal is None


def function_name(node: exp.Func) -> str:
    """sqlglot's name of a function call, lower case (``Anonymous`` calls keep the name written)."""
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    return node.sql_name().lower()


def _clock(tree: exp.Expr, dialect: SqlDialect) -> str | None:
    """The first thing in ``tree`` that reads the server clock, as written, or None."""
    for node in tree.walk():
        if isinstance(node, _CLOCK_CLASSES):
            return node.sql(dialect)
        if isinstance(node, exp.Func) and function_name(node) in CLOCK_FUNCTIONS:
            return node.sql(dialect)
        if isinstance(node, exp.Column) and not node.table and node.name.lower() in CLOCK_KEYWORDS:
            quoted = isinstance(node.this, exp.Identifier) and node.this.quoted
            if not quoted:
                return node.name  # a keyword in the other dialect (SQLite reads LOCALTIME as a column)
        if isinstance(node, exp.Literal) and node.is_string and node.name.strip().lower() in CLOCK_WORDS:
            return f"'{node.name}'"
        if isinstance(node, exp.Anonymous) and dialect == "sqlite":
            wanted = _SQLITE_DATE_FUNCTIONS.get(function_name(node))
            if wanted is not None and len(node.expressions) < wanted:
                return node.sql(dialect)  # date() is today
        if isinstance(node, (exp.Date, exp.TimeToStr, exp.TsOrDsToTimestamp)) and dialect == "sqlite":
            if not node.this and not node.expressions:
                return node.sql(dialect)
    return None


def _shape(tree: exp.Expr | None) -> str | None:
    """Why ``tree`` is not a single read-only SELECT, or None."""
    if tree is None:
        return "the query is empty; write one SELECT statement"
    if not isinstance(tree, _SELECTS):
        first = (tree.sql().split(None, 1) or ["?"])[0].upper()
        kind = str(tree.this).split(None, 1)[0].upper() if isinstance(tree, exp.Command) else tree.key.upper()
        also = "" if kind == first else f" but is a {kind} statement"
        return f"it starts with {first!r}{also}; only a read-only SELECT (or WITH ... SELECT) statement is accepted"
    for node in tree.walk():
        if isinstance(node, _WRITES):
            word = "INTO" if isinstance(node, exp.Into) else "FOR UPDATE" if isinstance(node, exp.Lock) else (
                node.key.upper())
            return f"it uses {word!r}, which can change data or session state; only reading is accepted"
    return None


def _aggregates(tree: exp.Expr) -> bool:
    for node in tree.walk():
        if isinstance(node, (exp.AggFunc, exp.Group)):
            return True
        if isinstance(node, exp.Anonymous) and function_name(node) in ("total", "group_concat", "string_agg"):
            return True
        if isinstance(node, exp.Select) and node.args.get("order") and node.args.get("limit"):
            return True
    return False


MAX_NESTING = 24
"""Deepest nesting of parentheses and ``CASE ... END`` a statement may have; deeper is refused before the parser
sees it (sqlglot recurses about 20 frames per level of either: 46 parentheses, or about 45 nested CASEs, exhaust
Python's stack inside an episode)."""
MAX_TOKENS = 4000
"""Most tokens a statement may have (the parser takes about 0.1 ms of CPU per token: the bound keeps one
statement's parse well under a second)."""


def _nesting(sql: str, dialect: SqlDialect) -> tuple[int, int]:
    """(how deep the statement's parentheses and CASE expressions nest, how many tokens it has), by sqlglot's
    tokens."""
    depth = deepest = 0
    tokens = Dialect.get_or_raise(dialect).tokenize(sql)
    for token in tokens:
        if token.token_type in (TokenType.L_PAREN, TokenType.CASE):
            depth += 1
            deepest = max(deepest, depth)
        elif token.token_type in (TokenType.R_PAREN, TokenType.END):
            depth -= 1
    return deepest, len(tokens)


def size_refusal(sql: str, dialect: SqlDialect = "sqlite") -> str | None:
    """Why ``sql`` is too big for any parser (parentheses and CASEs nested deeper than :data:`MAX_NESTING`, more than
    :data:`MAX_TOKENS` tokens); None when it is not. The same answer whatever backend runs it next."""
    try:
        depth, tokens = _nesting(sql, dialect)
    except SqlglotError:
        return None  # the parser says what is wrong with the text
    if tokens > MAX_TOKENS:
        return f"it has {tokens} tokens; at most {MAX_TOKENS} are accepted: aggregate in fewer, shorter expressions"
    if depth > MAX_NESTING:
        return (f"its parentheses and CASE expressions nest {depth} deep; at most {MAX_NESTING} levels are "
                "accepted: flatten the expression or use a WITH clause")
    return None


@functools.lru_cache(maxsize=16384)
def parse_statement(sql: str, dialect: SqlDialect) -> Statement:
    """The facts of ``sql`` read as ``dialect`` (see :class:`Statement`); cached by text. A statement nested
    deeper than :data:`MAX_NESTING`, longer than :data:`MAX_TOKENS` tokens, or too deep for the parser in any
    other way, is refused, never raised."""
    too_big = size_refusal(sql, dialect)
    if too_big is not None:
        return Statement(sql, dialect, too_big, bounds=too_big)
    try:
        return _parse(sql, dialect)
    except RecursionError:
        why = ("it is nested too deeply for the parser (a very long chain of operators or CASE branches); split it up "
               "or use a WITH clause")
        return Statement(sql, dialect, why, bounds=why)


def _parse(sql: str, dialect: SqlDialect) -> Statement:
    try:
        trees = [t for t in sqlglot.parse(sql, read=dialect) if t is not None]
    except SqlglotError as exc:
        first = str(exc).strip().split("\n", 1)[0]
        why = f"it could not be parsed as {dialect} SQL ({first}); write one plain SELECT statement"
        return Statement(sql, dialect, why, bounds=why)
    bounds = bounds_refusal(sql, trees) if dialect == "sqlite" else None
    if len(trees) > 1:
        return Statement(sql, dialect, "it holds more than one statement (a ';' before the end); "
                                       "one statement is accepted", bounds=bounds)
    tree = trees[0] if trees else None
    refusal = _shape(tree)
    if refusal is None and tree is not None:
        clock = _clock(tree, dialect)
        if clock is not None:
            refusal = (f"it reads the database server's clock ({clock}); the world's clock is frozen at its "
                       "data_anchor: pass world.now (or a date computed from it) as a parameter, or write the date")
    if tree is None:
        return Statement(sql, dialect, refusal, bounds=bounds)
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    tables = {t.name.lower() for t in tree.find_all(exp.Table) if t.name.lower() not in ctes or t.db}
    tables |= {"" for t in tree.find_all(exp.Table) if not isinstance(t.this, exp.Identifier)}
    return Statement(
        sql, dialect, refusal,
        placeholders=sum(1 for _ in tree.find_all(exp.Placeholder)),
        functions=frozenset(function_name(f) for f in tree.find_all(exp.Func)),
        tables=frozenset(tables),
        qualified=any(t.args.get("db") or t.args.get("catalog") for t in tree.find_all(exp.Table)),
        aggregates=_aggregates(tree),
        bounds=bounds,
    )


def validate_check_sql(sql: str, *, name: str = "<check>", dialect: SqlDialect | None = None) -> Statement:
    """Refuse anything that is not a single read-only SELECT without the server clock.

    Args:
        sql: The statement.
        name: The check's name, for the message.
        dialect: Parse in this dialect only (a backend, just before it runs the statement);
            None: in both, and both must accept it (a portable check).

    Returns:
        The statement as read by ``dialect`` (by SQLite's when None).

    Raises:
        CheckRefused: naming the check, what arrived and what is accepted.
    """
    first = parse_statement(sql, dialect or "sqlite")
    for statement in (first,) if dialect else (first, parse_statement(sql, "postgres")):
        if statement.refusal is not None:
            raise CheckRefused(f"check {name!r} is refused: {statement.refusal}: {_excerpt(sql)}")
    return first


_TOKENIZERS = {d: sqlglot.Dialect.get_or_raise(d) for d in ("sqlite", "postgres")}
_WRITE_TOKENS = frozenset(getattr(TokenType, n) for n in (
    "INSERT", "UPDATE", "DELETE", "MERGE", "CREATE", "DROP", "ALTER", "TRUNCATE", "PRAGMA", "ATTACH", "DETACH",
    "GRANT", "REVOKE", "COPY", "SET", "INTO", "COMMIT", "ROLLBACK", "BEGIN", "EXECUTE", "COMMAND", "ANALYZE",
    "LOCK") if hasattr(TokenType, n))
_CLOCK_TOKENS = frozenset(getattr(TokenType, n) for n in (
    "CURRENT_DATE", "CURRENT_TIME", "CURRENT_TIMESTAMP", "CURRENT_DATETIME", "LOCALTIME", "LOCALTIMESTAMP")
    if hasattr(TokenType, n))
_STRINGS = frozenset({TokenType.STRING, TokenType.NATIONAL_STRING, TokenType.BYTE_STRING, TokenType.RAW_STRING,
                      TokenType.HEREDOC_STRING, TokenType.UNICODE_STRING})


def _screen_refusal(sql: str, dialect: SqlDialect) -> tuple[str | None, int]:
    """(why ``sql`` is refused, placeholders), from sqlglot's tokens of ``dialect`` alone."""
    try:
        tokens = [t for t in _TOKENIZERS[dialect].tokenize(sql)]
    except SqlglotError as exc:
        first = str(exc).strip().split("\n", 1)[0]
        return f"it could not be read as {dialect} SQL ({first}); write one plain SELECT statement", 0
    while tokens and tokens[-1].token_type == TokenType.SEMICOLON:
        tokens.pop()
    if not tokens:
        return "the query is empty; write one SELECT statement", 0
    holes = sum(1 for t in tokens if t.token_type == TokenType.PLACEHOLDER)
    if any(t.token_type == TokenType.SEMICOLON for t in tokens):
        return "it holds more than one statement (a ';' before the end); one statement is accepted", holes
    start = next((t for t in tokens if t.token_type != TokenType.L_PAREN), tokens[0])
    if start.token_type not in (TokenType.SELECT, TokenType.WITH):
        return (f"it starts with {start.text.upper()!r}; only a read-only SELECT (or WITH ... SELECT) statement "
                "is accepted"), holes
    for i, token in enumerate(tokens):
        kind, text = token.token_type, token.text.lower()
        called = i + 1 < len(tokens) and tokens[i + 1].token_type == TokenType.L_PAREN
        if kind in _WRITE_TOKENS:
            return (f"it uses {token.text.upper()!r}, which can change data or session state; only reading is "
                    "accepted"), holes
        if kind in _CLOCK_TOKENS or (called and text in CLOCK_FUNCTIONS) or (
                kind in _STRINGS and text.strip() in CLOCK_WORDS):
            return (f"it reads the database server's clock ({token.text}); the world's clock is frozen at its "
                    "data_anchor: pass world.now (or a date computed from it) as a parameter, or write the "
                    "date"), holes
    return None, holes


@functools.lru_cache(maxsize=16384)
def screen_check_sql(sql: str, *, name: str = "<check>") -> int:
    """A quick first look at a check when it is made (tokens only, both dialects); returns its placeholders.

    Refuses what tokens show (several statements, not a SELECT, a writing keyword, the clock);
    the full parse (:func:`validate_check_sql`) runs before the check reaches a database.

    Raises:
        CheckRefused: naming the check, what arrived and what is accepted.
    """
    holes = 0
    for dialect in ("sqlite", "postgres"):
        why, holes = _screen_refusal(sql, dialect)
        if why is not None:
            raise CheckRefused(f"check {name!r} is refused: {why}: {_excerpt(sql)}")
    return holes


def _excerpt(sql: str, limit: int = 300) -> str:
    return repr(sql if len(sql) <= limit else sql[:limit] + "...")
