"""SQLite's expression heights (``Expr.nHeight``), and the heights its name resolution adds along the nesting of
subqueries: the expression-depth bound of :mod:`._bounds`, counted as SQLite counts it (see there)."""

from __future__ import annotations

from sqlglot import exp

QUERIES: tuple[type[exp.Expr], ...] = (exp.Select, exp.SetOperation)
"""A query: a SELECT or a compound of them."""
SOURCES: tuple[type[exp.Expr], ...] = (exp.Select, exp.SetOperation, exp.Values, exp.Subquery)
"""What a FROM clause may read that holds expressions of its own."""


class Heights:
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
        if isinstance(node, (*QUERIES, exp.Values)):
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
class Resolution:
    """The largest sum of heights SQLite checks while it resolves names (see the module docstring)."""

    def __init__(self, heights: Heights) -> None:
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
            items = [*query.expressions, *clause_terms(query.args.get("group"))]
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
        items += clause_terms(query.args.get("order"))
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
        for term in [*(window.args.get("partition_by") or ()), *clause_terms(window.args.get("order"))]:
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
            if isinstance(node, (*QUERIES, exp.Values)):
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


def clause_terms(clause: exp.Expr | None) -> list[exp.Expr]:
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
        if isinstance(item, SOURCES):
            found.append(item)  # a table (or a table's name) is no expression
    return found
