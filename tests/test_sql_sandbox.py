"""Agents' SQL and checks stay inside their sandbox, on both backends (issue 11, section 2).

- PostgreSQL: every known escape is refused twice, by the parsers before the server and by
  the server itself when the parsers are bypassed (the reader logs in unprivileged); nothing
  of the file system, other sessions or other databases leaks.
- The frozen clock holds in every spelling, including ``SELECT E'\\'', CURRENT_DATE /*'*/``.
- Agents' SQL is allow-listed (functions and tables); a text that does not parse is refused.
- SQLite's resource limits hold the issue's attacks to their time limit and to under
  256 MB of extra memory (measured in a subprocess: its peak RSS and the query's stop time).
- A 400-digit answer is judged wrong, not "not scored", on both backends.
"""

from __future__ import annotations

import contextlib
import json
import math
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from rehearsal_env.backends import ApplicationError, Database, SeedData, open_database
from rehearsal_env.backends import _pgguard as pgguard
from rehearsal_env.backends.postgres import PostgresDatabase
from rehearsal_env.checks import CheckError, CheckRefused, parse_statement, validate_check_sql
from rehearsal_env.env import RehearsalEnv
from rehearsal_env.schema import Table, col
from rehearsal_env.verdict import Outcome
from rehearsal_env.worlds import load_world

TEAMS = Table("teams", (col("id", "int"), col("name")))
MEMBERS = Table("members", (col("id", "int"), col("team_id", "int", ref="teams.id"), col("name"),
                            col("score", "real")))
SPEC = SeedData("sandbox", (TEAMS, MEMBERS), {
    "teams": [(1, "red"), (2, "blue")],
    "members": [(1, 1, "Ann", 1.5), (2, 1, "Bob", 0.1), (3, 2, "Cy", 2.0), (4, 2, "Di", -3.25)],
})

ESCAPES = [
    "SELECT query_to_xml('select set_config(''role'',''none'',true)',true,true,'') a, "
    "query_to_xml('select pg_read_file(''/etc/passwd'')',true,true,'') b",
    "SELECT query_to_xml('select pg_ls_dir(''/'')',true,true,'')",
    "SELECT set_config('role', 'rehearsal', false)",
    "SELECT pg_read_file('/etc/passwd')",
    "SELECT * FROM pg_ls_dir('/')",
    "SELECT lo_import('/etc/passwd')",
    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity",
    "SELECT pg_terminate_backend(pg_backend_pid())",
    "SELECT dblink('dbname=postgres', 'select 1')",
    "SELECT datname FROM pg_database",
    "SELECT datname FROM pg_catalog.pg_database",
    "SELECT rolname FROM pg_roles",
    "SELECT * FROM rehearsal.touched",
    "SELECT COUNT(*) FROM pg_sleep(30)",
    "SET ROLE rehearsal",
    "RESET ROLE",
    "COPY (SELECT 1) TO PROGRAM 'id'",
    "CREATE EXTENSION dblink",
    "SELECT 1; SELECT pg_read_file('/etc/passwd')",
]


@pytest.fixture
def pg(postgres_dsn: str) -> Iterator[PostgresDatabase]:
    db = open_database(SPEC, "postgres", dsn=postgres_dsn, check_timeout_ms=300)
    assert isinstance(db, PostgresDatabase)
    yield db
    db.close()


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest) -> Iterator[Database]:
    options = {"dsn": request.getfixturevalue("postgres_dsn")} if request.param == "postgres" else {}
    database = open_database(SPEC, request.param, **options)
    yield database
    database.close()


# -- PostgreSQL: the escapes, refused by the parsers and by the server ------------------------------------
@pytest.mark.parametrize("sql", ESCAPES)
def test_every_escape_is_refused_before_the_server(pg: PostgresDatabase, sql: str) -> None:
    with pytest.raises(ApplicationError, match="refused"):
        pg.read_query(sql, max_rows=5, timeout_s=1.0)
    with pytest.raises((CheckRefused, CheckError)):  # a check (world code) has no allow-list: the server refuses
        pg.check_value(sql)


@pytest.mark.parametrize("sql", ESCAPES)
def test_every_escape_is_refused_by_the_server_itself(pg: PostgresDatabase, sql: str) -> None:
    """The parsers bypassed: the text goes straight to the reader's connection, which may only read."""
    if sql in ("RESET ROLE", "SET ROLE rehearsal"):
        with pytest.raises(psycopg.Error) if "rehearsal" in sql else contextlib.nullcontext():
            pg._reader.rows(sql, (), timeout_ms=1000)
        assert pg._reader.rows("SELECT current_user", (), timeout_ms=1000)[1] == [(pg.name,)]
        return
    with pytest.raises(psycopg.Error) as caught:
        pg._reader.rows(sql, (), timeout_ms=300)
    assert not isinstance(caught.value, psycopg.OperationalError) or "canceling" in str(caught.value)
    assert pg._reader.rows("SELECT COUNT(*) FROM members", (), timeout_ms=1000)[1] == [(4,)]  # still usable


def test_the_reader_logs_in_unprivileged_and_only_to_its_own_database(pg: PostgresDatabase,
                                                                       postgres_dsn: str) -> None:
    with psycopg.connect(postgres_dsn, autocommit=True) as admin:
        role = admin.execute("SELECT rolsuper, rolcreatedb, rolcreaterole, rolreplication, rolbypassrls, rolcanlogin, "
                             "rolconfig FROM pg_roles WHERE rolname = %s", (pg.name,)).fetchone()
        groups = admin.execute("SELECT g.rolname, g.rolsuper FROM pg_auth_members m JOIN pg_roles g "
                               "ON g.oid = m.roleid JOIN pg_roles r ON r.oid = m.member WHERE r.rolname = %s",
                               (pg.name,)).fetchall()
    assert role is not None and role[:6] == (False, False, False, False, False, True)
    settings = dict(item.split("=", 1) for item in role[6])
    assert settings["default_transaction_read_only"] == "on"
    assert int(settings["statement_timeout"]) > 0 and settings["idle_in_transaction_session_timeout"]
    assert groups == [("rehearsal_checker", False)]
    live = pg._reader.rows("SELECT current_setting('default_transaction_read_only'), "
                           "current_setting('idle_in_transaction_session_timeout'), current_setting('work_mem')",
                           (), timeout_ms=1000)[1]
    assert live == [("on", "10s", "4MB")]  # the session keeps its role's settings
    other = open_database(SPEC, "postgres", dsn=postgres_dsn)
    try:
        password = pg._reader._dsn.split("password=")[1].split()[0]
        for dbname in (other.name, "postgres", "template1"):  # type: ignore[attr-defined]
            with pytest.raises(psycopg.OperationalError):
                psycopg.connect(psycopg.conninfo.make_conninfo(pg._reader._dsn, dbname=dbname, password=password))
    finally:
        other.close()


def test_a_slow_agent_query_is_stopped_at_its_limit(pg: PostgresDatabase) -> None:
    sql = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT COUNT(*) FROM r"
    with pytest.raises(ApplicationError, match="longer than 0.2s"):
        pg.read_query(sql, max_rows=5, timeout_s=0.2)


# -- both backends: the clock, the allow-list, parse errors, caps -----------------------------------------
CLOCKS = ["SELECT E'\\'', CURRENT_DATE /*'*/", "SELECT now()", "SELECT CURRENT_DATE", "SELECT current_timestamp",
          "SELECT localtimestamp", "SELECT clock_timestamp()", "SELECT statement_timestamp()",
          "SELECT date('now')", "SELECT CAST('now' AS date)", "SELECT 'today'::date", "SELECT date()",
          "SELECT COUNT(*) FROM members WHERE name < CURRENT_TIME", "SELECT strftime('%Y')"]


@pytest.mark.parametrize("sql", CLOCKS)
def test_the_server_clock_is_refused_in_every_spelling(db: Database, sql: str) -> None:
    with pytest.raises(ApplicationError, match="refused"):
        db.read_query(sql, max_rows=5, timeout_s=1.0)
    with pytest.raises(CheckRefused):
        validate_check_sql(sql)


def test_a_computed_now_is_refused_too(db: Database) -> None:
    sql = ("SELECT date('no' || 'w')" if db.dialect == "sqlite" else "SELECT ('no' || 'w')::date")
    with pytest.raises(ApplicationError, match="clock"):
        db.read_query(sql, max_rows=5, timeout_s=1.0)
    ok = ("SELECT date('2025-06-30', '-30 days')" if db.dialect == "sqlite" else
          "SELECT to_char('2025-06-30'::date - 30, 'YYYY-MM-DD')")
    assert db.read_query(ok, max_rows=5, timeout_s=1.0)[1] == [("2025-05-31",)]


@pytest.mark.parametrize(("sql", "says"), [
    ("SELECT random()", "may not call"),
    ("SELECT hex(name) FROM teams", "may not call"),
    ("SELECT md5(name) FROM teams", "may not call"),
    ("SELECT name FROM sqlite_master", "not one of the world's tables"),
    ("SELECT * FROM information_schema.tables", "schema"),
    ("SELEC name FROM teams", "pars"),
    ("", "empty"),
])
def test_agents_sql_is_allow_listed_and_must_parse(db: Database, sql: str, says: str) -> None:
    with pytest.raises(ApplicationError, match=says):
        db.read_query(sql, max_rows=5, timeout_s=1.0)


def test_allowed_queries_agree_and_decisions_are_cached(db: Database) -> None:
    sql = ("WITH t AS (SELECT team_id, SUM(score) AS s FROM members GROUP BY team_id) "
           "SELECT team_id, ROUND(s, 2), UPPER(SUBSTR('abc', 1, 2)) FROM t ORDER BY team_id")
    assert db.read_query(sql, max_rows=5, timeout_s=1.0)[1] == [(1, 1.6, "AB"), (2, -1.25, "AB")]
    decide = parse_statement if db.dialect == "sqlite" else pgguard.refusal  # the dialect's own parser
    hits, misses = decide.cache_info().hits, decide.cache_info().misses
    db.read_query(sql, max_rows=5, timeout_s=1.0)
    assert decide.cache_info().hits > hits and decide.cache_info().misses == misses


def test_a_result_larger_than_the_cap_is_refused_with_a_message(db: Database) -> None:
    big = "'xxxxx'"
    for _ in range(5):
        big = f"replace({big}, 'x', 'xxxxxxxxxx')"  # 500 kB
    sql = f"SELECT {big} FROM members a, members b, teams c"  # 32 rows: 16 MB
    with pytest.raises(ApplicationError, match="passed 4 MB"):
        db.read_query(sql, max_rows=100, timeout_s=5.0)
    assert db.read_query(f"SELECT length({big}) FROM teams", max_rows=5, timeout_s=5.0)[1] == [(500_000,)] * 2


CASTS = ["1e400", "-1e400", "1" * 400, "-" + "9" * 30, " 12abc", "abc", "", ".5", "5.", "1e-400",
         "0." + "0" * 400 + "1", "  -3.5e2x", "+7", "1e3", "9223372036854775808", "-9223372036854775809",
         "12.7", "-12.7", "1e", "++1", "0" * 400 + "133"]


def test_text_casts_read_as_sqlite_reads_them(postgres_dsn: str) -> None:
    lite, pg = open_database(SPEC), open_database(SPEC, "postgres", dsn=postgres_dsn)
    try:
        for value in CASTS:
            for target in ("REAL", "INTEGER", "DOUBLE PRECISION"):
                sql = f"SELECT CAST(? AS {target})"
                got = [d.check_value(sql, (value,)) for d in (lite, pg)]
                same = got[0] == got[1] or all(isinstance(g, float) and math.isnan(g) for g in got)
                assert same and type(got[0]) is type(got[1]), (value, target, got)
    finally:
        lite.close()
        pg.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
@pytest.mark.parametrize(("answer", "outcome"), [
    ("1" * 400, Outcome.NOT_ACHIEVED), ("1e400", Outcome.NOT_ACHIEVED), ("-" + "9" * 400, Outcome.NOT_ACHIEVED),
])
def test_a_huge_numeric_answer_is_judged_wrong_on_both_backends(backend: str, answer: str, outcome: Outcome,
                                                                request: pytest.FixtureRequest) -> None:
    world = load_world("analytics")
    options = {"dsn": request.getfixturevalue("postgres_dsn")} if backend == "postgres" else {}
    env = RehearsalEnv(world.scenario("orders-count-0001"), world, backend=backend, **options)
    try:
        env.reset(seed=0)
        action = json.dumps({"tool": "finish", "args": {"message": "done", "answer": answer}})
        info = env.step(action)[4]
        assert info["verdict"].outcome is outcome, info["verdict"]
    finally:
        env.close()


# -- SQLite: the resource attacks, measured in a subprocess -----------------------------------------
_ATTACK = textwrap.dedent("""
    import json, sys, time
    sys.path.insert(0, {tests!r})
    from test_sql_sandbox import SPEC
    from rehearsal_env.backends import ApplicationError, open_database
    import rehearsal_env.backends._sqliteread as engine
    # The "engine" attacks call hex() and zeroblob(), which the allow-list refuses at once; let them
    # through to show that SQLite's own limits, the deadline and the heap cap hold even then.
    engine.ENGINE_FUNCTIONS = engine.ENGINE_FUNCTIONS | {{"hex", "zeroblob"}}

    def peak():
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    db = open_database(SPEC)
    db.read_query("SELECT COUNT(*) FROM members", max_rows=5, timeout_s=1.0)
    before = peak()
    siblings = ", ".join(f"length(replace(hex(zeroblob(5e7)), '0', '11')) AS c{{i}}" for i in range(30))
    nested = "'xxxxxxxxxx'"
    for _ in range(9):
        nested = f"replace({{nested}}, 'x', 'xxxxxxxxxx')"
    wide = ", ".join(f"replace(replace(replace(replace(replace('xxxxxxxxx', 'x', 'xxxxxxxxxx'), 'x', 'xxxxxxxxxx'), "
                     f"'x', 'xxxxxxxxxx'), 'x', 'xxxxxxxxxx'), 'x', 'xxxxxxxxxx') AS w{{i}}" for i in range(60))
    attacks = {{
        "siblings": ("engine", f"SELECT {{siblings}}"),
        "one 200 MB value": ("engine", "SELECT length(zeroblob(200000000))"),
        "nested replace": ("public", f"SELECT length({{nested}})"),
        "60 wide columns": ("public", f"SELECT {{wide}}"),
        "endless recursion": ("public", "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) "
                                        "SELECT COUNT(*) FROM r"),
    }}
    limit = 0.5
    out = {{}}
    for name, (path, sql) in attacks.items():
        start = time.monotonic()
        try:
            if path == "public":
                db.read_query(sql, max_rows=100, timeout_s=limit)
            else:
                db._agent_read(sql, max_rows=100, timeout_s=limit)
            error = None
        except ApplicationError as exc:
            error = str(exc)
        out[name] = {{"seconds": time.monotonic() - start, "error": error}}
    out["extra_rss"] = peak() - before
    out["limit"] = limit
    print(json.dumps(out))
""")


def test_sqlite_resource_attacks_stop_at_their_limit_and_under_256_mb() -> None:
    script = _ATTACK.format(tests=str(Path(__file__).parent))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert figures.pop("extra_rss") < 256 << 20, figures
    limit = figures.pop("limit")
    for name, got in figures.items():
        assert got["error"], (name, got)  # every attack is stopped, with a message for the agent
        assert got["seconds"] < limit * 1.1 + 2.0, (name, got)  # wide margin over the 10% the issue allows
