"""An estimate of SQLite's LALR parser stack at its fullest, never below SQLite's own count: the parser-nesting
bound of :mod:`._bounds` (the costs were measured on SQLite 3.40; see there)."""

from __future__ import annotations

from sqlglot import exp

SELECT_ENTRY = 4
"""Parser-stack entries a SELECT holds for its own keywords (``SELECT distinct selcollist``)."""
DEFAULT_EDGE = 8
"""Parser-stack entries assumed for a construct whose cost was not measured (more than any measured one but the
window clause's)."""


_SELECT_EDGES = {"expressions": 0, "where": 1, "having": 3, "from_": 1, "from": 1, "joins": 0, "group": 0,
                 "order": 0, "limit": 0, "offset": 0, "with_": 0, "with": 0, "windows": 0, "distinct": 0}
_SET_EDGES = {"this": 0, "expression": 2, "order": 0, "limit": 0, "offset": 0, "with_": 0, "with": 0}


def edge_cost(parent: exp.Expr, child: exp.Expr) -> int:
    """Entries SQLite's parser holds for ``parent``'s part before ``child`` (measured on SQLite 3.40 by padding a
    leaf with parentheses until the stack overflows, rounded up)."""
    key, later = child.arg_key or "", (child.index or 0) > 0
    if isinstance(child, (exp.Identifier, exp.TableAlias)):
        return 0  # a name: part of its leaf's cost
    if isinstance(parent, exp.Select):
        return _SELECT_EDGES.get(key, DEFAULT_EDGE)
    if isinstance(parent, exp.SetOperation):
        return _SET_EDGES.get(key, DEFAULT_EDGE)
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
        return {"this": 1, "on": 5, "using": 5}.get(key, DEFAULT_EDGE)
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
        return {"this": 1, "ifs": 1 if later else 0, "default": 4}.get(key, DEFAULT_EDGE)
    if isinstance(parent, exp.If) and isinstance(parent.parent, exp.Case):
        return {"this": 3, "true": 5}.get(key, DEFAULT_EDGE)
    if isinstance(parent, exp.Between):
        return {"this": 0, "low": 2, "high": 4}.get(key, DEFAULT_EDGE)
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
    return DEFAULT_EDGE


def _leaf_cost(node: exp.Expr) -> int:
    """Entries a leaf holds beyond its one token (``t.a`` is three tokens)."""
    if isinstance(node, exp.Column):
        return 2 * sum(1 for k in ("table", "db", "catalog") if node.args.get(k))
    if isinstance(node, exp.Table):
        return 4
    return 0


def parser_nesting(root: exp.Expr) -> int:
    """The fullest SQLite's parser stack gets, estimated from above (see :func:`edge_cost`), without recursion."""
    fullest = 0
    stack: list[tuple[exp.Expr, int]] = [(root, 0)]
    while stack:
        node, cost = stack.pop()
        if isinstance(node, exp.Select):
            cost += SELECT_ENTRY
        fullest = max(fullest, cost + _leaf_cost(node))
        stack.extend((child, cost + edge_cost(node, child)) for child in node.iter_expressions())
    return fullest
