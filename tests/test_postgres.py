"""The PostgreSQL backend against a real server (the session's ``postgres_dsn``, see conftest.py).

Parity with SQLite is the contract: the same state gives the same digest, every
scenario of every world gives the same verdict, and a reset restores the exact
snapshot (rows and next ids) although every tool call committed.
"""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from datetime import date
from pathlib import Path
from typing import Any

import psycopg
import pytest
from inprocess import in_process_worlds

from rehearsal_env.agents import make_agent
from rehearsal_env.backends import ApplicationError, Database, DatabaseError, digest, open_database
from rehearsal_env.backends._pgcache import shared_server_running, stop_shared_server
from rehearsal_env.backends._pgcluster import forget
from rehearsal_env.backends.postgres import PostgresDatabase
from rehearsal_env.checks import CheckError, CheckRefused
from rehearsal_env.env import RehearsalEnv
from rehearsal_env.runner import run_episode
from rehearsal_env.schema import Table, col
from rehearsal_env.verdict import Verdict
from rehearsal_env.worlds import Role, World, load_world

# -- a small world with a foreign-key chain, a self reference, a real column and an empty table --
TEAMS = Table("teams", (col("id", "int"), col("name")))
MEMBERS = Table("members", (col("id", "int"), col("team_id", "int", ref="teams.id"),
                            col("mentor_id", "int", null=True, ref="members.id"), col("name"),
                            col("score", "real")), indexes=(("team_id",),))
NOTES = Table("notes", (col("id", "int"), col("member_id", "int", ref="members.id"), col("body")))


def _chain_rows(seed: int, anchor: date) -> dict[str, list[tuple[Any, ...]]]:
    return {
        "teams": [(1, "red"), (2, "blue")],
        "members": [(1, 1, None, "Ann", 1.5), (2, 1, 1, "Bob", 0.1), (3, 2, None, "Cy", 2.0),
                    (7, 2, 3, "Di", -3.25)],
        "notes": [],
    }


@pytest.fixture(scope="module")
def chain_world() -> World:
    return World(name="pgchain", description="Teams, members and notes.", tables=(TEAMS, MEMBERS, NOTES),
                 tools=(), roles=(Role("admin", "Everything.", ()),), policies=(),
                 data_anchor=date(2026, 1, 5), seed=1, generate_rows=_chain_rows,
                 generate_scenarios=lambda world: ())


@pytest.fixture
def pair(chain_world: World, postgres_dsn: str) -> Iterator[tuple[Database, Database]]:
    """The chain world on SQLite and on PostgreSQL."""
    lite, pg = open_database(chain_world), open_database(chain_world, "postgres", dsn=postgres_dsn)
    yield lite, pg
    lite.close()
    pg.close()


def _both(pair: tuple[Database, Database], sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
    out = []
    for db in pair:
        with db.transaction():
            out.append(db.execute(sql, params))
    assert out[0] == out[1], f"SQLite and PostgreSQL differ on {sql}: {out}"
    return out[0]


def _next_ids(db: Database) -> dict[str, int]:
    ids = {}
    with db.transaction():
        ids["teams"] = db.execute("INSERT INTO teams (name) VALUES ('probe') RETURNING id")[0][0]
        ids["members"] = db.execute(
            "INSERT INTO members (team_id, name, score) VALUES (1, 'probe', 0.0) RETURNING id")[0][0]
        ids["notes"] = db.execute(
            "INSERT INTO notes (member_id, body) VALUES (1, 'probe') RETURNING id")[0][0]
    return ids


# -- values, digests, ids -------------------------------------------------------------------------
def test_same_values_and_digest_as_sqlite(pair: tuple[Database, Database]) -> None:
    lite, pg = pair
    assert digest(lite) == digest(pg)
    for sql in ("SELECT SUM(team_id) FROM members", "SELECT AVG(team_id) FROM members",
                "SELECT SUM(score) FROM members", "SELECT COUNT(*) > 2 FROM members",
                "SELECT MAX(mentor_id) FROM members WHERE team_id = 2", "SELECT name FROM teams WHERE id = 9",
                "SELECT 7 / 2", "SELECT COUNT(*) FROM members WHERE name LIKE 'a%'"):
        got = [db.query(sql) for db in pair]
        types = [[type(v) for row in rows for v in row] for rows in got]
        assert got[0] == got[1] and types[0] == types[1], (sql, got)
    assert pg.check_value("SELECT AVG(score) FROM members WHERE id < 3") == 0.8 == lite.check_value(
        "SELECT AVG(score) FROM members WHERE id < 3")


def test_arithmetic_and_aggregates_read_back_as_on_sqlite(pair: tuple[Database, Database]) -> None:
    cases = ["SELECT SUM(team_id) / COUNT(*) FROM members", "SELECT 1.0 * SUM(team_id) / 3 FROM members",
             "SELECT AVG(team_id * 7) FROM members", "SELECT ROUND(2.5), ROUND(-2.5), ROUND(2.675, 2)",
             "SELECT 10 / 3.0, 1e3, CAST(7 AS REAL) / 3, CAST(2 AS INTEGER) * 4611686018427387903",
             "SELECT SUM(id) FROM notes", "SELECT AVG(score), MIN(score) FROM members WHERE team_id = 2"]
    for sql in cases:
        got = [db.query(sql) for db in pair]
        assert [[(type(v), v) for v in row] for row in got[0]] == \
               [[(type(v), v) for v in row] for row in got[1]], (sql, got)


def test_agents_queries_run_read_only_inside_a_tool_call(pair: tuple[Database, Database]) -> None:
    pg = pair[1]
    assert isinstance(pg, PostgresDatabase)
    with pg.transaction():
        columns, rows, cut = pg.read_query("SELECT id, name AS label FROM teams ORDER BY id", max_rows=1,
                                           timeout_s=1.0)
        assert (columns, rows, cut) == (("id", "label"), [(1, "red")], True)
        for bad, why in (("UPDATE teams SET name = 'x'", "SELECT"),
                         ("SELECT * FROM rehearsal.touched", "world's tables"),
                         ("SELECT COUNT(*) FROM pg_sleep(2)", "may not call"),
                         ("SELECT nope FROM teams", "failed")):
            with pytest.raises(ApplicationError, match=why):
                pg.read_query(bad, max_rows=5, timeout_s=0.2)
        # the application's own timeout (APP_STATEMENT_TIMEOUT_S), not the agent's read's 0.2 s
        assert pg.query("SELECT current_user, current_setting('statement_timeout')") == [("rehearsal", "5s")]
        pg.execute("UPDATE teams SET name = 'Red' WHERE id = 1")  # the transaction is still usable
    assert pg.query("SELECT name FROM teams WHERE id = 1") == [("Red",)]
    assert pg.read_query("SELECT COUNT(*) FROM members", max_rows=5, timeout_s=1.0)[1:] == ([(4,)], False)


def test_an_agents_query_after_a_write_in_the_same_call_is_a_world_bug_on_both_backends(
        pair: tuple[Database, Database]) -> None:
    for db in pair:
        with pytest.raises(DatabaseError, match="after writing in the same call"), db.transaction():
            db.execute("UPDATE teams SET name = 'RED' WHERE id = 1")
            db.read_query("SELECT name FROM teams", max_rows=5, timeout_s=1.0)
        assert db.query("SELECT name FROM teams WHERE id = 1") == [("red",)]  # rolled back


def test_reset_restores_every_row_and_the_next_ids(pair: tuple[Database, Database]) -> None:
    lite, pg = pair
    snapshot = digest(pg)
    _both(pair, "INSERT INTO teams (name) VALUES ('green') RETURNING id")
    _both(pair, "INSERT INTO members (team_id, mentor_id, name, score) VALUES (3, 1, 'Eve', 4.5) "
          "RETURNING id")
    _both(pair, "UPDATE members SET team_id = 3, mentor_id = 8 WHERE id = 1")  # now needs the new rows
    _both(pair, "INSERT INTO notes (member_id, body) VALUES (8, 'x'), (1, 'y'), (8, 'z') RETURNING id")
    _both(pair, "DELETE FROM members WHERE id = 7")
    _both(pair, "UPDATE members SET mentor_id = NULL WHERE id = 2")
    _both(pair, "DELETE FROM members WHERE id = 2")
    _both(pair, "DELETE FROM teams WHERE id = 1")  # its last member moved away; the team row goes
    _both(pair, "UPDATE members SET id = 40 WHERE id = 3")  # a primary key moved
    assert digest(lite) == digest(pg) != snapshot
    lite.reset()
    pg.reset()
    assert digest(pg) == snapshot == digest(lite)
    assert _next_ids(pg) == _next_ids(lite) == {"teams": 3, "members": 8, "notes": 1}
    pg.reset()
    assert digest(pg) == snapshot


SHOP_WRITES = (
    "INSERT INTO refunds (order_id, payment_id, order_item_id, amount_cents, reason, provider_ref, "
    "created_at) SELECT order_id, id, NULL, 100, 'test', 'ref', '2026-03-02T12:00:00' FROM payments "
    "WHERE id <= 3",
    "INSERT INTO ticket_messages (ticket_id, author, body, created_at) VALUES (1, 'agent', 'hi', 'x')",
    "INSERT INTO emails (customer_id, to_address, subject, body, provider_ref, sent_at) "
    "VALUES (1, 'a@b.c', 's', 'b', 'e1', '2026-03-02T12:00:00')",
    "INSERT INTO store_credits (customer_id, amount_cents, reason, created_at) VALUES (2, 500, 'x', 'y')",
    "INSERT INTO service_requests (service, operation, payload, idempotency_key, requested_at, response) "
    "VALUES ('payments', 'refund', '{}', 'op-1', '2026-03-02T12:00:00', '{}')",
    "UPDATE orders SET status = 'cancelled', updated_at = 'later' WHERE id IN (1, 2, 3)",
    "UPDATE customers SET address = 'elsewhere' WHERE id = 5",
    "UPDATE payments SET status = 'refunded' WHERE id = 2",
    "DELETE FROM shipments WHERE id IN (1, 2)",
    "DELETE FROM ticket_messages WHERE ticket_id = 3",
    "DELETE FROM tickets WHERE id = 3",
)


def test_shop_reset_after_writes_in_many_tables(postgres_dsn: str) -> None:
    world = load_world("shop")
    lite, pg = open_database(world), open_database(world, "postgres", dsn=postgres_dsn)
    try:
        snapshot = digest(pg)
        for sql in SHOP_WRITES:
            _both((lite, pg), sql)
        assert digest(lite) == digest(pg) != snapshot
        lite.reset()
        pg.reset()
        assert digest(pg) == snapshot == digest(lite)
        seeded = world.seed_rows()
        for sql, table in zip(SHOP_WRITES[:3], ("refunds", "ticket_messages", "emails"), strict=True):
            expected = max((r[0] for r in seeded[table]), default=0) + 1  # as SQLite's rowid
            assert _both((lite, pg), f"{sql} RETURNING id")[0] == (expected,), table
        assert digest(lite) == digest(pg)
    finally:
        lite.close()
        pg.close()


def test_ids_follow_sqlite_after_rollback_delete_and_explicit_ids(pair: tuple[Database, Database]) -> None:
    lite, pg = pair
    for db in pair:
        with pytest.raises(ApplicationError, match="refused"), db.transaction():
            db.execute("INSERT INTO teams (name) VALUES ('lost') RETURNING id")
            db.execute("INSERT INTO members (team_id, name, score) VALUES (99, 'ghost', 0.0)")  # no team 99
    _both(pair, "INSERT INTO teams (name) VALUES ('kept') RETURNING id")  # 3 on both: the rollback freed it
    _both(pair, "DELETE FROM teams WHERE id = 3")
    _both(pair, "INSERT INTO teams (name) VALUES ('again') RETURNING id")  # max(id) + 1 = 3 again
    _both(pair, "INSERT INTO notes (id, member_id, body) VALUES (50, 1, 'explicit')")
    assert _both(pair, "INSERT INTO notes (member_id, body) VALUES (1, 'next') RETURNING id") == [(51,)]
    assert digest(lite) == digest(pg)


def test_a_failed_write_is_undone_alone_and_the_tool_call_goes_on(pair: tuple[Database, Database]) -> None:
    for db in pair:
        with db.transaction():
            db.execute("UPDATE teams SET name = 'RED' WHERE id = 1")
            with pytest.raises(ApplicationError):
                db.execute("INSERT INTO members (team_id, name, score) VALUES (99, 'ghost', 0.0)")
            db.execute("INSERT INTO notes (member_id, body) VALUES (1, 'after')")
    assert digest(pair[0]) == digest(pair[1])
    assert pair[1].query("SELECT name FROM teams WHERE id = 1") == [("RED",)]
    assert _next_ids(pair[0]) == _next_ids(pair[1]) == {"teams": 3, "members": 8, "notes": 2}


def test_errors_map_like_sqlite(pair: tuple[Database, Database]) -> None:
    refusals = []
    for db in pair:
        for sql in ("INSERT INTO notes (member_id, body) VALUES (1, NULL)",
                    "UPDATE teams SET id = 2 WHERE id = 1",
                    "INSERT INTO notes (member_id, body) VALUES (99, 'x')"):
            with pytest.raises(ApplicationError) as refused, db.transaction():
                db.execute(sql)
            refusals.append(str(refused.value))
        with pytest.raises(DatabaseError), db.transaction():
            db.execute("SELECT no_such_column FROM teams")
        assert db.query("SELECT COUNT(*) FROM notes") == [(0,)]  # rolled back, connection usable
    assert refusals[:3] == refusals[3:], "agents see the same refusal on both backends"
    assert refusals[0] == "the application refused the change: NOT NULL constraint failed: notes.body"
    pg = pair[1]
    with pytest.raises(DatabaseError, match="TRUNCATE"):
        pg.execute("TRUNCATE notes")
    with pytest.raises(DatabaseError, match="clock"):
        pg.execute("INSERT INTO notes (member_id, body) VALUES (1, CAST(CURRENT_TIMESTAMP AS text))")


def test_envs_have_their_own_databases_and_close_drops_them(chain_world: World, postgres_dsn: str) -> None:
    one = PostgresDatabase(chain_world, dsn=postgres_dsn)
    two = PostgresDatabase(chain_world, dsn=postgres_dsn)
    with one.transaction():
        one.execute("DELETE FROM members WHERE id = 7")
    assert two.query("SELECT COUNT(*) FROM members") == [(4,)] != one.query("SELECT COUNT(*) FROM members")
    names = {one.name, two.name}
    one.close()
    two.close()
    with psycopg.connect(postgres_dsn) as admin:
        left = {r[0] for r in admin.execute("SELECT datname FROM pg_database").fetchall()}
    assert not names & left


def _left(dsn: str, names: set[str]) -> dict[str, tuple[bool, bool, int]]:
    """For each of ``names``: whether its database and its reader role still exist, and its open connections."""
    with psycopg.connect(dsn) as admin:
        dbs = {r[0] for r in admin.execute("SELECT datname FROM pg_database").fetchall()}
        roles = {r[0] for r in admin.execute("SELECT rolname FROM pg_roles").fetchall()}
        conns: dict[str, int] = dict(admin.execute(
            "SELECT datname, count(*) FROM pg_stat_activity WHERE datname IS NOT NULL GROUP BY datname").fetchall())
    return {n: (n in dbs, n in roles, conns.get(n, 0)) for n in names}


def _within(seconds: float, lock: Any, body: Callable[[], None]) -> None:
    """Run ``body`` in a thread; fail (instead of hanging) if it is still running after ``seconds``. A thread stuck
    on ``lock`` (a plain Lock: any thread may release it) is let go first, so the process and the next tests go
    on."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            body()
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    thread = threading.Thread(target=run, name="collector", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        lock.release()  # the finalizer waits on the lock its own thread holds: let it through
        thread.join(seconds)
        pytest.fail(f"still running after {seconds:g} s: the garbage collector ran an unclosed env's finalizer "
                    f"while this thread held the cluster's admin lock, and the finalizer waited for that lock "
                    f"(a deadlock; finalizers must take no lock)")
    assert not errors, errors


def test_envs_dropped_without_close_never_deadlock_the_collector_and_are_dropped_later(
        chain_world: World, postgres_dsn: str) -> None:
    """Issue 31: envs dropped without close() (usual in a training loop) are freed by the garbage collector,
    which runs wherever an allocation triggers it, also inside the cluster's admin lock while another env is being
    created. Their finalizer must not wait for that lock (a plain Lock, so it deadlocked the process): it closes
    the env's connections and leaves the drop to the next env created or closed, which drops the databases."""
    dsn = psycopg.conninfo.make_conninfo(postgres_dsn, application_name="rehearsal-gc-test")  # a cluster of its own
    kept = PostgresDatabase(chain_world, dsn=dsn)
    admin_lock = kept._cluster._lock  # what Cluster._admin_run holds around every admin statement
    gc.disable()  # the collection below, in the locked section, is the only one
    try:
        names = set()
        for _ in range(3):
            dropped = PostgresDatabase(chain_world, dsn=dsn)
            dropped.cycle = dropped  # type: ignore[attr-defined]  # only the collector frees it
            names.add(dropped.name)
        del dropped
        assert all(v == (True, True, 2) for v in _left(dsn, names).values())  # the app's and the reader's

        def collect_while_creating() -> None:
            with admin_lock:  # as while another env's database is created
                gc.collect()  # the dropped envs' finalizers run here

        _within(20.0, admin_lock, collect_while_creating)
        deadline = time.monotonic() + 10  # a closed connection's server process exits just after
        while any(v[2] for v in _left(dsn, names).values()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert all(v == (True, True, 0) for v in _left(dsn, names).values())  # closed; the drop is deferred
        another = PostgresDatabase(chain_world, dsn=dsn)  # the next env created drops them, lock taken normally
        assert _left(dsn, names) == dict.fromkeys(names, (False, False, 0))
        another.close()
        kept.close()
        assert not any(any(v[:2]) for v in _left(dsn, {another.name, kept.name}).values())
    finally:
        gc.enable()
        forget(dsn)


def test_envs_never_closed_are_dropped_at_exit(postgres_dsn: str, tmp_path: Path) -> None:
    """An env freed after the last env was created or closed, and an env still open when the interpreter exits,
    are both dropped at exit (their finalizers queue them first, then the queue is drained)."""
    script = tmp_path / "unclosed.py"
    script.write_text(
        "import gc, sys\n"
        "from rehearsal_env.backends import SeedData\n"
        "from rehearsal_env.backends.postgres import PostgresDatabase\n"
        "from rehearsal_env.schema import Table, col\n"
        "spec = SeedData('pgexit', (Table('t', (col('id', 'int'), col('name'))),), {'t': [(1, 'a')]})\n"
        "freed, kept = PostgresDatabase(spec, dsn=sys.argv[1]), PostgresDatabase(spec, dsn=sys.argv[1])\n"
        "freed.cycle = freed\n"
        "print(freed.name, kept.name)\n"
        "del freed\n"
        "gc.collect()\n")
    done = subprocess.run([sys.executable, str(script), postgres_dsn], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    names = set(done.stdout.split())
    assert len(names) == 2 and _left(postgres_dsn, names) == dict.fromkeys(names, (False, False, 0))


# -- checks -------------------------------------------------------------------------------------
def test_checks_refuse_before_the_server_and_run_read_only(pair: tuple[Database, Database]) -> None:
    pg = pair[1]
    assert isinstance(pg, PostgresDatabase)
    with pytest.raises(CheckRefused, match="more than one statement"):
        pg.check_value("SELECT 1; DELETE FROM notes")
    for sql in ("SELECT now()", "SELECT COUNT(*) FROM members WHERE name < CURRENT_DATE",
                "SELECT CAST('now' AS date)"):
        with pytest.raises(CheckRefused, match="clock is frozen"):
            pg.check_value(sql)
    with pytest.raises(CheckRefused, match="refused"):
        pg.check_value("SELECT E'\\'', CURRENT_DATE /*'*/")  # PostgreSQL reads the clock; SQLite cannot parse it
    # The server's own layers, bypassing the parsers: the reader logs in unprivileged.
    assert pg._read_only("SELECT current_user") == pg.name
    with pytest.raises(CheckRefused, match="more than read"):
        pg._read_only("UPDATE members SET name = 'x'")  # read-only transaction, and no UPDATE privilege
    with pytest.raises(CheckRefused, match="more than read"):
        pg._read_only("SELECT rehearsal.restore()")  # the reader may not touch the reset machinery
    with pytest.raises(CheckRefused, match="more than read"):
        pg._read_only("SELECT set_config('role', 'rehearsal', false)")
    with pytest.raises(CheckError, match="query failed"):
        pg._read_only("SELECT 1; SELECT 2")  # the extended protocol takes one statement
    with pytest.raises(CheckError, match="exactly one row"):
        pg.check_value("SELECT id FROM members")
    assert pg.query("SELECT current_user") == [("rehearsal",)]  # the application's connection is the admin's
    assert pg.check_value("SELECT COUNT(*) FROM members WHERE team_id = ?", (2,)) == 2


def test_a_slow_check_is_cancelled(chain_world: World, postgres_dsn: str) -> None:
    db = PostgresDatabase(chain_world, dsn=postgres_dsn, check_timeout_ms=100)
    try:
        with pytest.raises(CheckError, match="longer than 100 ms"):
            db.check_value("SELECT COUNT(*) FROM pg_sleep(1)")
        assert db.check_value("SELECT COUNT(*) FROM teams") == 2
    finally:
        db.close()


# -- where the server comes from ------------------------------------------------------------------
def test_the_dsn_can_come_from_the_environment(chain_world: World, postgres_dsn: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    stop_shared_server()  # one an earlier test file of this process started (the order of files varies)
    monkeypatch.setenv("REHEARSAL_POSTGRES_DSN", postgres_dsn)
    db = open_database(chain_world, "postgres")
    try:
        assert isinstance(db, PostgresDatabase) and db._cluster.dsn == postgres_dsn
        assert not shared_server_running()
    finally:
        db.close()


def test_without_a_dsn_the_process_runs_its_own_server(chain_world: World, postgres_dsn: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    base = Path(tempfile.mkdtemp(prefix="rehearsal-pgcache-"))
    base.chmod(0o711)
    monkeypatch.setenv("REHEARSAL_POSTGRES_DATA", str(base))
    monkeypatch.delenv("REHEARSAL_POSTGRES_DSN", raising=False)
    stop_shared_server()  # one an earlier test file of this process started, elsewhere than base
    try:
        db = open_database(chain_world, "postgres")
        assert shared_server_running()
        assert db.check_value("SELECT COUNT(*) FROM members") == 4
        db.close()
        (pid_file,) = base.glob("postgres-*/cluster-0/postmaster.pid")
        pid = int(pid_file.read_text().split()[0])
    finally:
        stop_shared_server()
        shutil.rmtree(base, ignore_errors=True)
    assert not shared_server_running()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@pytest.mark.parametrize(("require", "expect"), [("", "1 skipped"), ("1", "1 error")])
def test_without_binaries_the_tests_skip_unless_required(require: str, expect: str, tmp_path: Path) -> None:
    env = {**os.environ, "REHEARSAL_POSTGRES_BIN": str(tmp_path), "REHEARSAL_REQUIRE_POSTGRES": require}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-o", "addopts=", "-q", "-p", "no:cacheprovider",
         "-k", "same_values_and_digest", str(Path(__file__))],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    assert expect in done.stdout, done.stdout[-2000:]
    if require:
        assert "REHEARSAL_REQUIRE_POSTGRES=1 but" in done.stdout


# -- parity: every scenario of every world, every scripted agent ---------------------------------
def _verdict_key(verdict: Verdict) -> Any:
    checks = [(c.name, c.kind, c.op, c.want, type(c.held).__name__, c.held, c.passed, c.error)
              for c in verdict.checks]
    return verdict.outcome, verdict.ending, verdict.reason, checks, verdict.metrics


@pytest.mark.parametrize("world_name", in_process_worlds())
def test_every_scenario_gives_the_same_verdict_on_both_backends(world_name: str, postgres_dsn: str) -> None:
    world = load_world(world_name)
    dbs = {"sqlite": open_database(world), "postgres": open_database(world, "postgres", dsn=postgres_dsn)}
    start = digest(dbs["postgres"])
    assert start == digest(dbs["sqlite"])
    played = 0
    try:
        for scenario in world.scenarios():
            agents = ["reference", "null", *(w.name for w in scenario.wrong)]
            envs = {b: RehearsalEnv(scenario, world, database=db) for b, db in dbs.items()}
            for name in agents:
                results = {b: run_episode(env, make_agent(name, scenario), seed=0) for b, env in envs.items()}
                lite, pg = results["sqlite"], results["postgres"]
                where = f"{world_name}/{scenario.id} agent {name}"
                assert _verdict_key(lite.verdict) == _verdict_key(pg.verdict), where
                assert [(t.tool, t.status, t.observation) for t in lite.episode.trace] == \
                       [(t.tool, t.status, t.observation) for t in pg.episode.trace], where
                played += 1
        for db in dbs.values():
            db.reset()
        assert digest(dbs["postgres"]) == start == digest(dbs["sqlite"])
    finally:
        for db in dbs.values():
            db.close()
    assert played >= len(world.scenarios()) * 2
