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
  :func:`_edge_cost` were measured on SQLite 3.40 and are rounded up, so the estimate is never
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

MAX_EXPR_DEPTH = 64
"""Deepest expression an agent's query may hold, counted as SQLite counts ``SQLITE_LIMIT_EXPR_DEPTH`` (see the
module docstring): the limit SQLite enforced for agents before the parser decided it, now the same on PostgreSQL."""
MAX_PARSER_NESTING = 90
"""Most entries the estimate of SQLite's parser stack may reach (see :func:`_edge_cost`); below
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

SELECT_ENTRY = 4
"""Parser-stack entries a SELECT holds for its own keywords (``SELECT distinct selcollist``)."""
_DEFAULT_EDGE = 8
"""Parser-stack entries assumed for a construct whose cost was not measured (more than any measured one but the
window clause's)."""

_QUERIES: tuple[type[exp.Expr], ...] = (exp.Select, exp.SetOperation)
_SOURCES: tuple[type[exp.Expr], ...] = (exp.Select, exp.SetOperation, exp.Values, exp.Subquery)
"""What a FROM clause may read that holds expressions of its own."""
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


# -- SQLite's expression heights ------------------------------------------------------------------------
class _Heights:
    """SQLite's ``nHeight`` of every node of a tree (by ``id``), computed bottom-up without recursion; a query's
    entry is SQLite's ``heightOfSelect`` (its expressions' deepest, not one more)."""

    def __init__(self, root: exp.Expr, not_is_one_node: bool = True) -> None:
        self.not_is_one_node = not_is_one_node
        self.of: dict[int, int] = {}
        for node in reversed(list(root.walk(bfs=False))):
            self.of[id(node)] = self._height(node)

    def h(self, node: exp.Expr | None) -> int:
        return 0 if node is None else self.of.get(id(node), 0)

    def limit(self, query: exp.Expr) -> int:
        """SQLite's ``TK_LIMIT`` node: one more than its limit and offset; 0 without either."""
        parts = _limit_parts(query)
        return 1 + max(self.h(p) for p in parts) if parts else 0

    def _select(self, query: exp.Expr) -> int:
        """SQLite's ``heightOfSelect``: the deepest of the result list, WHERE, HAVING, GROUP BY, ORDER BY, LIMIT."""
        if isinstance(query, exp.SetOperation):
            parts = [self.h(query.this), self.h(query.expression)]
        elif isinstance(query, exp.Select):
            parts = [self.h(e) for e in query.expressions]
            parts += [self.h(query.args.get(k)) for k in ("where", "having", "group")]
        else:  # VALUES: each row is a SELECT list
            parts = [self.h(row) for row in query.expressions]
        return max([*parts, self.h(query.args.get("order")), self.limit(query)])

    def _height(self, node: exp.Expr) -> int:
        h = self.h
        kids = [c for c in node.iter_expressions() if not (isinstance(c, exp.Star) and isinstance(node, exp.Func))]
        deepest = max((h(c) for c in kids), default=0)  # count(*) has no argument in SQLite
        if isinstance(node, (*_QUERIES, exp.Values)):
            return self._select(node)
        if isinstance(node, exp.Tuple):
            return deepest if isinstance(node.parent, exp.Values) else 1 + deepest  # a VALUES row is a SELECT list
        if isinstance(node, (exp.Paren, exp.Alias, exp.Ordered, exp.Distinct, exp.Where, exp.Having, exp.Group,
                             exp.Order)):
            return deepest  # no node of its own in SQLite
        if isinstance(node, exp.Subquery):
            return h(node.this) if isinstance(node.parent, exp.In) else 1 + h(node.this)
        if isinstance(node, exp.Exists):
            return 1 + h(node.this)
        if isinstance(node, exp.Column):
            return 1 + sum(1 for k in ("table", "db", "catalog") if node.args.get(k))  # t.a is a DOT node
        if isinstance(node, (exp.Window, exp.Filter)):
            return h(node.this)  # the window's terms and the FILTER clause are measured on their own
        if isinstance(node, exp.Not) and isinstance(node.this, exp.Is) and self.not_is_one_node:
            return h(node.this)  # IS NOT NULL / NOTNULL: one node in SQLite
        if isinstance(node, exp.If) and isinstance(node.parent, exp.Case):
            return deepest  # a WHEN/THEN pair: two terms of the CASE's list
        if isinstance(node, exp.Escape) and isinstance(node.this, (exp.Like, exp.Glob)):
            return max(h(node.this), 1 + h(node.expression))  # like(pattern, x, escape): one call
        if isinstance(node, (exp.Like, exp.Glob)) and node.args.get("negate"):
            return 2 + deepest  # NOT LIKE: the call under a NOT
        return 1 + deepest


def _limit_parts(query: exp.Expr) -> list[exp.Expr]:
    """The LIMIT and OFFSET values of a query (``LIMIT a, b`` included)."""
    parts: list[exp.Expr] = []
    for key in ("limit", "offset"):
        clause = query.args.get(key)
        if isinstance(clause, (exp.Limit, exp.Offset)):
            parts += [p for p in (clause.args.get("expression"), clause.args.get("offset")) if isinstance(p, exp.Expr)]
        elif isinstance(clause, exp.Expr):
            parts.append(clause)
    return parts


# -- SQLite's resolution: heights added along the nesting of subqueries --------------------------------------
class _Resolution:
    """The largest sum of heights SQLite checks while it resolves names (see the module docstring)."""

    def __init__(self, heights: _Heights) -> None:
        self.h = heights.h
        self.heights = heights
        self.deepest = 0

    def query(self, query: exp.Expr, acc: int, outer_where: int = 0) -> int:
        """Measure ``query`` resolved with ``acc`` already added; returns the largest ``acc`` a SELECT in it is
        resolved with (its WITH clause's tables are resolved where they are read: at worst with that).
        ``outer_where``: the height of the WHERE clause of the query whose FROM clause reads this one (when SQLite
        flattens it into that query, it ANDs the two WHERE clauses: one more level, checked on its own).
        Recursion only per nested query: each needs parentheses, which ``MAX_NESTING`` bounds."""
        if isinstance(query, exp.Subquery):
            return self.query(query.this, acc, outer_where) if isinstance(query.this, exp.Expr) else acc
        widest = acc
        items: list[exp.Expr] = []
        if isinstance(query, exp.SetOperation):
            widest = max(self.query(p, acc, outer_where) for p in (query.this, query.expression)
                         if isinstance(p, exp.Expr))
        elif isinstance(query, exp.Select):
            items = [*query.expressions, *_terms(query.args.get("group"))]
            having = query.args.get("having")
            items += [having.this] if isinstance(having, exp.Having) else []
            where, parts = self._where(query)
            widest = max(widest, self._item(parts, acc + where) if parts else 0)
            if where and outer_where:
                where = 1 + max(where, outer_where)  # flattened: WHERE inner AND outer
                self.deepest = max(self.deepest, where)
            for source in _sources(query):
                widest = max(widest, self.query(source, acc, where or outer_where))
            for window in query.args.get("windows") or ():
                widest = max(widest, self._window(window))
        elif isinstance(query, exp.Values):
            items = [term for row in query.expressions for term in (row.expressions if isinstance(row, exp.Tuple)
                                                                     else [row])]
        items += _terms(query.args.get("order"))
        limits = _limit_parts(query)
        if limits:
            widest = max(widest, self._item(limits, acc + self.heights.limit(query)))
        for item in items:
            widest = max(widest, self._item([item], acc + self.h(item)))
        with_ = query.args.get("with_") or query.args.get("with")
        if isinstance(with_, exp.With):
            for cte in with_.expressions:
                if isinstance(cte.this, exp.Expr):
                    self.query(cte.this, widest)
        return widest

    def _where(self, select: exp.Select) -> tuple[int, list[exp.Expr]]:
        """(height of the WHERE clause once the joins' ON and USING terms are ANDed into it, its parts)."""
        where = select.args.get("where")
        parts: list[exp.Expr] = [where.this] if isinstance(where, exp.Where) else []
        height = self.h(parts[0]) if parts else 0
        for join in select.args.get("joins") or ():
            terms: list[int] = []
            on = join.args.get("on")
            if isinstance(on, exp.Expr):
                parts.append(on)
                terms.append(self.h(on))
            terms += [2] * len(join.args.get("using") or ())  # USING (a): t1.a = t2.a, two columns under an EQ
            for term in terms:
                height = term if height == 0 else 1 + max(height, term)
        return height, parts

    def _window(self, window: exp.Expr) -> int:
        """A window's PARTITION BY and ORDER BY terms: each resolved on its own."""
        widest = 0
        for term in [*(window.args.get("partition_by") or ()), *_terms(window.args.get("order"))]:
            widest = max(widest, self._item([term], self.h(term)))
        return widest

    def _item(self, roots: list[exp.Expr], total: int) -> int:
        """One resolved expression (``roots``: its parts) at ``total``: its subqueries nest on that, a window's terms
        and a FILTER clause are resolved on their own. Returns the largest ``acc`` of a SELECT nested in it."""
        self.deepest = max(self.deepest, total)
        widest = 0
        stack = list(roots)
        while stack:
            node = stack.pop()
            if isinstance(node, (*_QUERIES, exp.Values)):
                widest = max(widest, self.query(node, total))
            elif isinstance(node, exp.Window):
                stack.append(node.this)
                widest = max(widest, self._window(node))
            elif isinstance(node, exp.Filter):
                stack.append(node.this)
                where = node.expression
                if isinstance(where, exp.Where):
                    widest = max(widest, self._item([where.this], self.h(where.this)))
            else:
                stack.extend(node.iter_expressions())
        return widest


def _terms(clause: exp.Expr | None) -> list[exp.Expr]:
    """The terms of a GROUP BY or ORDER BY clause (an ORDER BY term without its DESC/NULLS wrapper)."""
    if clause is None:
        return []
    return [t.this if isinstance(t, exp.Ordered) else t for t in clause.expressions]


def _sources(select: exp.Select) -> list[exp.Expr]:
    """The subqueries of a SELECT's FROM clause and joins."""
    found: list[exp.Expr] = []
    from_ = select.args.get("from_") or select.args.get("from")
    items: list[object] = [from_.this if isinstance(from_, exp.From) else None]
    for item in [*items, *(j.this for j in select.args.get("joins") or ())]:
        if isinstance(item, _SOURCES):
            found.append(item)  # a table (or a table's name) is no expression
    return found


# -- SQLite's parser stack ------------------------------------------------------------------------------------
_SELECT_EDGES = {"expressions": 0, "where": 1, "having": 3, "from_": 1, "from": 1, "joins": 0, "group": 0,
                 "order": 0, "limit": 0, "offset": 0, "with_": 0, "with": 0, "windows": 0, "distinct": 0}
_SET_EDGES = {"this": 0, "expression": 2, "order": 0, "limit": 0, "offset": 0, "with_": 0, "with": 0}


def _edge_cost(parent: exp.Expr, child: exp.Expr) -> int:
    """Entries SQLite's parser holds for ``parent``'s part before ``child`` (measured on SQLite 3.40 by padding a
    leaf with parentheses until the stack overflows, rounded up)."""
    key, later = child.arg_key or "", (child.index or 0) > 0
    if isinstance(child, (exp.Identifier, exp.TableAlias)):
        return 0  # a name: part of its leaf's cost
    if isinstance(parent, exp.Select):
        return _SELECT_EDGES.get(key, _DEFAULT_EDGE)
    if isinstance(parent, exp.SetOperation):
        return _SET_EDGES.get(key, _DEFAULT_EDGE)
    if isinstance(parent, (exp.Paren, exp.Subquery)):
        return 1 if key == "this" else 0
    if isinstance(parent, (exp.Where, exp.Having, exp.Ordered, exp.Alias, exp.Distinct)):
        return 0
    if isinstance(parent, exp.Group):
        return 5 if later else 3
    if isinstance(parent, exp.Order):
        if isinstance(parent.parent, exp.Window):
            return 2 if later else 0
        return 7 if later else 5
    if isinstance(parent, (exp.Limit, exp.Offset)):
        return 7
    if isinstance(parent, exp.From):
        return 0  # FROM itself is the SELECT's edge
    if isinstance(parent, exp.Join):
        return {"this": 1, "on": 5, "using": 5}.get(key, _DEFAULT_EDGE)
    if isinstance(parent, exp.With):
        return 4 if later else 2
    if isinstance(parent, exp.CTE):
        return 0
    if isinstance(parent, exp.Values):
        return 1
    if isinstance(parent, exp.Tuple):
        return 4
    if isinstance(parent, exp.Window):
        return {"this": 0, "partition_by": 12 if later else 10, "order": 13}.get(key, 15)
    if isinstance(parent, exp.Filter):
        return 0 if key == "this" else 8
    if isinstance(parent, exp.Case):
        return {"this": 1, "ifs": 1 if later else 0, "default": 4}.get(key, _DEFAULT_EDGE)
    if isinstance(parent, exp.If) and isinstance(parent.parent, exp.Case):
        return {"this": 3, "true": 5}.get(key, _DEFAULT_EDGE)
    if isinstance(parent, exp.Between):
        return {"this": 0, "low": 2, "high": 4}.get(key, _DEFAULT_EDGE)
    if isinstance(parent, exp.In):
        if key == "expressions":
            return 6 if later else 4
        return {"this": 0, "query": 3}.get(key, 5)
    if isinstance(parent, exp.Exists):
        return 3
    if isinstance(parent, (exp.NullSafeEQ, exp.NullSafeNEQ)):
        return 0 if key == "this" else 5  # IS [NOT] DISTINCT FROM
    if isinstance(parent, exp.Escape):
        return 0 if key == "this" else 4
    if isinstance(parent, exp.Cast):
        return 2 if key == "this" else 4
    if isinstance(parent, exp.DataType):
        return 3
    if isinstance(parent, (exp.Not, exp.Neg, exp.BitwiseNot)):
        return 1
    if isinstance(parent, exp.Binary):
        return 0 if key == "this" else 2
    if isinstance(parent, exp.Func):
        return 5
    return _DEFAULT_EDGE


def _leaf_cost(node: exp.Expr) -> int:
    """Entries a leaf holds beyond its one token (``t.a`` is three tokens)."""
    if isinstance(node, exp.Column):
        return 2 * sum(1 for k in ("table", "db", "catalog") if node.args.get(k))
    if isinstance(node, exp.Table):
        return 4
    return 0


def _parser_nesting(root: exp.Expr) -> int:
    """The fullest SQLite's parser stack gets, estimated from above (see :func:`_edge_cost`), without recursion."""
    fullest = 0
    stack: list[tuple[exp.Expr, int]] = [(root, 0)]
    while stack:
        node, cost = stack.pop()
        if isinstance(node, exp.Select):
            cost += SELECT_ENTRY
        fullest = max(fullest, cost + _leaf_cost(node))
        stack.extend((child, cost + _edge_cost(node, child)) for child in node.iter_expressions())
    return fullest


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
        return len(node.args.get("partition_by") or ()) + len(_terms(order)), "a window's PARTITION BY and ORDER BY"
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
    resolution = _Resolution(_Heights(tree, not_is_one_node=not_is <= spelt.not_nulls))
    if isinstance(tree, _SOURCES):
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
    return Measures(depth=deepest + spelt.unary_pluses, parser_nesting=_parser_nesting(tree) + spelt.unary_pluses,
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
