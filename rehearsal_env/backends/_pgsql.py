"""What PostgreSQL needs so that application SQL and checks behave as on SQLite.

- :func:`translate`: ``?`` placeholders (via :func:`._dialect.placeholders`), the
  rewrites of :data:`._pgcompat.REWRITES` (``LIKE`` as ``ILIKE``, decimal literals as
  double precision, ...), and the server clock refused: the world's clock is
  ``world.now``, which tools write and checks pass explicitly.
- :func:`connect`: a connection whose values read back as SQLite's do
  (``numeric`` as int or float, ``boolean`` as 0/1, SQLite's ``sum``/``avg``/``round``
  first on the search path; see :mod:`._pgcompat`).
"""

from __future__ import annotations

import functools
import re
from typing import Any, NamedTuple

import psycopg

from ..checks._check import CLOCK_LITERAL, SERVER_CLOCK
from ._dialect import placeholders
from ._pgcompat import REWRITES, SEARCH_PATH, BoolLoader, NumericLoader

_LITERALS_AND_COMMENTS = re.compile(
    r"""('(?:[^']|'')*'|"(?:[^"]|"")*"|--[^\n]*|/\*.*?\*/)""", re.DOTALL
)
_DELETE = re.compile(r"\bdelete\b", re.IGNORECASE)
_INSERT = re.compile(r"\binsert\b", re.IGNORECASE)
_WRITE = re.compile(r"\b(insert|update|delete)\b", re.IGNORECASE)
_INSERT_COLUMNS = re.compile(r"^\s*insert\s+into\s+\w+\s*(\((?P<cols>[^)]*)\))?", re.IGNORECASE)


_SESSION_FUNCTIONS = re.compile(
    r"\b(set_config|pg_advisory\w*|pg_try_advisory\w*|pg_terminate_backend|pg_cancel_backend|pg_notify|"
    r"pg_reload_conf|pg_read_\w+|pg_ls_\w+|pg_stat_file|lo_\w+|dblink\w*)\s*\(",
    re.IGNORECASE,
)


class SqlNotAllowed(ValueError):
    """The SQL reads the server's clock, or (in a check) calls a function with session side effects."""


def guard_check(sql: str) -> None:
    """Refuse a check that calls a function able to change the session or signal the server.

    ``set_config('role', ...)`` would otherwise switch back to the connection's own
    user; the others take locks, signal backends or read server files.

    Raises:
        SqlNotAllowed: naming the function.
    """
    code = " ".join(_LITERALS_AND_COMMENTS.split(sql)[0::2])
    found = _SESSION_FUNCTIONS.search(code)
    if found:
        raise SqlNotAllowed(
            f"the check calls {found.group(1)}(), which changes the session or acts on the server: {sql!r}. "
            "A check may only read the world's tables"
        )


class Translated(NamedTuple):
    """A statement ready for PostgreSQL, and how it can move id counters."""

    text: str
    """The statement with ``%s`` placeholders and :data:`._pgcompat.REWRITES` applied."""
    moves_ids: bool
    """A DELETE, or an INSERT that sets the key itself: after it commits, SQLite's
    "next id = max(id) + 1" and a sequence can part, so sequences are re-synced."""
    inserts: bool
    """An INSERT: if its transaction rolls back, the sequence has still advanced."""
    writes: bool
    """An INSERT, UPDATE or DELETE: inside a transaction it runs under a savepoint, so that a
    failing statement is undone alone and the transaction goes on, as on SQLite."""


@functools.lru_cache(maxsize=4096)
def translate(sql: str, keys: frozenset[str] = frozenset()) -> Translated:
    """``sql`` for PostgreSQL (see :class:`Translated`); ``keys``: the tables' primary-key names.

    Raises:
        SqlNotAllowed: the statement reads the server's clock.
    """
    parts = _LITERALS_AND_COMMENTS.split(sql)
    code = " ".join(parts[0::2])
    clock = SERVER_CLOCK.search(code) or CLOCK_LITERAL.search(sql)
    if clock:
        raise SqlNotAllowed(
            f"the SQL reads the database server's clock ({clock.group(0).strip()!r}): {sql!r}. "
            "The world's clock is frozen: write ctx.now / world.now as a parameter instead"
        )
    for i in range(0, len(parts), 2):
        for pattern, replacement in REWRITES:
            parts[i] = pattern.sub(replacement, parts[i])
    moves_ids = bool(_DELETE.search(code))
    insert = _INSERT_COLUMNS.match(code)
    if insert:
        cols = insert.group("cols")
        moves_ids = moves_ids or cols is None or bool(keys & {c.strip().lower() for c in cols.split(",")})
    inserts = bool(_INSERT.search(code))
    writes = bool(_WRITE.search(code))
    return Translated(placeholders("".join(parts), "postgres"), moves_ids, inserts, writes)


def connect(dsn: str, *, application_name: str = "rehearsal-env") -> psycopg.Connection[tuple[Any, ...]]:
    """An autocommit connection with SQLite-like value types and sandbox session settings."""
    conn = psycopg.connect(dsn, autocommit=True, application_name=application_name)
    conn.adapters.register_loader("numeric", NumericLoader)
    conn.adapters.register_loader("bool", BoolLoader)
    conn.execute(
        f"SET synchronous_commit = off; SET TimeZone = 'UTC'; SET search_path = {SEARCH_PATH}; "
        "SET lock_timeout = '10s'; SET idle_in_transaction_session_timeout = '10min'"
    )
    return conn


def plain(params: Any) -> tuple[Any, ...]:
    """Parameters as SQLite would store them (bool as 0/1)."""
    return tuple(int(p) if p.__class__ is bool else p for p in params)
