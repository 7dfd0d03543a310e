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

Statement text gets :data:`REWRITES` (outside literals and comments): ``LIKE`` as
``ILIKE`` (SQLite's ``LIKE`` ignores ASCII case; so does ``ILIKE`` under the C locale),
decimal literals as double precision (SQLite's REAL: ``1.0 * a / b`` is then the same
IEEE double), ``CAST(... AS REAL)`` as double precision and ``AS INTEGER`` as bigint
(64 bits, as SQLite). :class:`NumericLoader` reads any remaining numeric as int when
integral text, else float.

Known remaining differences: ``x / 0`` raises on PostgreSQL (NULL on SQLite);
``CAST(2.7 AS INTEGER)`` rounds on PostgreSQL (2 on SQLite); a float sum can differ
in the last bit when rows come in another order.
"""

from __future__ import annotations

import re
from typing import Any

from psycopg.adapt import Loader

SCHEMA = "rehearsal_sql"
SEARCH_PATH = f"public, {SCHEMA}, pg_catalog"
"""Tables first, then the SQLite-compatible functions, then the built-ins they shadow."""

REWRITES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(?<![\w.])LIKE\b", re.IGNORECASE), "ILIKE"),
    (re.compile(r"(?<![\w.$])(\d+\.\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)(?![\w.])"),
     r"CAST(\1 AS double precision)"),
    (re.compile(r"\bAS\s+REAL\b", re.IGNORECASE), "AS double precision"),
    (re.compile(r"\bAS\s+INT(?:EGER)?\b", re.IGNORECASE), "AS bigint"),
)
"""(pattern, replacement) applied to the code of every statement, in order."""

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
    out.append(f"GRANT USAGE ON SCHEMA {SCHEMA} TO {check_role}")
    return out


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
