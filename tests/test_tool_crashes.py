"""Attribution by construction (issue 21 §1, §2): an exception while a tool handles an agent's call is the
tool's error, never ``not_scored``; the probes of the issue, each on SQLite and PostgreSQL.

- the one boundary: a world's tool that raises (``KeyError``, ``ZeroDivisionError`` after a write) answers
  ``status: error``, is rolled back, the episode goes on and is judged, the traceback is in the record's
  ``tool_crashes`` and ``summary.json`` counts the crashes per tool;
- the probes: analytics ``run_sql`` with 46 nested parentheses (sqlglot's RecursionError), tau2's
  ``calculate`` with a 2,000-character chain and the CPU bomb ``((9**999)**999)**30``, tau2-airline
  ``update_reservation_baggages(nonfree_baggages=2**62)``, a folder world's SQL tool with an omitted optional
  argument and with an array argument;
- what stays ``not_scored``: a database that is gone (closed, or its server session terminated);
- checks: an error on a database the agent changed is decided against the agent, on the untouched snapshot
  it is the world's defect (not scored, and validation keeps such a scenario out);
- SQLite: a heap-hungry agent query on one env never makes a concurrent env's reset or step fail.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import crashworld
import psycopg
import pytest
from tau2data import tau2_world

import rehearsal_env
from rehearsal_env import RehearsalEnv
from rehearsal_env.backends import ApplicationError, open_database
from rehearsal_env.backends import postgres as postgres_backend
from rehearsal_env.backends import sqlite as sqlite_backend
from rehearsal_env.backends.sqlite import APP_STATEMENT_TIMEOUT_S
from rehearsal_env.checks import Check
from rehearsal_env.records import read_records
from rehearsal_env.runner import RunConfig, run
from rehearsal_env.scenarios import Scenario, Solution, ToolCall
from rehearsal_env.tools import ToolContext, tool
from rehearsal_env.verdict import Outcome, judge
from rehearsal_env.versions import build_and_publish, load_manifest, render_html, render_markdown
from rehearsal_env.worlds import Role, World, load_world_folder, register_world

NOTES = Path(__file__).parent / "worlds" / "notes"
PARENS = "SELECT " + "(" * 46 + "1" + ")" * 46
CHAIN = "+".join(["1"] * 1000)
BOMB = "((9**999)**999)**30"


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> dict[str, Any]:
    """Keyword arguments of RehearsalEnv for each backend."""
    if request.param == "postgres":
        return {"backend": "postgres", "dsn": request.getfixturevalue("postgres_dsn")}
    return {"backend": "sqlite"}


def _step(env: RehearsalEnv, tool: str, **args: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    observation, _, _, _, info = env.step(json.dumps({"tool": tool, "args": args}))
    return json.loads(observation)["tool_result"], info


def _finish(env: RehearsalEnv) -> Any:
    _, _, terminated, truncated, info = env.step(json.dumps({"tool": "finish", "args": {"message": "done"}}))
    assert terminated or truncated
    return info["verdict"]


@pytest.fixture()
def crashy(backend: dict[str, Any]) -> Iterator[RehearsalEnv]:
    env = RehearsalEnv("tag-0", crashworld.build_world(), stress=False, **backend)
    env.reset(seed=0)
    yield env
    env.close()


# -- the one boundary ---------------------------------------------------------------------------------
def test_a_tool_that_raises_answers_error_and_the_episode_goes_on(crashy: RehearsalEnv) -> None:
    result, info = _step(crashy, "lookup", colour="blue")
    assert info["status"] == "error" and "KeyError" in result["error"] and "nothing was changed" in result["error"]
    result, _ = _step(crashy, "tag", body="")  # writes, then raises: the write is rolled back
    assert result["status"] == "error" and "ZeroDivisionError" in result["error"]
    assert crashy.db.query("SELECT COUNT(*) FROM notes WHERE owner = 'ann'") == [(0,)]
    assert _step(crashy, "tag", body="hello")[0]["status"] == "ok"
    verdict = _finish(crashy)
    assert verdict.outcome is Outcome.VERIFIED and verdict.cause is None
    crashes = crashy.episode.tool_crashes
    assert [(c.turn, c.tool) for c in crashes] == [(1, "lookup"), (2, "tag")]
    assert "Traceback" in crashes[0].traceback and "LABELS[colour]" in crashes[0].traceback
    assert crashy.episode.trace[0].crash == crashes[0] and crashy.episode.trace[2].crash is None


def test_records_the_summary_and_the_world_page_count_tool_crashes_per_tool(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    world = crashworld.build_world()
    register_world("crashy", lambda: world)
    monkeypatch.setenv("REHEARSAL_WORLD_VERSIONS", str(tmp_path / "versions"))
    build_and_publish(world)

    def agent(scenario: Any) -> Any:
        queue = [{"tool": "lookup", "args": {"colour": "blue"}}, {"tool": "lookup", "args": {"colour": "x"}},
                 {"tool": "tag", "args": {"body": ""}}, {"tool": "finish", "args": {"message": "gave up"}}]
        return lambda observation, info: json.dumps(queue.pop(0))

    out = tmp_path / "run"
    summary = run(RunConfig(world="crashy", agent="crasher", stress=False), out, agent_factory=agent)
    assert summary["not_scored"] == 0 and summary["not_achieved"] == 3
    assert summary["tool_crashes"] == {"lookup": 6, "tag": 3} and summary["tool_crashes_total"] == 9
    assert json.loads((out / "summary.json").read_text())["tool_crashes"] == {"lookup": 6, "tag": 3}
    page = render_markdown(load_manifest(world))
    assert "## Tool crashes" in page and "| lookup | 6 | 1 |" in page and "| tag | 3 | 1 |" in page
    assert "<td><code>lookup</code></td><td class=bad>6</td>" in render_html(load_manifest(world))
    record = read_records(out)[0]
    assert [c.tool for c in record.tool_crashes or ()] == ["lookup", "lookup", "tag"]
    assert "ZeroDivisionError" in (record.tool_crashes or ())[2].traceback


def test_a_lost_database_is_still_not_scored(crashy: RehearsalEnv, backend: dict[str, Any]) -> None:
    if backend["backend"] == "sqlite":
        crashy.db.close()  # what a lost SQLite database is: every later statement fails
    else:
        killer = psycopg.connect(backend["dsn"], autocommit=True)
        pid = crashy.db._conn.info.backend_pid  # type: ignore[attr-defined]
        killer.execute("SELECT pg_terminate_backend(%s)", (pid,))
        killer.close()
    _, _, _, _, info = crashy.step(json.dumps({"tool": "tag", "args": {"body": "hello"}}))
    assert info["verdict"].outcome is Outcome.NOT_SCORED and info["verdict"].cause.value == "database"
    assert crashy.episode.tool_crashes == ()


# -- checks ---------------------------------------------------------------------------------------------
def test_a_check_that_errors_on_a_changed_database_is_decided_against_the_agent(crashy: RehearsalEnv) -> None:
    fragile = Check("ann's note says hello", "SELECT body FROM notes WHERE owner = 'ann'", "eq", "hello")
    rule = Check("bob keeps one note", "SELECT body FROM notes WHERE owner = 'bob'", "eq", "hi")
    outcome, results, reason = judge(crashy.db, (fragile,), ())
    assert outcome is Outcome.NOT_SCORED and "untouched snapshot" in (reason or "")  # the world's defect
    _step(crashy, "tag", body="hello")
    _step(crashy, "tag", body="hello")  # two rows now: the check cannot return one value
    outcome, results, reason = judge(crashy.db, (fragile,), (rule,))
    assert outcome is Outcome.NOT_ACHIEVED and reason is None and "2" in (results[0].error or "")
    crashy.db.execute("INSERT INTO notes (owner, body) VALUES ('bob', 'again')")
    outcome, results, _ = judge(crashy.db, (), (rule,))
    assert outcome is Outcome.RULE_VIOLATED and results[0].error


# -- the probes ---------------------------------------------------------------------------------
def test_run_sql_with_nested_parentheses_is_the_agent_s_error(backend: dict[str, Any]) -> None:
    env = rehearsal_env.make("analytics/orders-count-0001", **backend)
    try:
        env.reset(seed=0)
        for sql in (PARENS, "SELECT " + "(" * 200 + "1" + ")" * 200):
            result, info = _step(env, "run_sql", sql=sql)
            assert info["status"] == "error" and "refused" in result["error"], result
        result, _ = _step(env, "run_sql", sql="SELECT " + "+".join(["1"] * 1990))  # 2,000 terms, flat
        assert result["status"] in ("ok", "error")  # SQLite's expression-depth limit refuses it, PostgreSQL runs it
        assert _step(env, "run_sql", sql="SELECT ((1))")[0]["result"]["rows"] == [[1]]
        verdict = _finish(env)
        assert verdict.cause is None and verdict.outcome is Outcome.NOT_ACHIEVED
        assert env.unwrapped.episode.tool_crashes == ()  # type: ignore[attr-defined]  # refused, not crashed
    finally:
        env.close()


@pytest.mark.parametrize("domain", ["retail", "airline"])
def test_tau2_calculate_is_bounded(domain: str, backend: dict[str, Any]) -> None:
    world = tau2_world(domain)
    env = RehearsalEnv(world.scenarios()[0], world, stress=False, **backend)
    try:
        env.reset(seed=0)
        assert _step(env, "calculate", expression=CHAIN)[0]["result"] == "1000.0"
        started = time.process_time()  # this process's CPU, not wall time: the bound holds on a loaded machine
        result, info = _step(env, "calculate", expression=BOMB)
        assert time.process_time() - started < APP_STATEMENT_TIMEOUT_S  # refused before Python computes it
        assert info["status"] == "error" and "too large" in result["error"]
        assert _step(env, "calculate", expression="(10**400)/(10**399)")[0]["result"] == "10.0"
        assert _step(env, "calculate", expression="-" * 3000 + "1")[1]["status"] == "error"
        assert _finish(env).cause is None and env.episode.tool_crashes == ()
    finally:
        env.close()


def test_airline_baggage_past_64_bits_is_refused(backend: dict[str, Any]) -> None:
    world = tau2_world("airline")
    env = RehearsalEnv(world.scenarios()[0], world, stress=False, **backend)
    try:
        env.reset(seed=0)
        (reservation, user), = env.db.query("SELECT reservation_id, user_id FROM reservations ORDER BY id LIMIT 1")
        result, info = _step(env, "update_reservation_baggages", reservation_id=reservation, total_baggages=2**62,
                             nonfree_baggages=2**62, payment_id="credit_card_0")
        assert info["status"] == "error" and "larger than a payment" in result["error"]
        assert _finish(env).cause is None and env.episode.tool_crashes == ()
    finally:
        env.close()


def _notes_with_more_tools(tmp_path: Path) -> World:
    folder = tmp_path / "notes"
    shutil.copytree(NOTES, folder)
    toml = (folder / "world.toml").read_text()
    toml = toml.replace('tools = ["find_user", "list_notes", "add_note", "edit_note", "delete_note"]',
                        'tools = ["find_user", "list_notes", "add_note", "edit_note", "delete_note", "search", '
                        '"count_bodies"]')
    toml += '''
[[tool]]
name = "search"
kind = "read"
type = "sql"
description = "Notes by an author, or by nobody in particular."
sql = "SELECT id, body FROM notes WHERE author_id = :author_id ORDER BY id"
on_empty = "no notes by {author_id}"
[tool.args.author_id]
type = "integer"
required = false
description = "The author's user id (optional)."

[[tool]]
name = "count_bodies"
kind = "read"
type = "sql"
description = "How many notes have exactly this text."
sql = "SELECT COUNT(*) AS n FROM notes WHERE body = :bodies"
[tool.args.bodies]
type = "array"
items = {type = "string"}
description = "Texts."
'''
    (folder / "world.toml").write_text(toml)
    return load_world_folder(folder)


def test_a_folder_world_s_sql_tool_with_an_omitted_or_array_argument(tmp_path: Path,
                                                                      backend: dict[str, Any]) -> None:
    world = _notes_with_more_tools(tmp_path)
    scenario = next(s for s in world.scenarios() if s.role == "editor")
    env = RehearsalEnv(scenario, world, stress=False, **backend)
    try:
        env.reset(seed=0)
        result, info = _step(env, "search")
        assert info["status"] == "error" and result["error"] == "no notes by None"
        assert _step(env, "count_bodies", bodies=["a", "b"])[0]["result"] == [{"n": 0}]
        assert _finish(env).cause is None and env.episode.tool_crashes == ()
    finally:
        env.close()


# -- SQLite: one env's hungry query never fails another env --------------------------------------------------
def test_a_heap_hungry_query_never_fails_a_concurrent_env_s_reset_or_step() -> None:
    world = rehearsal_env.load_world("analytics")
    column = "replace(replace(replace(replace(replace('xxxxxxxxx', 'x', 'xxxxxxxxxx'), 'x', 'xxxxxxxxxx'), " \
             "'x', 'xxxxxxxxxx'), 'x', 'xxxxxxxxxx'), 'x', 'xxxxxxxxxx')"  # 900 kB
    hungry = "SELECT " + ", ".join(f"{column} AS w{i}" for i in range(60)) + " FROM regions"  # ~54 MB a row
    stop = threading.Event()
    hostile_errors: list[str] = []

    def hostile() -> None:
        db = open_database(world)
        try:
            while not stop.is_set():
                try:
                    db.read_query(hungry, max_rows=10, timeout_s=5.0)
                except ApplicationError as exc:
                    hostile_errors.append(str(exc))
        finally:
            db.close()

    threads = [threading.Thread(target=hostile) for _ in range(3)]
    for t in threads:
        t.start()
    victim = open_database(world)
    failures = []
    try:
        deadline = time.monotonic() + 60
        while len(hostile_errors) < 6 and time.monotonic() < deadline:
            try:
                victim.reset()
                victim.read_query("SELECT COUNT(*) FROM orders", max_rows=5, timeout_s=5.0)
            except Exception as exc:  # any failure at all is what the test looks for
                failures.append(repr(exc))
    finally:
        stop.set()
        for t in threads:
            t.join()
        victim.close()
    assert not failures, failures[:3]
    assert hostile_errors and all("passed 4 MB" in e for e in hostile_errors), hostile_errors[:2]


# -- a tool's own statement that runs away is stopped, and is that tool's crash (both backends) ----------------
def test_a_runaway_application_statement_is_interrupted_as_the_tool_s_crash(monkeypatch: pytest.MonkeyPatch,
                                                                           backend: dict[str, Any]) -> None:
    @tool("read")
    def count_to(ctx: ToolContext, n: int) -> int:
        """Count to n (the world's author forgot to bound n).

        Args:
            n: How far.
        """
        sql = "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < ?) SELECT COUNT(*) FROM r"
        return int(ctx.db.query(sql, (n,))[0][0])

    check = Check("the note is there", "SELECT COUNT(*) FROM notes", "eq", 1)
    world = World(name="counter", description="Counts.", tables=(crashworld.NOTES,), tools=(count_to,),
                  roles=(Role("clerk", "Counts.", ("count_to",)),), policies=(), data_anchor=date(2026, 1, 15),
                  seed=1, generate_rows=lambda seed, anchor: {"notes": [(1, "bob", "hi")]},
                  generate_scenarios=lambda w: [Scenario(
                      id="count", world="counter", split="dev", role="clerk", category="count", request="Count.",
                      goal_checks=(check,), hard_rules=(), turn_limit=4,
                      reference=Solution("reference", (ToolCall("finish", {"message": "done"}),)), wrong=())])
    monkeypatch.setattr(sqlite_backend, "APP_STATEMENT_TIMEOUT_S", 0.5)
    monkeypatch.setattr(postgres_backend, "APP_STATEMENT_TIMEOUT_S", 0.5)
    env = RehearsalEnv("count", world, **backend)
    try:
        env.reset(seed=0)
        assert _step(env, "count_to", n=10)[0]["result"] == 10
        started = time.process_time()  # CPU, not wall time: a loaded machine stretches the wall, not the count
        result, info = _step(env, "count_to", n=2**62)
        assert time.process_time() - started < 0.5 + 5.0  # stopped at its deadline (a generous bound)
        assert info["status"] == "error" and "longer than 0.5 s" in result["error"]
        assert _finish(env).outcome is Outcome.VERIFIED and [c.tool for c in env.episode.tool_crashes] == ["count_to"]
    finally:
        env.close()
