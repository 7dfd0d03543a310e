"""One SQL bound for both backends (issue 32): an agent's SQL limits are decided by our parser before either engine
sees the text, so one action gives one observation on SQLite and on PostgreSQL.

- the issue's shapes (a 65-term sum, 70 ORs, a 70-argument COALESCE, 12 nested subqueries) and their neighbours
  (16 nested FROM subqueries, a 17-term UNION, ...) give the same ``run_sql`` observation on both backends:
  refused with the same words as an agent's tool error, never a crash or ``not_scored``; what is just under each
  bound runs, with the same rows;
- the count is SQLite's: for each shape, our parser refuses exactly where SQLite at its former agent limits
  (expression depth 64, 16 function arguments, 16 compound terms) refused;
- SQLite's parser stack: the estimate is never below SQLite's own count (probes padded until SQLite overflows, and
  random nested queries), and nothing the parser admits makes SQLite or PostgreSQL hit an engine limit;
- hostile texts (10,000 nested parentheses, 3,990 NOTs or unary pluses, 50 nested CASEs) are refused quickly, not
  a RecursionError.
"""

from __future__ import annotations

import json
import random
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlglot

import rehearsal_env
from rehearsal_env import RehearsalEnv
from rehearsal_env.backends import ApplicationError, Database, SeedData, open_database
from rehearsal_env.backends._sqliteread import _LIMIT_IDS, AGENT_LIMITS
from rehearsal_env.checks import (
    MAX_COMPOUND_SELECTS,
    MAX_EXPR_DEPTH,
    MAX_FUNCTION_ARGS,
    MAX_LIKE_PATTERN_BYTES,
    MAX_PARSER_NESTING,
    MAX_SQL_BYTES,
    MAX_TERMS,
    agent_bounds_refusal,
    parse_statement,
)
from rehearsal_env.checks import _bounds as bounds
from rehearsal_env.checks import _nesting as nesting
from rehearsal_env.schema import Table, col
from rehearsal_env.verdict import Outcome


def _sum(n: int) -> str:
    return "SELECT " + " + ".join(["total_cents"] * n) + " FROM orders WHERE id = 1"


def _ors(n: int) -> str:
    return "SELECT COUNT(*) FROM orders WHERE " + " OR ".join(f"id = {i}" for i in range(1, n + 1))


def _coalesce(n: int) -> str:
    return "SELECT coalesce(" + ", ".join(["NULL"] * (n - 1)) + ", 7)"


def _scalar(n: int) -> str:
    return "SELECT " + "(SELECT " * n + "1" + ")" * n


def _from(n: int) -> str:  # aliased: PostgreSQL before 16 wants a name for each
    return "SELECT COUNT(*) FROM " + "(SELECT id FROM " * n + "orders" + "".join(f") AS s{i}" for i in range(n))


def _union(n: int) -> str:
    return " UNION ".join(f"SELECT {i}" for i in range(n)) + " ORDER BY 1"


# (shape, the first size refused, the size just under it that must run on both backends)
SHAPES: list[tuple[str, Callable[[int], str], int, int]] = [
    ("sum", _sum, 65, 64),
    ("or", _ors, 70, 60),
    ("coalesce", _coalesce, 70, 16),
    ("scalar subqueries", _scalar, 12, 9),
    ("FROM subqueries", _from, 16, 12),
    ("union", _union, 17, 16),
]


# -- the same observation on both backends ----------------------------------------------------------------
@pytest.fixture(scope="module")
def observations(request: pytest.FixtureRequest) -> dict[str, list[Any]]:
    """Every shape's ``run_sql`` observation (refused size, then the size under it), and the episode's end, on each
    backend: one env per backend, one action after another."""
    seen: dict[str, list[Any]] = {}
    for backend in ("sqlite", "postgres"):
        options = {"backend": backend, "dsn": request.getfixturevalue("postgres_dsn")} if backend == "postgres" \
            else {"backend": backend}
        env = rehearsal_env.make("analytics/orders-count-0001", **options)
        try:
            env.reset(seed=0)
            steps: list[Any] = []
            for _, make, refused, runs in SHAPES:
                for size in (refused, runs):
                    observation, reward, terminated, truncated, info = env.step(
                        json.dumps({"tool": "run_sql", "args": {"sql": make(size)}}))
                    steps.append((json.loads(observation), reward, terminated, truncated, info["status"]))
            _, _, terminated, _, info = env.step(json.dumps({"tool": "finish", "args": {"message": "done"}}))
            verdict, unwrapped = info["verdict"], env.unwrapped
            assert isinstance(unwrapped, RehearsalEnv)
            steps.append((terminated, verdict.outcome, verdict.cause, unwrapped.episode.tool_crashes))
        finally:
            env.close()
        seen[backend] = steps
    return seen


@pytest.mark.parametrize("index", range(len(SHAPES)), ids=[s[0] for s in SHAPES])
def test_each_shape_gives_the_same_observation_on_both_backends(observations: dict[str, list[Any]],
                                                                index: int) -> None:
    name, _, refused, runs = SHAPES[index]
    for offset in (0, 1):
        on_sqlite, on_postgres = (observations[b][2 * index + offset] for b in ("sqlite", "postgres"))
        assert on_sqlite == on_postgres, f"{name} of {(refused, runs)[offset]}"
    (over, _, terminated, _, status), (under, *_rest, under_status) = observations["sqlite"][2 * index:2 * index + 2]
    assert status == "error" and not terminated  # the agent's tool error: the episode goes on
    assert over["tool_result"]["error"].startswith("the query is refused: "), over
    assert under_status == "ok" and under["tool_result"]["status"] == "ok", under


def test_the_refusals_say_what_arrived_what_is_accepted_and_how_to_fix_it(
        observations: dict[str, list[Any]]) -> None:
    errors = [observations["sqlite"][2 * i][0]["tool_result"]["error"] for i in range(len(SHAPES))]
    assert "65 levels deep" in errors[0] and f"at most {MAX_EXPR_DEPTH}" in errors[0] and "IN (" in errors[0]
    assert "71 levels deep" in errors[1]  # 70 ORs of an = : 69 ORs over an = over its operands
    assert "70 arguments to coalesce()" in errors[2] and f"at most {MAX_FUNCTION_ARGS}" in errors[2]
    assert "91 levels deep" in errors[3]  # 13 expressions (12 subqueries and the 1), 1 + 2 + ... + 13
    assert f"at most {MAX_PARSER_NESTING}" in errors[4] and "WITH clause" in errors[4]
    assert "17 SELECTs" in errors[5] and f"at most {MAX_COMPOUND_SELECTS}" in errors[5]


def test_what_runs_gives_the_same_rows_and_the_episode_is_judged(observations: dict[str, list[Any]]) -> None:
    results = [observations["sqlite"][2 * i + 1][0]["tool_result"]["result"] for i in range(len(SHAPES))]
    assert results[2]["rows"] == [[7]] and results[3]["rows"] == [[1]] and len(results[5]["rows"]) == 16
    for backend in ("sqlite", "postgres"):
        terminated, outcome, cause, crashes = observations[backend][-1]
        assert terminated and outcome is not Outcome.NOT_SCORED and cause is None and crashes == ()


TEAMS = Table("t", (col("id", "int"), col("a", "int"), col("b")))
SPEC = SeedData("bounds", (TEAMS,), {"t": [(1, 1, "x"), (2, 2, "y")]})


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest) -> Iterator[Database]:
    options = {"dsn": request.getfixturevalue("postgres_dsn")} if request.param == "postgres" else {}
    database = open_database(SPEC, request.param, **options)
    yield database
    database.close()


@pytest.mark.parametrize("sql", [
    "SELECT a FROM t WHERE " + " AND ".join(["a IS NOT NULL"] * 64),  # 65 deep
    "SELECT 1 FROM t ORDER BY " + ", ".join(["a"] * 65),
    "SELECT " + ", ".join(["a"] * 65) + " FROM t",
    "SELECT 1 FROM " + ", ".join(f"t t{i}" for i in range(65)),
    "SELECT a FROM t WHERE b LIKE '" + "%" * (MAX_LIKE_PATTERN_BYTES + 1) + "'",
    "SELECT '" + "x" * MAX_SQL_BYTES + "'",
    "SELECT " + "+ " * 70 + "1",  # unary pluses: sqlglot drops them, SQLite counts them
    "SELECT a LIKE b ESCAPE b FROM t",  # valid SQLite, but our parser cannot read it: refused on both
])
def test_the_database_refuses_before_the_engine_with_the_parsers_words(db: Database, sql: str) -> None:
    why = agent_bounds_refusal(sql)
    assert why is not None
    with pytest.raises(ApplicationError) as caught:
        db.read_query(sql, max_rows=5, timeout_s=2.0)
    assert str(caught.value) == (f"the query is refused: {why}. Only one read-only SELECT statement on the world's "
                                 "tables runs")


@pytest.mark.parametrize("sql", [
    "SELECT a FROM t WHERE " + " AND ".join(["a IS NOT NULL"] * 63),
    "SELECT 1 FROM t ORDER BY " + ", ".join(["a"] * 64),
    "SELECT " + ", ".join(["a"] * 64) + " FROM t",
    "SELECT COUNT(*) FROM " + ", ".join(f"t t{i}" for i in range(4)),
    "SELECT COUNT(*) FROM t WHERE b LIKE '" + "%" * MAX_LIKE_PATTERN_BYTES + "'",
    "SELECT " + "+ " * 62 + "1",
    "SELECT coalesce(" + ", ".join(["NULL"] * 15) + ", a) FROM t",
])
def test_what_is_just_under_the_bounds_runs_the_same_on_both(db: Database, sql: str) -> None:
    assert agent_bounds_refusal(sql) is None
    columns, rows, _ = db.read_query(sql, max_rows=5, timeout_s=5.0)
    assert rows


# -- counted as SQLite counts --------------------------------------------------------------------------------
def _sqlite_at_former_limits(sql: str) -> str | None:
    """SQLite's own answer under the agent limits it had before issue 32 (depth 64, 16 arguments, 16 compound terms):
    the error's text, or None when it ran."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE orders (id INTEGER, total_cents INTEGER)")
    conn.execute("CREATE TABLE t (id INTEGER, a INTEGER, b TEXT)")
    for limit, value in ((sqlite3.SQLITE_LIMIT_EXPR_DEPTH, 64), (sqlite3.SQLITE_LIMIT_FUNCTION_ARG, 16),
                         (sqlite3.SQLITE_LIMIT_COMPOUND_SELECT, 16), (sqlite3.SQLITE_LIMIT_COLUMN, 64)):
        conn.setlimit(limit, value)
    try:
        conn.execute(sql).fetchall()
    except sqlite3.Error as exc:
        return str(exc)
    finally:
        conn.close()
    return None


DEPTH_SHAPES: dict[str, Callable[[int], str]] = {
    "sum": _sum,
    "or": _ors,
    "scalar subqueries": _scalar,
    "qualified columns": lambda n: "SELECT " + " + ".join(["t.a"] * n) + " FROM t",
    "IN subqueries": lambda n: "SELECT a FROM t WHERE a IN " + "(SELECT a FROM t WHERE a IN " * n + "(1)" + ")" * n,
    "EXISTS": lambda n: "SELECT 1 FROM t WHERE " + "EXISTS (SELECT 1 FROM t WHERE " * n + "1" + ")" * n,
    "joins' ON": lambda n: ("SELECT 1 FROM t JOIN t t2 ON t.a = t2.a JOIN t t3 ON t3.a = t2.a WHERE "
                            + " OR ".join(["t.a = 1"] * n)),
    "USING": lambda n: "SELECT 1 FROM t JOIN t t2 USING (a) WHERE " + " OR ".join(["a = 1"] * n),
    "a subquery's chain": lambda n: "SELECT (SELECT " + " + ".join(["a"] * n) + " FROM t) FROM t",
    "FROM inside a subquery": lambda n: ("SELECT (SELECT " + "+".join(["x"] * 30) + " FROM (SELECT "
                                         + "+".join(["a"] * n) + " AS x FROM t)) FROM t"),
    "a WITH table read in a subquery": lambda n: ("WITH c AS (SELECT " + "+".join(["a"] * n) + " AS x FROM t) "
                                                  "SELECT (SELECT " + "+".join(["x"] * 30) + " FROM c) FROM t"),
    "a flattened WHERE": lambda n: "SELECT * FROM (SELECT a FROM t WHERE " + "+".join(["a"] * n) + ") WHERE a = 1",
    "window terms": lambda n: "SELECT sum(a) OVER (ORDER BY " + "+".join(["a"] * n) + ") FROM t",
    "FILTER": lambda n: "SELECT sum(a) FILTER (WHERE " + "+".join(["a"] * n) + ") FROM t",
    "IS NOT NULL": lambda n: "SELECT 1 FROM t WHERE " + " AND ".join(["a IS NOT NULL"] * n),
    "NOT IN": lambda n: "SELECT 1 FROM t WHERE " + " AND ".join(["a NOT IN (1, 2)"] * n),
    "NOT LIKE": lambda n: "SELECT 1 FROM t WHERE " + " AND ".join(["b NOT LIKE 'x'"] * n),
    "CASE": lambda n: "SELECT CASE WHEN " + "+".join(["a"] * n) + " THEN 1 END FROM t",
    "LIMIT": lambda n: "SELECT a FROM t LIMIT " + "+".join(["1"] * n),
    "unary minus": lambda n: "SELECT " + "- " * n + "1",
    "unary plus": lambda n: "SELECT " + "+ " * n + "1",
    "count(*)": lambda n: "SELECT " + " + ".join(["count(*)"] * n) + " FROM t",
    "coalesce arguments": _coalesce,
    "union terms": _union,
}


@pytest.mark.parametrize("shape", DEPTH_SHAPES)
def test_the_parser_refuses_exactly_where_sqlite_refused(shape: str) -> None:
    """For each shape, the first size SQLite refused at its former agent limits is the first our parser refuses:
    nothing SQLite ran on the default backend before is refused now, nothing it refused runs on either."""
    make = DEPTH_SHAPES[shape]
    sqlite_first = next(n for n in range(2, 200) if _sqlite_at_former_limits(make(n)) is not None)
    ours_first = next(n for n in range(2, 200) if agent_bounds_refusal(make(n)) is not None)
    assert ours_first == sqlite_first, (shape, _sqlite_at_former_limits(make(sqlite_first)))


# -- SQLite's parser stack, and random queries ----------------------------------------------------------------
PROBES = [
    "SELECT §", "SELECT 1 FROM t WHERE §", "SELECT a + a * §", "SELECT coalesce(1, 2, §)", "SELECT (SELECT §)",
    "SELECT 1 FROM (SELECT §)", "SELECT * FROM (SELECT * FROM (SELECT §))",
    "SELECT CASE WHEN 1 THEN 1 WHEN 1 THEN § END", "SELECT 1 WHERE a IN (SELECT §)",
    "SELECT 1 WHERE a NOT IN (1, §)", "SELECT 1 WHERE NOT EXISTS (SELECT §)",
    "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT § FROM r) SELECT 1",
    "WITH x AS (SELECT 1), y AS (SELECT §) SELECT 1", "SELECT a OR a AND NOT a = a + a * §",
    "SELECT sum(a) FILTER (WHERE a > 1) OVER (PARTITION BY §) FROM t",
    "SELECT sum(a) OVER (PARTITION BY a ORDER BY §) FROM t", "SELECT 1 FROM t LIMIT 1, §",
    "SELECT 1 FROM t GROUP BY a, §", "SELECT 1 ORDER BY 1, §", "SELECT a IS NOT §", "SELECT + + + §",
    "SELECT * FROM (VALUES (1, §))", "SELECT 1 FROM t JOIN t t2 ON a IN (SELECT §)", "SELECT iif(1, 2, §)",
    "SELECT a BETWEEN 1 AND §", "SELECT 1 FROM t WHERE (a, b) = (1, §)", "SELECT a LIKE 'x' ESCAPE '!' OR §",
]


def _stack_overflows(sql: str) -> bool:
    conn = sqlite3.connect(":memory:")
    conn.setlimit(sqlite3.SQLITE_LIMIT_EXPR_DEPTH, 1000)
    try:
        conn.execute(sql)
    except sqlite3.Error as exc:
        return "parser stack overflow" in str(exc)
    finally:
        conn.close()
    return False


def _marker_cost(probe: str) -> int:
    """The estimate's count at the probe's ``§``, SQLite's parser entries before that leaf."""
    sql = probe.replace("§", "424242")
    stack: list[tuple[Any, int]] = [(sqlglot.parse_one(sql, read="sqlite"), 0)]
    while stack:
        node, cost = stack.pop()
        cost += nesting.SELECT_ENTRY if isinstance(node, sqlglot.exp.Select) else 0
        if isinstance(node, sqlglot.exp.Literal) and node.name == "424242":
            return cost + bounds.spelling(sql).unary_pluses
        stack.extend((child, cost + nesting.edge_cost(node, child)) for child in node.iter_expressions())
    raise AssertionError(f"no marker in {probe}")


@pytest.mark.parametrize("probe", PROBES)
def test_the_parser_nesting_estimate_is_never_below_sqlites(probe: str) -> None:
    """Pad the probe's leaf with parentheses (one parser entry each) until SQLite's stack overflows: the estimate at
    that leaf plus the padding must then pass ``SQLITE_PARSER_STACK``."""
    fits = next(k for k in range(200) if _stack_overflows(probe.replace("§", "(" * k + "1" + ")" * k))) - 1
    assert fits >= 0
    assert _marker_cost(probe) + fits + 1 > bounds.SQLITE_PARSER_STACK, (probe, _marker_cost(probe), fits)
    assert _marker_cost(probe) + fits - bounds.SQLITE_PARSER_STACK <= 6  # and not far above it


LEAVES = ["a", "b", "t.a", "1", "2.5", "'x'", "NULL", "-1"]


def _expression(r: random.Random, depth: int) -> str:
    """A random expression whose one deep branch is ``depth`` constructs deep (the others are shallow)."""
    if depth <= 0:
        return r.choice(LEAVES)

    def deep() -> str:
        return _expression(r, depth - 1)

    def flat() -> str:
        return _expression(r, min(r.choice([0, 0, 1]), depth - 1))

    def pair() -> tuple[str, str]:
        return (deep(), flat()) if r.random() < 0.5 else (flat(), deep())

    def binary(template: str) -> str:
        x, y = pair()
        return template.format(x=x, y=y, f=flat(), op=r.choice(["+", "*", "||", "=", "<", "AND", "OR", "IS",
                                                                  "IS NOT"]))

    choices: list[Callable[[], str]] = [
        lambda: f"({deep()})", lambda: binary("{x} {op} {y}"), lambda: f"NOT {deep()}", lambda: f"- {deep()}",
        lambda: f"+ {deep()}", lambda: f"{r.choice(['abs', 'lower', 'trim', 'length'])}({deep()})",
        lambda: binary("coalesce({f}, {x}, {y})"), lambda: binary("CASE WHEN {x} THEN {y} ELSE {f} END"),
        lambda: binary("CASE {f} WHEN {x} THEN {y} END"), lambda: binary("{x} IN ({y}, {f})"),
        lambda: binary("{x} NOT IN ({y})"), lambda: binary("{x} BETWEEN {y} AND {f}"),
        lambda: f"({_select(r, depth - 1)})", lambda: f"{flat()} IN ({_select(r, depth - 1)})",
        lambda: f"EXISTS ({_select(r, depth - 1)})", lambda: f"CAST({deep()} AS INTEGER)",
        lambda: binary("{x} NOT LIKE {y}"), lambda: f"{deep()} IS NOT NULL", lambda: binary("iif({x}, {y}, {f})"),
        lambda: binary("sum({f}) OVER (PARTITION BY {x} ORDER BY {y})"),
        lambda: f"max({deep()}) FILTER (WHERE {flat()})",
        lambda: " + ".join([deep()] + [flat() for _ in range(r.randint(1, 8))]),
    ]
    return r.choice(choices)()


def _select(r: random.Random, depth: int) -> str:
    """A random one-column SELECT on ``t`` whose deep branch is in one of its clauses."""
    deep, flat = _expression(r, depth - 1), _expression(r, min(1, depth - 1))
    where = r.choice(["col", "src", "where", "order", "having", "with", "union"]) if depth > 0 else "col"
    column = deep if where == "col" else flat
    source = "w" if where == "with" else "t"
    if where == "src":
        source = r.choice([f"(SELECT a, b FROM ({_select(r, depth - 1)}) AS s0 JOIN t ON 1) AS s",
                           f"t JOIN t AS t2 ON {deep}"])
    sql = f"SELECT {column} FROM {source}"
    sql += f" WHERE {deep}" if where == "where" else ""
    sql += f" GROUP BY a HAVING {deep}" if where == "having" else ""
    sql += f" UNION ALL SELECT {deep}" if where == "union" else ""
    sql += f" ORDER BY {deep}" if where == "order" else ""
    return f"WITH w AS (SELECT {deep} AS a, 1 AS b) {sql}" if where == "with" else sql


def _random_query(r: random.Random, depth: int) -> str:
    """:func:`_select` with room for the generator's own recursion (five frames a level), given back before the text
    is measured: the parser must meet the text at the recursion limit it always has."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(limit + 10 * depth)
    try:
        return _select(r, depth)
    finally:
        sys.setrecursionlimit(limit)


def _engine_limit(message: str) -> bool:
    return any(s in message for s in ("parser stack overflow", "Expression tree is too large", "too many",
                                      "stack depth limit", "at most 64 tables", "pattern too complex"))


def test_random_nested_queries_never_reach_an_engine_limit_on_sqlite() -> None:
    """Random deeply nested queries: SQLite's parser overflows only where the estimate passes its stack, and
    whatever our parser admits, SQLite under the agent limits runs without hitting one of its own limits."""
    r = random.Random(32)
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (a INTEGER, b TEXT)")
    for field, limit in _LIMIT_IDS.items():
        conn.setlimit(limit, getattr(AGENT_LIMITS, field))
    admitted = overflowed = 0
    for _ in range(600):
        sql = _random_query(r, r.randint(8, 40))
        why = agent_bounds_refusal(sql)
        try:
            conn.execute(sql).fetchall()
            error = ""
        except sqlite3.Error as exc:
            error = str(exc)
        if "parser stack overflow" in error:
            overflowed += 1
            try:
                tree = sqlglot.parse_one(sql, read="sqlite")
            except (sqlglot.errors.SqlglotError, RecursionError):
                assert why is not None  # what our parser cannot read is refused
            else:
                estimate = bounds.measure(tree, bounds.spelling(sql)).parser_nesting
                assert estimate > bounds.SQLITE_PARSER_STACK, (estimate, sql)
        if why is None:
            admitted += 1
            assert not _engine_limit(error), (error, sql)
    assert admitted > 100 and overflowed > 50  # the corpus reaches both sides of the bounds


def test_random_admitted_queries_never_reach_an_engine_limit_on_postgres(postgres_dsn: str) -> None:
    pg = open_database(SPEC, "postgres", dsn=postgres_dsn)
    try:
        r = random.Random(320)
        tried = 0
        while tried < 80:
            sql = _random_query(r, r.randint(6, 30))
            if agent_bounds_refusal(sql) is not None:
                continue
            tried += 1
            try:
                pg.read_query(sql, max_rows=5, timeout_s=2.0)
            except ApplicationError as exc:
                assert not _engine_limit(str(exc)), (str(exc), sql)
    finally:
        pg.close()


# -- hostile texts, and the backstop ---------------------------------------------------------------------------
@pytest.mark.parametrize("sql", [
    "SELECT " + "(" * 10_000 + "1" + ")" * 10_000,
    "SELECT " + "(" * 1_990 + "1" + ")" * 1_990,  # under the token bound: the nesting bound refuses it
    "SELECT " + "NOT " * 3_990 + "1",  # too deep for sqlglot: its RecursionError is the refusal
    "SELECT " + "+ " * 3_990 + "1",
    "SELECT " + "- " * 3_990 + "1",
    "SELECT " + "CASE WHEN 1 THEN " * 50 + "1" + " END" * 50,
    "SELECT " + "abs(" * 30 + "1" + ")" * 30,
    "SELECT " + "+".join(["1"] * 1_990),
])
def test_hostile_texts_are_refused_quickly_not_crashed(sql: str) -> None:
    parse_statement.cache_clear()
    started = time.process_time()  # this process's CPU, not the wall clock a busy machine stretches
    why = agent_bounds_refusal(sql)
    assert why is not None and time.process_time() - started < 2.0


HOSTILE_STEPS = [
    "SELECT " + "(" * 10_000 + "1" + ")" * 10_000,  # past run_sql's 4,000 characters: a rejected attempt
    "SELECT " + "(" * 1_990 + "1" + ")" * 1_990,  # then within them: our parser's tool error
    "SELECT " + "NOT " * 995 + "1",
    "SELECT " + "+ " * 1_990 + "1",
    "SELECT " + "CASE WHEN 1 THEN " * 50 + "1" + " END" * 50,
]


def test_a_hostile_text_is_the_agent_s_tool_error_on_both_backends(postgres_dsn: str) -> None:
    seen = []
    for options in ({"backend": "sqlite"}, {"backend": "postgres", "dsn": postgres_dsn}):
        env = rehearsal_env.make("analytics/orders-count-0001", **options)
        try:
            env.reset(seed=0)
            steps = [json.loads(env.step(json.dumps({"tool": "run_sql", "args": {"sql": sql}}))[0])["tool_result"]
                     for sql in HOSTILE_STEPS]
            assert steps[0]["status"] == "rejected" and "longer than 4000" in steps[0]["error"]  # the tool's bound
            assert all(s["status"] == "error" and "refused" in s["error"] for s in steps[1:]), steps
            unwrapped = env.unwrapped
            assert isinstance(unwrapped, RehearsalEnv) and unwrapped.episode.tool_crashes == ()
            seen.append(steps)
        finally:
            env.close()
    assert seen[0] == seen[1]


def test_terms_are_counted_and_named_as_the_agent_wrote_them() -> None:
    assert agent_bounds_refusal("SELECT max(" + ", ".join(["1"] * 17) + ")") == (
        "it passes 17 arguments to max(); at most 16 are accepted in one call: nest the calls, for example "
        "max(a, max(b, c))")
    assert "its ORDER BY has 65 terms" in (agent_bounds_refusal("SELECT 1 ORDER BY " + ", ".join(["1"] * 65)) or "")
    assert agent_bounds_refusal("") is None and agent_bounds_refusal("SELECT 1") is None  # the rest is not theirs


def test_sqlites_engine_limits_are_a_backstop_at_or_above_the_parsers_bounds() -> None:
    assert AGENT_LIMITS.expr_depth >= MAX_EXPR_DEPTH and AGENT_LIMITS.function_args >= MAX_FUNCTION_ARGS
    assert AGENT_LIMITS.compound_select >= MAX_COMPOUND_SELECTS and AGENT_LIMITS.columns >= MAX_TERMS
    assert AGENT_LIMITS.sql_length >= MAX_SQL_BYTES and AGENT_LIMITS.like_pattern >= MAX_LIKE_PATTERN_BYTES
    conn = sqlite3.connect(":memory:")
    for field, limit in _LIMIT_IDS.items():
        conn.setlimit(limit, getattr(AGENT_LIMITS, field))
    assert conn.getlimit(sqlite3.SQLITE_LIMIT_EXPR_DEPTH) > MAX_EXPR_DEPTH  # SQLite cannot be the one refusing
    conn.close()
