"""The bounds of an agent's SQL, decided by our parser before either backend's engine sees the text.

An agent's query (``run_sql``) runs on SQLite or on PostgreSQL, and one action must give one
observation whatever the backend. The engines' own limits differ (SQLite refuses an expression
65 levels deep, a 17th UNION term, a 17th function argument, a 65th ORDER BY term, a 65th table
in a join and a parser stack past 100 entries; PostgreSQL runs all of them), so the limits are
decided here, on sqlglot's reading of the text as SQLite SQL (the agent's dialect on both
backends): :func:`~rehearsal_env.checks.parse_statement` records in ``Statement.bounds`` why a
text passes one of them (:func:`bounds_refusal`, from the same parse), and
:func:`~rehearsal_env.checks.agent_bounds_refusal` says it for an agent's text. Both backends ask
that first, before anything else about the query (SQLite's
:func:`~rehearsal_env.checks.agent_sql_refusal`, PostgreSQL's ``agent_text``), and refuse with
the same message.

The bounds are the numbers SQLite enforced for agents before (issue 32 lowered PostgreSQL to them
rather than raise SQLite's), counted as SQLite counts them, so that the default backend's answers
stay what they were:

- **Expression depth** (:data:`MAX_EXPR_DEPTH`): SQLite's ``Expr.nHeight``: a leaf is 1 (a
  qualified column ``t.a`` 2), an operator, function, ``CASE``, ``CAST``, ``IN`` or
  ``BETWEEN`` is one more than its deepest operand (parentheses, aliases and ``ORDER BY``'s
  ``DESC`` add nothing), a subquery is one more than the deepest expression of its ``SELECT``
  list, ``WHERE``, ``HAVING``, ``GROUP BY``, ``ORDER BY`` and ``LIMIT``. A 65-term sum
  ``a+a+...`` is a left-deep tree 65 deep. On top of that, SQLite adds the heights of the
  expressions a subquery is nested in while it resolves names (``sqlite3ResolveExprNames``
  adds each expression's height to ``Parse.nHeight``), so ``n`` nested scalar subqueries
  cost ``(n+1)(n+2)/2``: 9 pass, 10 do not. Each join's ``ON`` (or ``USING`` column) is
  ANDed into the ``WHERE`` clause before names are resolved, one more level each.
  Window ``PARTITION BY``/``ORDER BY`` terms and ``FILTER`` clauses are measured on their own.
- **Parser nesting** (:data:`MAX_PARSER_NESTING`): SQLite's LALR parser keeps one entry per
  pending grammar symbol and overflows past :data:`SQLITE_PARSER_STACK` (its builds before
  3.46 have a fixed stack of 100 entries): every nested construct holds a few entries until it
  closes, a parenthesis 1, a function argument 3 to 5, a ``CASE`` branch 3 to 6, a nested
  ``SELECT`` 5 to 8 (``FROM (SELECT ...)`` 6: 15 nested ones overflow within the 24
  parentheses :data:`~rehearsal_env.checks._statement.MAX_NESTING` allows). The costs of
  :func:`._nesting.edge_cost` were measured on SQLite 3.40 and are rounded up, so the estimate is never
  below SQLite's count (``tests/test_sql_bounds.py`` checks this on probes and random queries).
- **Terms** (:data:`MAX_FUNCTION_ARGS`, :data:`MAX_COMPOUND_SELECTS`, :data:`MAX_TERMS`,
  :data:`MAX_JOIN_TABLES`), the **text** (:data:`MAX_SQL_BYTES`) and a literal **LIKE
  pattern** (:data:`MAX_LIKE_PATTERN_BYTES`): counted exactly.

Where the count is not SQLite's: the parser-nesting estimate is an upper bound and its bound
sits below SQLite's stack, so a few deeply nested texts SQLite parsed are refused now (14 or
more nested ``FROM (SELECT ...)``, where SQLite overflowed at 16); a ``COLLATE`` and a row value
``(a, b)`` count one level more than in SQLite; and SQLite's optimizer adds levels this count
does not see (window functions rewritten into subqueries, aggregates' subqueries), at most a
few. Hence the SQLite backend keeps its engine limits as a backstop only, set at or above these
bounds (``_sqliteread.AGENT_LIMITS``; expression depth, function arguments and compound SELECTs
at SQLite's compile-time maxima), so that the engine never refuses what this module admitted:
where this count falls below SQLite's, both backends run the query.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.tokens import TokenType

from ._heights import SOURCES, Heights, Resolution, clause_terms
from ._nesting import parser_nesting

MAX_EXPR_DEPTH = 64
"""Deepest expression an agent's query may hold, counted as SQLite counts ``SQLITE_LIMIT_EXPR_DEPTH`` (see the
module docstring): the limit SQLite enforced for agents before the parser decided it, now the same on PostgreSQL."""
MAX_PARSER_NESTING = 90
"""Most entries the estimate of SQLite's parser stack may reach (see :func:`._nesting.edge_cost`); below
:data:`SQLITE_PARSER_STACK`, leaving room for constructs whose cost was not measured."""
SQLITE_PARSER_STACK = 97
"""The estimate past which SQLite 3.40's parser reports "parser stack overflow" (a fixed stack of 100 entries,
3 of them the statement's own): ``SELECT`` then 93 nested parentheses parse, 94 do not."""
MAX_FUNCTION_ARGS = 16
"""Most arguments of one function call (SQLite's ``SQLITE_LIMIT_FUNCTION_ARG`` for agents)."""
MAX_COMPOUND_SELECTS = 16
"""Most SELECTs joined by UNION, INTERSECT and EXCEPT in one compound (``SQLITE_LIMIT_COMPOUND_SELECT``)."""
MAX_TERMS = 64
"""Most terms written in one result list, GROUP BY, ORDER BY, window's PARTITION BY plus ORDER BY, or VALUES row
(``SQLITE_LIMIT_COLUMN`` for agents). A ``*`` counts as one term here; SQLite counts the columns it expands to."""
MAX_JOIN_TABLES = 64
"""Most tables and subqueries in one FROM clause (SQLite's fixed limit: "at most 64 tables in a join")."""
MAX_SQL_BYTES = 100_000
"""Longest text, in UTF-8 bytes (``SQLITE_LIMIT_SQL_LENGTH`` for agents)."""
MAX_LIKE_PATTERN_BYTES = 1000
"""Longest literal LIKE or GLOB pattern, in UTF-8 bytes (``SQLITE_LIMIT_LIKE_PATTERN_LENGTH`` for agents)."""


_NOT_FUNCTIONS: tuple[type[exp.Expr], ...] = (exp.Case, exp.Cast, exp.Exists, exp.If, exp.Window, exp.Filter)
_OPERAND_ENDS = frozenset({TokenType.NUMBER, TokenType.STRING, TokenType.IDENTIFIER, TokenType.VAR,
                           TokenType.R_PAREN, TokenType.NULL, TokenType.TRUE, TokenType.FALSE,
                           TokenType.PLACEHOLDER, TokenType.END, TokenType.STAR})
"""Tokens after which a ``+`` adds (anything else before it makes it a unary plus, which sqlglot drops)."""


@dataclass(frozen=True)
class Measures:
    """What :func:`measure` counted in one text."""

    depth: int
    """Deepest expression, SQLite's way (:data:`MAX_EXPR_DEPTH`)."""
    parser_nesting: int
    """Estimate of SQLite's parser stack at its fullest (:data:`MAX_PARSER_NESTING`)."""
    function_args: tuple[int, str]
    """(most arguments of one call, the function's name)."""
    compound_selects: int
    """Most SELECTs in one compound."""
    terms: tuple[int, str]
    """(most terms of one list, which list)."""
    join_tables: int
    """Most tables in one FROM clause."""
    like_pattern: int
    """Longest literal LIKE/GLOB pattern, in bytes."""


@dataclass(frozen=True)
class Spelling:
    """What the parse tree loses of a text's spelling that SQLite counts (from sqlglot's tokens)."""

    unary_pluses: int = 0
    """How many unary ``+`` it holds: sqlglot drops them, SQLite makes a node (and a parser entry) of each."""
    not_nulls: int = 0
    """How many ``x IS NOT NULL``/``x NOT NULL``/``x NOTNULL`` it holds: one node in SQLite. sqlglot reads them,
    and ``NOT x IS NULL`` (two nodes), as the same tree."""


def spelling(sql: str) -> Spelling:
    """The :class:`Spelling` of ``sql``, from sqlglot's SQLite tokens."""
    tokens = sqlglot.Dialect.get_or_raise("sqlite").tokenize(sql)
    pluses = not_nulls = 0
    before = None
    for token in tokens:
        kind = token.token_type
        if kind is TokenType.PLUS and (before is None or before.token_type not in _OPERAND_ENDS):
            pluses += 1
        elif kind is TokenType.NOTNULL or (kind is TokenType.NULL and before is not None
                                           and before.token_type is TokenType.NOT):
            not_nulls += 1
        before = token
    return Spelling(pluses, not_nulls)


# -- terms -------------------------------------------------------------------------------------------------
def _arguments(call: exp.Func) -> int:
    count = 0
    for child in call.iter_expressions():
        if isinstance(child, exp.Distinct):
            count += len(child.expressions)
        elif not isinstance(child, exp.Star):
            count += 1
    return count


def _compound(query: exp.SetOperation) -> int:
    """How many SELECTs one compound joins (its parts that are not compounds themselves)."""
    count, stack = 0, list[exp.Expr]([query])
    while stack:
        node = stack.pop()
        if isinstance(node, exp.SetOperation):
            stack += [p for p in (node.this, node.expression) if isinstance(p, exp.Expr)]
        else:
            count += 1
    return count


def _terms_of(node: exp.Expr) -> tuple[int, str]:
    if isinstance(node, exp.Select):
        return len(node.expressions), "its SELECT list"
    if isinstance(node, exp.Group):
        return len(node.expressions), "its GROUP BY"
    if isinstance(node, exp.Order) and not isinstance(node.parent, exp.Window):
        return len(node.expressions), "its ORDER BY"
    if isinstance(node, exp.Window):
        order = node.args.get("order")
        count = len(node.args.get("partition_by") or ()) + len(clause_terms(order))
        return count, "a window's PARTITION BY and ORDER BY"
    if isinstance(node, exp.Tuple) and isinstance(node.parent, exp.Values):
        return len(node.expressions), "a VALUES row"
    return 0, ""


def _utf8(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def measure(tree: exp.Expr, spelt: Spelling = Spelling()) -> Measures:
    """What one parsed statement counts against the bounds. ``spelt``: what its text's tokens say that the tree
    lost: each unary plus is added to the depth and the parser's nesting (as if all were nested), and a ``NOT x IS
    NULL`` makes every NOT over an IS a node of its own (the tree cannot say which one was written so)."""
    not_is = sum(1 for n in tree.walk() if isinstance(n, exp.Not) and isinstance(n.this, exp.Is))
    resolution = Resolution(Heights(tree, not_is_one_node=not_is <= spelt.not_nulls))
    if isinstance(tree, SOURCES):
        resolution.query(tree, 0)
    deepest = resolution.deepest
    args, terms = (0, ""), (0, "")
    compound = tables = pattern = 0
    for node in tree.walk():
        if isinstance(node, exp.Func) and not isinstance(node, _NOT_FUNCTIONS):
            args = max(args, (_arguments(node), _name(node)))
        elif isinstance(node, exp.If) and not isinstance(node.parent, exp.Case):
            args = max(args, (_arguments(node), "iif"))
        if isinstance(node, exp.SetOperation) and not isinstance(node.parent, exp.SetOperation):
            compound = max(compound, _compound(node))
        if isinstance(node, exp.Select):
            tables = max(tables, (1 if node.args.get("from_") or node.args.get("from") else 0)
                         + len(node.args.get("joins") or ()))
        terms = max(terms, _terms_of(node))
        if isinstance(node, (exp.Like, exp.Glob)) and isinstance(node.expression, exp.Literal):
            if node.expression.is_string:
                pattern = max(pattern, _utf8(node.expression.name))
    return Measures(depth=deepest + spelt.unary_pluses, parser_nesting=parser_nesting(tree) + spelt.unary_pluses,
                    function_args=args, compound_selects=compound, terms=terms, join_tables=tables,
                    like_pattern=pattern)


_SQLITE_NAMES = {"greatest": "max", "least": "min"}
"""sqlglot's names of SQLite's variadic functions that differ from SQLite's."""


def _name(node: exp.Func) -> str:
    """The function's name as an agent wrote it in SQLite (sqlglot reads ``max(a, b, c)`` as ``GREATEST``)."""
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    name = node.sql_name().lower()
    return _SQLITE_NAMES.get(name, name)


def _refusal(m: Measures) -> str | None:
    """Why ``m`` passes a bound (the first, in a fixed order); None when it passes none."""
    if m.depth > MAX_EXPR_DEPTH:
        return (f"its expressions nest {m.depth} levels deep (counted as SQLite counts them: each operator, function "
                "call, CASE or comparison adds a level, so a+b+c+... of N terms is N deep, and a subquery adds the "
                f"depth of the expressions around it); at most {MAX_EXPR_DEPTH} are accepted: write x IN (1, 2, 3) "
                "instead of a chain of ORs, sum(...) over rows instead of a long chain of +, or compute parts in a "
                "WITH clause")
    if m.parser_nesting > MAX_PARSER_NESTING:
        return (f"its subqueries, function calls, CASE branches and parentheses nest too deeply for SQL parsers "
                f"({m.parser_nesting} units of parser nesting, at most {MAX_PARSER_NESTING}: a nested SELECT costs "
                "about 6, a function argument 5, a parenthesis 1); flatten it, or move nested SELECTs into a WITH "
                "clause")
    if m.function_args[0] > MAX_FUNCTION_ARGS:
        count, name = m.function_args
        return (f"it passes {count} arguments to {name}(); at most {MAX_FUNCTION_ARGS} are accepted in one call: "
                f"nest the calls, for example {name}(a, {name}(b, c))")
    if m.compound_selects > MAX_COMPOUND_SELECTS:
        return (f"it joins {m.compound_selects} SELECTs with UNION, INTERSECT or EXCEPT; at most "
                f"{MAX_COMPOUND_SELECTS} are accepted: select the rows with one WHERE clause (x IN (...)) instead")
    if m.terms[0] > MAX_TERMS:
        count, where = m.terms
        return f"{where} has {count} terms; at most {MAX_TERMS} are accepted: select fewer columns or terms"
    if m.join_tables > MAX_JOIN_TABLES:
        return (f"one FROM clause joins {m.join_tables} tables; at most {MAX_JOIN_TABLES} are accepted: join fewer "
                "tables, or aggregate in a WITH clause first")
    if m.like_pattern > MAX_LIKE_PATTERN_BYTES:
        return (f"its LIKE or GLOB pattern has {m.like_pattern} bytes; at most {MAX_LIKE_PATTERN_BYTES} are "
                "accepted: match a shorter pattern")
    return None


def text_refusal(sql: str) -> str | None:
    """Why ``sql`` is too long to measure (:data:`MAX_SQL_BYTES`); None when it is not."""
    size = _utf8(sql)
    if size > MAX_SQL_BYTES:
        return (f"it is {size} bytes long; at most {MAX_SQL_BYTES} are accepted: write a shorter query (long lists of "
                "values belong in a WHERE clause on a column)")
    return None


def bounds_refusal(sql: str, trees: list[exp.Expr]) -> str | None:
    """Why the statements ``trees`` parsed from ``sql`` pass one of the bounds of this module; None when none."""
    spelt = spelling(sql)
    for tree in trees:
        why = _refusal(measure(tree, spelt))
        if why is not None:
            return why
    return None
