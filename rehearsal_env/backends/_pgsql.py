"""What PostgreSQL needs so that application SQL and checks behave as on SQLite.

- :func:`translate`: read with sqlglot's PostgreSQL tokenizer (string literals of every
  kind, ``E'...'`` and ``$$...$$`` included, quoted names and comments are known as
  such), then ``?`` placeholders become psycopg's ``%s`` (a ``%`` anywhere ``%%``), and
  SQLite's semantics are written in: ``LIKE`` as ``ILIKE`` (SQLite's ``LIKE`` ignores
  ASCII case), decimal literals as double precision, ``CAST(x AS REAL)`` (or DOUBLE
  PRECISION, FLOAT) as ``rehearsal_sql.to_real(x)`` and ``CAST(x AS INTEGER)`` (INT, BIGINT)
  as ``rehearsal_sql.to_integer(x)``, SQLite's casts (see :mod:`._pgcompat`): a text that
  is no number, or one beyond the type, never makes a statement fail. Comments are dropped.
  Application SQL that reads the server clock is refused (:func:`._pgguard.clock_refusal`):
  the world's clock is ``world.now``, which tools write and checks pass explicitly.
- :func:`connect`: a connection whose values read back as SQLite's do
  (``numeric`` as int or float, ``boolean`` as 0/1, SQLite's ``sum``/``avg``/``round``
  first on the search path; see :mod:`._pgcompat`).
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import psycopg
import sqlglot
from sqlglot.errors import SqlglotError
from sqlglot.tokens import Token, TokenType

from ._pgcompat import SCHEMA, SEARCH_PATH, BoolLoader, NumericLoader
from ._pgguard import clock_refusal, server_text

_TOKENIZER = sqlglot.Dialect.get_or_raise("postgres")
_QUOTED = {TokenType.STRING, TokenType.NATIONAL_STRING, TokenType.BYTE_STRING, TokenType.HEX_STRING,
           TokenType.BIT_STRING, TokenType.RAW_STRING, TokenType.HEREDOC_STRING, TokenType.UNICODE_STRING,
           TokenType.IDENTIFIER}
_NAMES = {TokenType.VAR, TokenType.IDENTIFIER, TokenType.R_PAREN, TokenType.NUMBER}
_CASTS = {"REAL": "to_real", "DOUBLE PRECISION": "to_real", "DOUBLE": "to_real", "FLOAT": "to_real",
          "FLOAT8": "to_real", "INT": "to_integer", "INTEGER": "to_integer", "BIGINT": "to_integer"}
"""SQLite's CAST targets and the :mod:`._pgcompat` function with SQLite's semantics for each."""


class SqlNotAllowed(ValueError):
    """The application's SQL reads the server's clock, or cannot be read."""


class Translated(NamedTuple):
    """A statement ready for PostgreSQL, and how it can move id counters."""

    text: str
    """The statement with ``%s`` placeholders and SQLite's semantics written in (module docstring)."""
    moves_ids: bool
    """A DELETE, or an INSERT that sets the key itself: after it commits, SQLite's
    "next id = max(id) + 1" and a sequence can part, so sequences are re-synced."""
    inserts: bool
    """An INSERT: if its transaction rolls back, the sequence has still advanced."""
    writes: bool
    """An INSERT, UPDATE or DELETE: inside a transaction it runs under a savepoint, so that a
    failing statement is undone alone and the transaction goes on, as on SQLite."""


def _raw(sql: str, token: Token) -> str:
    return sql[token.start:token.end + 1].replace("%", "%%")


def _rewritten(sql: str, tokens: list[Token], i: int) -> str:
    """Token ``i`` as PostgreSQL text with SQLite's semantics (see the module docstring)."""
    token = tokens[i]
    kind = token.token_type
    if kind in _QUOTED:
        return _raw(sql, token)
    if kind == TokenType.PLACEHOLDER and token.text == "?":
        return "%s"
    if kind == TokenType.LIKE:
        return "ILIKE"
    if kind == TokenType.NUMBER and any(c in token.text for c in ".eE") and not token.text.startswith(("0x", "0X")):
        return f"CAST({token.text} AS double precision)"
    return _raw(sql, token)


def _sqlite_casts(tokens: list[Token]) -> tuple[dict[int, str], set[int]]:
    """``CAST(x AS REAL)`` and friends as ``rehearsal_sql.to_real(x)``: (token index -> function, indexes
    of the ``AS type`` tokens to leave out)."""
    functions: dict[int, str] = {}
    dropped: set[int] = set()
    for i, token in enumerate(tokens[:-1]):
        if token.text.upper() != "CAST" or tokens[i + 1].token_type != TokenType.L_PAREN:
            continue
        depth, alias = 0, None
        for j in range(i + 1, len(tokens)):
            kind = tokens[j].token_type
            depth += (kind == TokenType.L_PAREN) - (kind == TokenType.R_PAREN)
            if depth == 1 and kind == TokenType.ALIAS:
                alias = j
            if depth == 0:
                target = " ".join(t.text.upper() for t in tokens[alias + 1:j]) if alias else ""
                if alias and target in _CASTS:
                    functions[i] = f"{SCHEMA}.{_CASTS[target]}"
                    dropped.update(range(alias, j))
                break
    return functions, dropped


def _decimal_dot(tokens: list[Token], i: int) -> bool:
    """``.5``: a dot glued to the number after it, not after a name (``t.5`` is not SQL anyway)."""
    token, nxt = tokens[i], tokens[i + 1] if i + 1 < len(tokens) else None
    previous = tokens[i - 1] if i else None
    return (token.token_type == TokenType.DOT and nxt is not None and nxt.token_type == TokenType.NUMBER
            and nxt.start == token.end + 1 and "." not in nxt.text
            and (previous is None or previous.token_type not in _NAMES or previous.end + 1 < token.start))


@functools.lru_cache(maxsize=4096)
def translate(sql: str, keys: frozenset[str] = frozenset()) -> Translated:
    """``sql`` for PostgreSQL (see :class:`Translated`); ``keys``: the tables' primary-key names.

    Raises:
        SqlNotAllowed: the statement cannot be tokenized, or it reads the server's clock.
    """
    try:
        tokens = list(_TOKENIZER.tokenize(sql))
    except SqlglotError as exc:
        raise SqlNotAllowed(f"it cannot be read as SQL ({exc}): {sql!r}") from exc
    out: list[str] = []
    casts, dropped = _sqlite_casts(tokens)
    end = -1
    i = 0
    while i < len(tokens):
        token = tokens[i]
        gap = sql[end + 1:token.start]
        out.append(gap.replace("%", "%%") if not gap or gap.isspace() else " ")
        if i in dropped:
            end, i = token.end, i + 1
            continue
        if i in casts:
            out.append(casts[i])
            end, i = token.end, i + 1
            continue
        if _decimal_dot(tokens, i):
            number = tokens[i + 1]
            out.append(f"CAST(.{number.text} AS double precision)")
            end, i = number.end, i + 2
            continue
        out.append(_rewritten(sql, tokens, i))
        end, i = token.end, i + 1
    text = "".join(out)
    why = clock_refusal(server_text(text))
    if why is not None:
        raise SqlNotAllowed(f"{why}: {sql!r}")
    kinds = [t.token_type for t in tokens]
    moves_ids = TokenType.DELETE in kinds
    if kinds[:2] == [TokenType.INSERT, TokenType.INTO]:
        cols: set[str] | None = None
        if len(tokens) > 3 and kinds[3] == TokenType.L_PAREN:
            close = kinds.index(TokenType.R_PAREN, 3) if TokenType.R_PAREN in kinds[3:] else len(kinds)
            cols = {t.text.lower() for t in tokens[4:close] if t.token_type != TokenType.COMMA}
        moves_ids = moves_ids or cols is None or bool(keys & cols)
    inserts = TokenType.INSERT in kinds
    writes = bool({TokenType.INSERT, TokenType.UPDATE, TokenType.DELETE} & set(kinds))
    return Translated(text, moves_ids, inserts, writes)


def connect(dsn: str, *, application_name: str = "rehearsal-env",
            reader: bool = False) -> psycopg.Connection[tuple[Any, ...]]:
    """An autocommit connection with SQLite-like value types and sandbox session settings.

    ``reader``: the env's reader (:mod:`._pgsandbox`), which keeps its role's timeouts.
    """
    conn = psycopg.connect(dsn, autocommit=True, application_name=application_name)
    conn.adapters.register_loader("numeric", NumericLoader)
    conn.adapters.register_loader("bool", BoolLoader)
    settings = f"SET TimeZone = 'UTC'; SET search_path = {SEARCH_PATH}; SET lock_timeout = '10s'"
    if not reader:
        settings += "; SET synchronous_commit = off; SET idle_in_transaction_session_timeout = '10min'"
    conn.execute(settings)
    return conn


def plain(params: Any) -> tuple[Any, ...]:
    """Parameters as SQLite would store them (bool as 0/1)."""
    return tuple(int(p) if p.__class__ is bool else p for p in params)
