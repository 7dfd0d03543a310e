"""Reading on SQLite within bounds: checks and agents' queries, read-only, limited in time and memory.

:func:`reading` wraps one read-only statement on an env's connection:

- an authorizer that denies every action but reading (a check: the connection's :class:`Guard`
  switched to that rule; an agent's query: ``PRAGMA query_only`` too); for an
  agent's query the authorizer also allows only the world's tables and the functions of
  :data:`ENGINE_FUNCTIONS` (SQLite's own names, checked when the statement is prepared,
  whatever spelling reached it);
- :class:`ReadLimits` through ``Connection.setlimit`` (longest value, SQL text, columns,
  expression depth, compound SELECTs, function arguments, LIKE pattern, parameters), so
  that no single value or step can grow without bound;
- a deadline checked by the progress handler every :data:`PROGRESS_STEPS` virtual-machine
  steps (with values capped at ``length`` bytes, a step is short);
- memory bounded per connection, never process-wide: SQLite's size limits bound every value
  (``length``) and row (``columns`` values), and the statement's sorters and temporary tables
  (DISTINCT, UNION, GROUP BY, window partitions, recursive queues) keep at most ``cache_bytes`` in
  memory and spill the rest to temporary files (``PRAGMA temp_store = FILE``, set by the backend
  when it opens the connection, and ``PRAGMA cache_size`` for the statement). No statement on one
  connection can make an allocation on another fail (an earlier design capped SQLite's heap with
  ``sqlite3_hard_heap_limit64``, which is process-wide: a hostile query made other sessions' resets
  fail with MemoryError);
- for agents, SQLite's date functions replaced by frozen ones that refuse ``'now'``
  however it was computed (``date('no' || 'w')``) and a missing time value
  (``date()`` is today): :func:`frozen_date_functions`.

The caller caps the rows and bytes it fetches (:func:`fetch_capped`).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ..checks import MAX_LIKE_PATTERN_BYTES, MAX_SQL_BYTES, MAX_TERMS
from ._database import ApplicationError, Row

PROGRESS_STEPS = 1000
"""Virtual-machine steps between two looks at the deadline."""


@dataclass(frozen=True)
class ReadLimits:
    """What one read-only statement may use on SQLite."""

    length: int
    """Longest string or blob, in bytes (``SQLITE_LIMIT_LENGTH``)."""
    sql_length: int
    """Longest statement text, in bytes (``SQLITE_LIMIT_SQL_LENGTH``)."""
    columns: int
    """Most result columns and terms of a list (``SQLITE_LIMIT_COLUMN``)."""
    expr_depth: int
    """Deepest expression tree (``SQLITE_LIMIT_EXPR_DEPTH``)."""
    compound_select: int
    """Most SELECTs joined by UNION and friends (``SQLITE_LIMIT_COMPOUND_SELECT``)."""
    function_args: int
    """Most arguments of one function call (``SQLITE_LIMIT_FUNCTION_ARG``)."""
    like_pattern: int
    """Longest LIKE or GLOB pattern (``SQLITE_LIMIT_LIKE_PATTERN_LENGTH``)."""
    variables: int
    """Most ``?`` parameters (``SQLITE_LIMIT_VARIABLE_NUMBER``)."""
    cache_bytes: int
    """Memory the statement's sorters and temporary tables may hold before they spill to temporary files
    (``PRAGMA cache_size``, this connection only)."""
    result_bytes: int
    """Most bytes of values the caller fetches (strings and blobs by length, numbers as 8)."""


SQLITE_MAX_EXPR_DEPTH = 1000
"""SQLite's compile-time maximum (and default) expression depth; ``setlimit`` cannot raise a limit past it."""
SQLITE_MAX_FUNCTION_ARG = 127
"""SQLite's compile-time maximum (and default) number of arguments of one call."""
SQLITE_MAX_COMPOUND_SELECT = 500
"""SQLite's compile-time maximum (and default) number of SELECTs in one compound."""

AGENT_LIMITS = ReadLimits(length=1_000_000, sql_length=MAX_SQL_BYTES, columns=MAX_TERMS,
                          expr_depth=SQLITE_MAX_EXPR_DEPTH, compound_select=SQLITE_MAX_COMPOUND_SELECT,
                          function_args=SQLITE_MAX_FUNCTION_ARG, like_pattern=MAX_LIKE_PATTERN_BYTES, variables=32,
                          cache_bytes=2 << 20, result_bytes=4_000_000)
"""An agent's query (``run_sql``): generous for analysis, far from exhausting the machine.

The bounds an agent's SQL text can show (expression depth, parser nesting, function arguments, compound SELECTs,
terms, length, a literal LIKE pattern) are decided before the engine by our parser, the same on both backends
(:func:`~rehearsal_env.checks.agent_bounds_refusal`, issue 32). Here SQLite's own limits are only a backstop, at
or above those bounds, so that SQLite never refuses what the parser admitted and PostgreSQL runs: expression
depth, function arguments and compound SELECTs at SQLite's compile-time maxima (the parser's bounds, 64, 16 and
16, are SQLite's former values, counted SQLite's way); the text's length and the terms of a list equal to the
parser's bounds (counted exactly; ``columns`` also bounds a row: 64 values of at most ``length`` bytes). What only
the engine can see stays an engine limit: a ``*`` that expands past ``columns`` columns, a LIKE pattern computed
longer than ``like_pattern``, a value longer than ``length``.
"""

_LIMIT_IDS: dict[str, int] = {
    "length": sqlite3.SQLITE_LIMIT_LENGTH, "sql_length": sqlite3.SQLITE_LIMIT_SQL_LENGTH,
    "columns": sqlite3.SQLITE_LIMIT_COLUMN, "expr_depth": sqlite3.SQLITE_LIMIT_EXPR_DEPTH,
    "compound_select": sqlite3.SQLITE_LIMIT_COMPOUND_SELECT, "function_args": sqlite3.SQLITE_LIMIT_FUNCTION_ARG,
    "like_pattern": sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH, "variables": sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER,
}

ENGINE_FUNCTIONS = frozenset({
    "count", "sum", "avg", "min", "max", "total", "group_concat", "string_agg",
    "row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile", "lag", "lead", "first_value",
    "last_value", "nth_value",
    "abs", "round", "ceil", "ceiling", "floor", "sqrt", "pow", "power", "sign", "ln", "log", "log10", "log2",
    "exp", "mod", "trunc",
    "length", "lower", "upper", "trim", "ltrim", "rtrim", "replace", "substr", "substring", "instr", "like",
    "glob", "char", "unicode", "coalesce", "ifnull", "iif", "nullif", "typeof",
    "date", "time", "datetime", "julianday", "unixepoch", "strftime", "timediff",
})
"""SQLite's functions (its own names, as its authorizer reports them) an agent's query may call."""

_READ_ACTIONS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION,
                 getattr(sqlite3, "SQLITE_RECURSIVE", 33)}  # WITH clauses report SQLITE_RECURSIVE


def authorize_read_only(action: int, *_: Any) -> int:
    """The authorizer of checks: reading only."""
    return sqlite3.SQLITE_OK if action in _READ_ACTIONS else sqlite3.SQLITE_DENY


class Guard:
    """A connection's one authorizer, whose rule is switched in place instead of replaced.

    SQLite expires every prepared statement of a connection whenever its authorizer is set or a flag pragma
    (``query_only``) changes, so a check run between a tool's statements (the goal checks a shaped reward profile
    runs after every write, and at every reset) made each of them compile again at its next use: under
    ``rl_turns`` the tools' reads took 1.8x as long as under ``rl``. With a guard installed once per connection, a
    check switches :attr:`rule`, and nothing expires. Statements are authorized when they are prepared, so a
    check's text runs with a mark appended (``sqlite.CHECK_MARK``): its statement is always one prepared under the
    check's rule, never the application's statement of the same text from the cache. On a shared snapshot's
    reader ``query_only`` is on for good (the connection is ``mode=ro`` too); on a private copy a check relies on
    the parser and the rule, and a check that changed rows all the same makes the database unusable. Agents'
    queries still set their own authorizer and ``query_only`` (their text is the agent's), and put the guard back.
    """

    __slots__ = ("rule",)

    def __init__(self, rule: Callable[..., int] | None = None) -> None:
        self.rule = rule
        """The rule now (None: everything is allowed, the application's own statements on a private copy)."""

    def __call__(self, action: int, *args: Any) -> int:
        rule = self.rule
        return sqlite3.SQLITE_OK if rule is None else rule(action, *args)


def agent_authorizer(tables: Collection[str], hidden: Collection[str] = ()) -> Callable[..., int]:
    """Reading only, only ``tables`` (and the query's own WITH names), only :data:`ENGINE_FUNCTIONS`.

    ``hidden``: the backend's own tables, never readable (nor are SQLite's ``sqlite_*`` tables).
    """
    known = frozenset(t.lower() for t in tables)
    never = frozenset(t.lower() for t in hidden)

    def authorize(action: int, arg1: str | None, arg2: str | None, db_name: str | None, *_: Any) -> int:
        if action == sqlite3.SQLITE_READ:
            name = (arg1 or "").lower()
            # A WITH name is reported without a database; a stored table's columns with "main".
            with_name = db_name is None and name not in never and not name.startswith("sqlite_")
            return sqlite3.SQLITE_OK if name in known or with_name else sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_FUNCTION:
            return sqlite3.SQLITE_OK if (arg2 or "").lower() in ENGINE_FUNCTIONS else sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK if action in _READ_ACTIONS else sqlite3.SQLITE_DENY

    return authorize


# -- limits, deadline ----------------------------------------------------------------------------------
Ticker = tuple[Callable[[], int], int]
"""A progress handler and its step count (``Connection.set_progress_handler``'s arguments)."""


@contextmanager
def reading(conn: sqlite3.Connection, authorizer: Callable[..., int], *, timeout_s: float | None,
            limits: ReadLimits | None = None, restore: Ticker | None = None,
            restore_authorizer: Callable[..., int] | None = None,
            guard: Guard | None = None) -> Iterator[sqlite3.Connection]:
    """Run the block read-only, under ``authorizer``, ``limits`` and a deadline (see the module docstring);
    ``restore``: the connection's own progress handler, ``restore_authorizer`` its own authorizer (a shared
    snapshot's reader has one), put back afterwards. ``guard``: the connection's :class:`Guard`, whose rule is
    switched instead of the authorizer being set (no ``limits`` then: a check's, the world's own text).
    Yields ``conn``."""
    if guard is not None:
        yield from _guarded(conn, guard, authorizer, timeout_s, restore)
        return
    saved: dict[int, int] = {}
    cache: int | None = None
    if restore_authorizer is not None:
        conn.set_authorizer(None)  # the connection's own authorizer would refuse the PRAGMAs below
    if limits is not None:
        cache = conn.execute("PRAGMA cache_size").fetchone()[0]
        conn.execute(f"PRAGMA cache_size = {-max(1, limits.cache_bytes >> 10)}")
        for field, limit_id in _LIMIT_IDS.items():
            saved[limit_id] = conn.setlimit(limit_id, getattr(limits, field))
    was_query_only = conn.execute("PRAGMA query_only").fetchone()[0]  # a reader's stays on
    conn.execute("PRAGMA query_only = ON")
    conn.set_authorizer(authorizer)
    _set_deadline(conn, timeout_s)
    try:
        yield conn
    finally:
        conn.set_progress_handler(*(restore or (None, 0)))
        for limit_id, old in saved.items():
            conn.setlimit(limit_id, old)
        conn.set_authorizer(None)
        if not was_query_only:
            conn.execute("PRAGMA query_only = OFF")
        if cache is not None:
            conn.execute(f"PRAGMA cache_size = {int(cache)}")
        if restore_authorizer is not None:
            conn.set_authorizer(restore_authorizer)  # last: it expires every statement prepared without it


def _set_deadline(conn: sqlite3.Connection, timeout_s: float | None) -> None:
    """Stop the connection's statement once ``timeout_s`` have passed (None: no deadline)."""
    if timeout_s is not None:
        deadline = time.monotonic() + timeout_s
        conn.set_progress_handler(lambda: int(time.monotonic() > deadline), PROGRESS_STEPS)


def _guarded(conn: sqlite3.Connection, guard: Guard, authorizer: Callable[..., int], timeout_s: float | None,
             restore: Ticker | None) -> Iterator[sqlite3.Connection]:
    """A check under the guard: its rule switched, a deadline. ``PRAGMA query_only`` is not toggled here: a flag
    pragma expires every prepared statement of the connection just as setting an authorizer does (SQLite adds
    ``OP_Expire``), which was the whole cost of a check between a tool's statements. A shared snapshot's reader is
    read-only already (``mode=ro``, ``query_only`` set once, its guard's own rule reading only); on a private copy
    the check's text is one read-only statement by the parser and reading only by the rule."""
    own = guard.rule
    guard.rule = authorizer
    _set_deadline(conn, timeout_s)
    try:
        yield conn
    finally:
        conn.set_progress_handler(*(restore or (None, 0)))
        guard.rule = own


def fetch_capped(cursor: sqlite3.Cursor, max_rows: int, max_bytes: int) -> list[Row]:
    """At most ``max_rows`` rows, or :class:`ApplicationError` once the values pass ``max_bytes``."""
    rows: list[Row] = []
    size = 0
    while len(rows) < max_rows:
        row = cursor.fetchone()
        if row is None:
            break
        size += sum(len(v) if isinstance(v, (str, bytes)) else 8 for v in row)
        if size > max_bytes:
            raise ApplicationError(f"the query's result passed {max_bytes // 1_000_000} MB before {len(rows) + 1} "
                                   "rows; select fewer or shorter columns, or aggregate in the query")
        rows.append(tuple(row))
    return rows


# -- failures ---------------------------------------------------------------------------------------------
def refused(exc: sqlite3.Error) -> bool:
    """Whether SQLite refused the statement because it would do more than read."""
    return "not authorized" in str(exc) or "readonly" in str(exc)


def agent_failure(exc: sqlite3.Error, timeout_s: float) -> str:
    """What the agent reads when its query failed on SQLite."""
    text = str(exc)
    if "interrupt" in text:
        return (f"the query ran longer than {timeout_s:g}s and was stopped; filter earlier, join on keys, or "
                "aggregate in the query")
    if "user-defined function raised exception" in text:
        return f"the query is refused: {clock_refusal() or text}"
    if "too big" in text or "too many" in text or "too long" in text or "too large" in text:
        return (f"the query passed one of SQLite's limits ({text}); values may be at most "
                f"{AGENT_LIMITS.length // 1000} kB, the query {AGENT_LIMITS.sql_length // 1000} kB and "
                f"{AGENT_LIMITS.columns} columns")
    if refused(exc):
        return f"the query tried to do more than read: {text}. It may read only the world's tables"
    return f"the query failed: {text}"


# -- the frozen clock ------------------------------------------------------------------------------------
_TIME_ARG = {"date": 0, "time": 0, "datetime": 0, "julianday": 0, "unixepoch": 0, "strftime": 1}
_ZONE_MODIFIERS = frozenset({"localtime", "utc"})
_helpers = threading.local()


class FrozenClock(ValueError):
    """An agent's query asked SQLite for the server's clock or time zone."""


def _refuse(message: str) -> None:
    _helpers.refusal = message
    raise FrozenClock(message)


def clock_refusal() -> str | None:
    """The message of the last frozen-clock refusal on this thread (SQLite reports only that a function
    raised), then forgotten."""
    message, _helpers.refusal = getattr(_helpers, "refusal", None), None
    return message


def _native(name: str, args: tuple[Any, ...]) -> Any:
    helper = getattr(_helpers, "conn", None)
    if helper is None:
        helper = _helpers.conn = sqlite3.connect(":memory:", check_same_thread=True)
    return helper.execute(f"SELECT {name}({', '.join('?' * len(args))})", args).fetchone()[0]


def _frozen(name: str) -> Callable[..., Any]:
    first = _TIME_ARG[name]

    def function(*args: Any) -> Any:
        if len(args) <= first:
            return _refuse(f"{name}() without a time value reads the server's clock; the world's clock is frozen: "
                           "write the date")
        value = args[first]
        if isinstance(value, str) and value.strip().lower() == "now":
            return _refuse("'now' reads the server's clock; the world's clock is frozen: write the date")
        for modifier in args[first + 1:]:
            if isinstance(modifier, str) and modifier.strip().lower() in _ZONE_MODIFIERS:
                return _refuse(f"the {modifier.strip()!r} modifier depends on the server's time zone; dates are "
                               "UTC: leave it out")
        return _native(name, args)

    return function


def _exists(name: str) -> bool:
    try:
        _native(name, ("2000-01-01",) if _TIME_ARG[name] == 0 else ("%Y", "2000-01-01"))
    except sqlite3.Error:
        return False
    return True


_FROZEN = {name: _frozen(name) for name in _TIME_ARG if _exists(name)}


@contextmanager
def frozen_date_functions(conn: sqlite3.Connection) -> Iterator[None]:
    """SQLite's date functions on ``conn`` replaced by ones that refuse the clock (see the module docstring)."""
    for name, function in _FROZEN.items():
        conn.create_function(name, -1, function, deterministic=True)
    try:
        yield
    finally:
        for name in _FROZEN:
            conn.create_function(name, -1, None)
