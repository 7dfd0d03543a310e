"""SQLite's value semantics inside PostgreSQL, for application SQL, checks and agents' queries.

The functions below live in schema ``rehearsal_sql`` of every env database,
which the connection puts on its ``search_path`` before ``pg_catalog``
(:data:`SEARCH_PATH`), so an unqualified ``SUM(x)`` resolves to them:

- ``sum`` of integers is a bigint (PostgreSQL: numeric), so ``SUM(a) / COUNT(*)`` is an
  integer division as on SQLite;
- ``avg`` is a float computed as sum / count in double precision (PostgreSQL: a numeric
  rounded to 16 decimals, which can differ in the last bit);
- ``round`` returns a float, halves away from zero (PostgreSQL: numeric, or banker's
  rounding for double precision).

Statement text is rewritten by :func:`._pgsql.translate` (on sqlglot's tokens, literals
and comments left alone): ``LIKE`` as ``ILIKE`` (SQLite's ``LIKE`` ignores ASCII case; so
does ``ILIKE`` under the C locale), decimal literals as double precision (SQLite's REAL:
``1.0 * a / b`` is then the same IEEE double), ``CAST(... AS REAL)`` as double precision
and ``AS INTEGER`` as bigint (64 bits, as SQLite). :class:`NumericLoader` reads any
remaining numeric as int when integral text, else float.

:func:`sqlite_column_names` names result columns of agents' queries as SQLite does (from
sqlglot's tokens of the statement).

``to_real`` and ``to_integer`` are SQLite's ``CAST(... AS REAL)`` and ``CAST(... AS INTEGER)``
(the longest numeric prefix of a text, +-Infinity or the largest integer beyond the type,
truncation toward zero), so a malformed or 400-digit answer never makes a check fail.

Known remaining differences: ``x / 0`` raises on PostgreSQL (NULL on SQLite); a float
sum can differ in the last bit when rows come in another order.
"""

from __future__ import annotations

import re
from typing import Any

import sqlglot
from psycopg.adapt import Loader
from sqlglot.errors import SqlglotError
from sqlglot.tokens import Token, TokenType

SCHEMA = "rehearsal_sql"
SEARCH_PATH = f"public, {SCHEMA}, pg_catalog"
"""Tables first, then the SQLite-compatible functions, then the built-ins they shadow."""

_AVG_INPUTS = ("smallint", "integer", "bigint", "numeric", "double precision", "real")


def install_sql(check_role: str) -> list[str]:
    """Statements creating schema ``rehearsal_sql`` (usable by ``check_role``)."""
    out = [f"CREATE SCHEMA {SCHEMA}"]
    # sum(smallint) and sum(integer) already give bigint; sum(bigint) gives numeric.
    out.append(f"CREATE AGGREGATE {SCHEMA}.sum(bigint) (SFUNC = pg_catalog.int8pl, STYPE = bigint)")
    for arg in _AVG_INPUTS:
        name = arg.replace(" ", "_")
        out.append(
            f"CREATE FUNCTION {SCHEMA}.avg_step_{name}(double precision[], {arg}) RETURNS double precision[] "
            f"LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE "
            f"AS 'SELECT pg_catalog.float8_accum($1, $2::double precision)'"
        )
        out.append(
            f"CREATE AGGREGATE {SCHEMA}.avg({arg}) (SFUNC = {SCHEMA}.avg_step_{name}, "
            "STYPE = double precision[], FINALFUNC = pg_catalog.float8_avg, INITCOND = '{0,0,0}')"
        )
    for arg in ("double precision", "numeric"):
        out.append(
            f"CREATE FUNCTION {SCHEMA}.round(x {arg}) RETURNS double precision "
            "LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE "
            "AS 'SELECT pg_catalog.round(x::numeric)::double precision'"
        )
        out.append(
            f"CREATE FUNCTION {SCHEMA}.round(x {arg}, digits integer) RETURNS double precision "
            "LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE "
            "AS 'SELECT pg_catalog.round(x::numeric, greatest(digits, 0))::double precision'"
        )
    out.extend(_cast_sql())
    out.append(f"GRANT USAGE ON SCHEMA {SCHEMA} TO {check_role}")
    return out


_REAL_PREFIX = r"^[[:space:]]*([-+]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][-+]?[0-9]+)?)"
_INT_PREFIX = r"^[[:space:]]*([-+]?[0-9]+)"


def _cast_sql() -> list[str]:
    """``to_real`` and ``to_integer``: SQLite's ``CAST(x AS REAL)`` and ``CAST(x AS INTEGER)``.

    Text: the longest numeric prefix (after spaces), 0 when there is none; a real beyond double
    precision is +-Infinity (or 0 below it), an integer beyond 64 bits the largest one of its sign.
    Numbers: a real as double precision; a real to integer truncates toward zero, clamped.
    """
    s = SCHEMA
    return [
        f"""CREATE FUNCTION {s}.real_beyond(p text) RETURNS double precision LANGUAGE sql IMMUTABLE STRICT
PARALLEL SAFE AS $f$
  SELECT (CASE WHEN p LIKE '-%' THEN -1 ELSE 1 END)::double precision * CASE WHEN
    (CASE WHEN ltrim(split_part(m, '.', 1), '0') <> '' THEN length(ltrim(split_part(m, '.', 1), '0'))
          ELSE length(ltrim(split_part(m, '.', 2), '0')) - length(split_part(m, '.', 2)) END) + e > 0
    THEN 'Infinity'::double precision ELSE 0 END
  FROM (SELECT ltrim(regexp_replace(p, '[eE].*$', ''), '-+') AS m,
               CASE WHEN p !~ '[eE][-+]?[0-9]+$' THEN 0
                    WHEN length(substring(p from '[eE][-+]?0*([0-9]*)$')) > 9
                    THEN CASE WHEN p ~ '[eE]-' THEN -1000000000 ELSE 1000000000 END
                    ELSE substring(p from '[eE]([-+]?[0-9]+)$')::bigint END AS e) AS parts
$f$""",
        f"""CREATE FUNCTION {s}.to_real(x text) RETURNS double precision LANGUAGE plpgsql IMMUTABLE STRICT
PARALLEL SAFE AS $f$
DECLARE p text := substring(x from '{_REAL_PREFIX}');
BEGIN
  IF p IS NULL THEN RETURN 0; END IF;
  RETURN p::double precision;
EXCEPTION WHEN numeric_value_out_of_range OR invalid_text_representation THEN
  RETURN {s}.real_beyond(p);
END $f$""",
        f"""CREATE FUNCTION {s}.to_integer(x text) RETURNS bigint LANGUAGE plpgsql IMMUTABLE STRICT
PARALLEL SAFE AS $f$
DECLARE p text := substring(x from '{_INT_PREFIX}');
BEGIN
  IF p IS NULL THEN RETURN 0; END IF;
  RETURN p::bigint;
EXCEPTION WHEN numeric_value_out_of_range THEN
  RETURN CASE WHEN p LIKE '-%' THEN -9223372036854775808 ELSE 9223372036854775807 END;
END $f$""",
        *(f"CREATE FUNCTION {s}.to_real(x {t}) RETURNS double precision LANGUAGE sql IMMUTABLE STRICT "
          "PARALLEL SAFE AS 'SELECT x::double precision'" for t in ("double precision", "bigint", "numeric")),
        *(f"CREATE FUNCTION {s}.to_integer(x {t}) RETURNS bigint LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE "
          "AS 'SELECT CASE WHEN x >= 9223372036854775807 THEN 9223372036854775807 "
          "WHEN x <= -9223372036854775808 THEN -9223372036854775808 ELSE trunc(x)::bigint END'"
          for t in ("double precision", "numeric")),
        f"CREATE FUNCTION {s}.to_integer(x bigint) RETURNS bigint LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE "
        "AS 'SELECT x'",
    ]


class NumericLoader(Loader):
    """``numeric`` as SQLite returns it: int for integral text, float otherwise."""

    def load(self, data: Any) -> int | float:
        text = bytes(data)
        if b"." in text or b"N" in text or b"n" in text:
            return float(text)
        return int(text)


class BoolLoader(Loader):
    """``boolean`` as SQLite's 0/1."""

    def load(self, data: Any) -> int:
        return 1 if bytes(data) == b"t" else 0


_TOKENIZER = sqlglot.Dialect.get_or_raise("postgres")
_LIST_END = {TokenType.FROM, TokenType.WHERE, TokenType.GROUP_BY, TokenType.HAVING, TokenType.ORDER_BY,
             TokenType.LIMIT, TokenType.UNION, TokenType.EXCEPT, TokenType.INTERSECT, TokenType.WINDOW,
             TokenType.SEMICOLON}
_NAME = {TokenType.VAR, TokenType.IDENTIFIER}
_VALUE_END = _NAME | {TokenType.R_PAREN, TokenType.NUMBER, TokenType.STRING, TokenType.END}


def _alias(item: list[Token]) -> str | None:
    """The alias of a select item, as written (SQLite keeps its case), or None."""
    if len(item) >= 2 and item[-2].token_type == TokenType.ALIAS:
        return item[-1].text  # a quoted name's token holds it unquoted
    if len(item) >= 2 and item[-1].token_type in _NAME and item[-2].token_type in _VALUE_END:
        return item[-1].text
    return None


def _column_ref(item: list[Token]) -> bool:
    """``name`` or ``table.name``: PostgreSQL and SQLite both name such a column by its name."""
    kinds = [t.token_type for t in item]
    return kinds in ([TokenType.VAR], [TokenType.IDENTIFIER]) or (
        len(kinds) == 3 and kinds[0] in _NAME and kinds[1] == TokenType.DOT and kinds[2] in _NAME)


def _select_items(sql: str) -> list[list[Token]] | None:
    """The top-level result expressions of a SELECT (sqlglot's tokens); None when not found."""
    try:
        tokens = _TOKENIZER.tokenize(sql)
    except SqlglotError:
        return None
    depth, inside = 0, False
    items: list[list[Token]] = [[]]
    current: list[Token] = items[0]
    for token in tokens:
        kind = token.token_type
        depth += (kind == TokenType.L_PAREN) - (kind == TokenType.R_PAREN)
        if depth == 0 and not inside and kind == TokenType.SELECT:
            inside = True
            continue
        if not inside:
            continue
        if depth == 0 and kind in _LIST_END:
            break
        if depth == 0 and kind == TokenType.COMMA:
            current = []
            items.append(current)
        elif not (not current and kind in (TokenType.DISTINCT, TokenType.ALL)):
            current.append(token)
    return items if inside and all(items) else None


def sqlite_column_names(sql: str, columns: tuple[str, ...]) -> tuple[str, ...]:
    """``columns`` as PostgreSQL named them, renamed as SQLite names them where they differ.

    SQLite names an unaliased expression by its text (``COUNT(*)``), PostgreSQL by its
    function (``count``) or ``?column?``; aliases and plain column references agree.
    Left as they are when the select list cannot be matched (``*``, several statements).
    """
    items = _select_items(sql)
    if items is None or len(items) != len(columns) or any(i[-1].token_type == TokenType.STAR for i in items):
        return columns
    named = []
    for item, column in zip(items, columns, strict=True):
        alias = _alias(item)
        text = sql[item[0].start:item[-1].end + 1]
        named.append(alias if alias is not None else column if _column_ref(item) else text)
    return tuple(named)


def sqlite_integrity_message(exc: Exception) -> str:
    """An integrity violation worded as SQLite words it (agents see the same error on both backends)."""
    diag = getattr(exc, "diag", None)
    state = getattr(exc, "sqlstate", None)
    table = getattr(diag, "table_name", None)
    if state == "23502" and table:
        return f"NOT NULL constraint failed: {table}.{getattr(diag, 'column_name', None) or '?'}"
    if state == "23503":
        return "FOREIGN KEY constraint failed"
    if state == "23505" and table:
        key = re.search(r"Key \((.+?)\)=", getattr(diag, "message_detail", None) or "")
        columns = [c.strip() for c in key.group(1).split(",")] if key else ["?"]
        return f"UNIQUE constraint failed: {', '.join(f'{table}.{c}' for c in columns)}"
    if state == "23514":
        return f"CHECK constraint failed: {getattr(diag, 'constraint_name', None) or '?'}"
    return str(exc).strip().split("\n", 1)[0]
