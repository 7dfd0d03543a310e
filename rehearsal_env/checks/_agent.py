"""What an agent's SQL may call and read: an allow-list, not a deny-list.

An agent's query (``run_sql``) must be a statement :func:`parse_statement` accepts
(one read-only SELECT, no clock), read only the world's tables (and its own
``WITH`` names, no schema-qualified names, no table-valued functions), and call
only the functions of :data:`AGENT_FUNCTIONS`: aggregates, window functions,
arithmetic, text and date functions that are deterministic and cannot grow a value
without bound. Everything else is refused before it reaches a database, with a
message naming what was refused.

First of all, on both backends, the text must pass the bounds of :mod:`._bounds`
(:func:`agent_bounds_refusal`: expression depth, parser nesting, terms, length), decided
on sqlglot's SQLite reading of it, so that one action gets one answer whatever the backend.

The PostgreSQL backend reads the exact text its server receives with PostgreSQL's
own parser (pglast) and applies :data:`AGENT_FUNCTIONS` ``["postgres"]`` (function
names as PostgreSQL resolves them); the SQLite backend applies ``["sqlite"]``
(function names as sqlglot reads them) here.
"""

from __future__ import annotations

from collections.abc import Collection

from ._bounds import text_refusal
from ._statement import SqlDialect, parse_statement

_COMMON = frozenset({
    # aggregates
    "count", "sum", "avg", "min", "max",
    # window functions
    "row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile", "lag", "lead",
    "first_value", "last_value", "nth_value",
    # numbers
    "abs", "round", "ceil", "ceiling", "floor", "sqrt", "power", "sign", "ln", "log", "exp", "mod",
    # text
    "length", "lower", "upper", "trim", "ltrim", "rtrim", "replace",
    # conditionals
    "coalesce", "nullif", "greatest", "least",
})

AGENT_FUNCTIONS: dict[SqlDialect, frozenset[str]] = {
    "sqlite": _COMMON | {
        # sqlglot's names for SQLite's CASE/IIF, CAST, EXISTS, AND/OR, substr, instr, strftime, ...
        "and", "or", "case", "if", "cast", "exists", "substring", "str_position", "group_concat", "total",
        "typeof", "unicode", "chr", "date", "time", "datetime", "julianday", "unixepoch", "time_to_str",
        "ts_or_ds_to_timestamp", "ts_or_ds_to_date", "ifnull",
    },
    "postgres": _COMMON | {
        # PostgreSQL's names (pglast, pg_catalog left out): TRIM is btrim, SUBSTRING substring, ...
        "btrim", "substr", "substring", "strpos", "position", "split_part", "left", "right", "concat",
        "concat_ws", "initcap", "char_length", "character_length", "starts_with", "string_agg", "bool_and",
        "bool_or", "every", "stddev", "stddev_pop", "stddev_samp", "variance", "var_pop", "var_samp",
        "percentile_cont", "percentile_disc", "mode", "trunc", "div", "date_trunc", "date_part",
        "extract", "to_char", "to_date", "to_number", "make_date", "isfinite",
    },
}
"""Functions an agent's SQL may call, per dialect (see the module docstring)."""


def agent_bounds_refusal(sql: str) -> str | None:
    """Why an agent's ``sql`` passes one of the bounds of :mod:`._bounds` (the same answer whatever backend runs it
    next: read on the SQLite text, the agent's dialect on both); None when it passes none. A text our parser cannot
    read as SQLite SQL is refused too, with the parser's message: a text that cannot be measured reaches no engine.
    The parse is :func:`parse_statement`'s, shared with the rest of the agent's rules and cached by text.
    """
    return text_refusal(sql) or parse_statement(sql, "sqlite").bounds


def agent_sql_refusal(sql: str, dialect: SqlDialect, tables: Collection[str]) -> str | None:
    """Why an agent's ``sql`` may not run on ``dialect`` reading ``tables``; None when it may.

    The bounds of :func:`agent_bounds_refusal` come first, the same for both dialects; then only the statement's
    shape and clock are read here for PostgreSQL (its backend applies the function and table rules with
    PostgreSQL's own parser).
    """
    bounds = agent_bounds_refusal(sql)
    if bounds is not None:
        return bounds
    statement = parse_statement(sql, dialect)
    if statement.refusal is not None:
        return statement.refusal
    if dialect == "postgres":
        return None
    allowed = AGENT_FUNCTIONS[dialect]
    refused = sorted(statement.functions - allowed)
    if refused:
        return (f"it calls {', '.join(f + '()' for f in refused)}, which an agent's query may not call; the "
                f"functions allowed are {', '.join(sorted(allowed))}")
    return table_refusal(statement.tables, statement.qualified, tables)


def table_refusal(read: Collection[str], qualified: bool, tables: Collection[str]) -> str | None:
    """Why reading ``read`` (table names, ``""`` for a table function) is refused; None when allowed."""
    if "" in read:
        return "it reads from a function; an agent's query reads only the world's tables"
    if qualified:
        return "it names a schema or database; write the world's table names alone (see list_tables)"
    known = {t.lower() for t in tables}
    unknown = sorted(set(read) - known)
    if unknown:
        return (f"it reads {', '.join(unknown)}, which is not one of the world's tables "
                f"({', '.join(sorted(known))})")
    return None
