"""The analytics world: seeded warehouse, read-only SQL console, question scenarios with SQL oracles."""

from __future__ import annotations

import json
from collections import Counter
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from rehearsal_env.agents import ScriptedAgent, make_agent
from rehearsal_env.backends import Database, digest, open_database
from rehearsal_env.checks import validate_check_sql
from rehearsal_env.env import RehearsalEnv
from rehearsal_env.scenarios import Scenario, Solution, ToolCall
from rehearsal_env.tools import ToolFailed
from rehearsal_env.verdict import Verdict
from rehearsal_env.worlds import World, load_world
from rehearsal_env.worlds.analytics import data
from rehearsal_env.worlds.analytics._readonly import read_only_query
from rehearsal_env.worlds.analytics.tools import MAX_ROWS, aggregates


@pytest.fixture(scope="module")
def world() -> World:
    return load_world("analytics")


@pytest.fixture(scope="module")
def db(world: World) -> Database:
    return open_database(world)


def play(world: World, db: Database, scenario: Scenario, agent: Any) -> tuple[RehearsalEnv, Verdict]:
    env = RehearsalEnv(scenario, world, database=db)
    observation, info = env.reset(seed=0)
    while True:
        observation, _, terminated, truncated, info = env.step(agent(observation, info))
        if terminated or truncated:
            return env, info["verdict"]


def step(world: World, db: Database, scenario_id: str, *calls: ToolCall) -> list[dict[str, Any]]:
    """The tool results of ``calls`` played in one episode (the last one is not ended)."""
    env = RehearsalEnv(world.scenario(scenario_id), world, database=db)
    env.reset(seed=0)
    return [json.loads(env.step(c.to_action())[0])["tool_result"] for c in calls]


class TestData:
    def test_tables_and_volume(self, world: World) -> None:
        rows = world.seed_rows()
        app = [t for t in world.tables if t.name not in ("service_requests", "final_answers")]
        assert len(app) >= 6
        assert sum(len(rows[t.name]) for t in app) > 50_000
        assert len(rows["orders"]) == data.N_ORDERS

    def test_deterministic_from_seed_and_anchor(self, world: World) -> None:
        again = data.generate(world.seed, world.data_anchor)
        assert again == {k: list(v) for k, v in world.seed_rows().items()}
        assert data.generate(world.seed + 1, world.data_anchor)["orders"] != again["orders"]

    def test_dated_back_from_the_anchor_and_consistent(self, world: World) -> None:
        rows = world.seed_rows()
        anchor = world.data_anchor.isoformat()
        assert max(o[2] for o in rows["orders"]) <= anchor
        assert max(s[4] for s in rows["shipments"]) <= anchor
        assert all(s[6] is None or s[6] <= anchor for s in rows["shipments"])
        signup = {c[0]: c[5] for c in rows["customers"]}
        assert all(signup[o[1]] <= o[2] for o in rows["orders"])
        totals = Counter[int]()
        for item in rows["order_items"]:
            totals[item[1]] += item[3] * item[4] - item[5]
        assert all(totals[o[0]] == o[5] for o in rows["orders"])
        assert all(isinstance(o[5], int) for o in rows["orders"])

    def test_moving_the_anchor_moves_data_and_questions(self, world: World) -> None:
        later = world.with_anchor(date(2025, 9, 30))
        assert max(o[2] for o in later.seed_rows()["orders"]) <= "2025-09-30"
        assert "2025-09-30" in later.scenario("revenue-0001").request
        assert "2025-06-30" in world.scenario("revenue-0001").request


class TestSuite:
    def test_size_splits_and_declarations(self, world: World) -> None:
        suite = world.scenarios()
        assert len(suite) >= 40
        assert {s.split for s in suite} == {"train", "dev", "holdout"}
        for s in suite:
            assert s.answer_sql is not None and s.method in ("aggregate", "lookup"), s.id
            validate_check_sql(s.answer_sql, name=s.id)
            assert s.scope == () and s.category == "question"
        assert Counter(s.method for s in suite)["lookup"] == 15

    def test_reference_verified_wrong_and_null_not(self, world: World, db: Database) -> None:
        failures = []
        for s in world.scenarios():
            for name in ("reference", "null", *(w.name for w in s.wrong)):
                _, verdict = play(world, db, s, make_agent(name, s))
                wanted = {"reference": "verified", "wrong:leak-email": "rule_violated"}.get(name, "not_achieved")
                if verdict.outcome.value != wanted:
                    failures.append(f"{s.id} {name}: {verdict.outcome.value}, wanted {wanted} {verdict.reason or ''}")
        assert not failures, "\n".join(failures)

    def test_every_aggregate_reference_runs_an_aggregating_query(self, world: World) -> None:
        for s in world.scenarios():
            first = s.reference.calls[0]
            if s.method == "aggregate":
                assert first.tool == "run_sql" and aggregates(str(first.args["sql"])), s.id

    def test_top_n_questions_have_a_single_winner(self, world: World, db: Database) -> None:
        for s in world.scenarios():
            sql = str(s.reference.calls[0].args.get("sql", ""))
            if s.id.startswith("top-"):
                top = db.query(sql)
                assert top[0][1] != top[1][1], s.id


class TestAnswerCheck:
    @pytest.mark.parametrize("answer, verdict", [
        ("{ref}", "verified"), (" {ref} ", "verified"), ("{off}", "verified"), ("{far}", "not_achieved"),
        ("about {ref}", "not_achieved"), ("$ {ref}", "not_achieved"), ("1.2.3", "not_achieved"),
        ("-", "not_achieved"), ("", "not_achieved"),
    ])
    def test_money_within_a_cent(self, world: World, db: Database, answer: str, verdict: str) -> None:
        s = world.scenario("revenue-0002")
        ref = float(s.reference.calls[-1].args["answer"])
        text = answer.format(ref=f"{ref:.2f}", off=f"{ref + 0.009:.3f}", far=f"{ref + 0.02:.2f}")
        _, v = play(world, db, s, ScriptedAgent(Solution("t", (ToolCall("finish", {"message": "x", "answer": text}),))))
        assert v.outcome.value == verdict and not v.reason

    def test_text_is_case_insensitive(self, world: World, db: Database) -> None:
        s = world.scenario("top-category-0001")
        answer = str(s.reference.calls[-1].args["answer"]).upper()
        _, v = play(world, db, s, ScriptedAgent(Solution("t", (ToolCall("finish", {"message": "x",
                                                                                     "answer": answer}),))))
        assert v.outcome.value == "verified"

    def test_the_latest_answer_counts(self, world: World, db: Database) -> None:
        s = world.scenario("orders-count-0001")
        env = RehearsalEnv(s, world, database=db)
        env.reset(seed=0)
        env.step(ToolCall("finish", {"message": "x", "answer": "1"}).to_action())
        assert env.episode.verdict is not None and env.episode.verdict.outcome.value == "not_achieved"


class TestRunSql:
    def test_rows_columns_and_the_aggregated_flag(self, world: World, db: Database) -> None:
        (agg, raw) = step(world, db, "revenue-0001",
                          ToolCall("run_sql", {"sql": "SELECT channel, COUNT(*) AS n FROM orders GROUP BY channel "
                                                      "ORDER BY channel"}),
                          ToolCall("run_sql", {"sql": "SELECT id FROM orders WHERE id <= 3 ORDER BY id"}))
        assert agg["status"] == "ok" and agg["result"]["columns"] == ["channel", "n"]
        assert [r[0] for r in agg["result"]["rows"]] == ["phone", "store", "web"] and agg["result"]["aggregated"]
        assert raw["result"]["rows"] == [[1], [2], [3]] and raw["result"]["aggregated"] is False

    def test_results_are_cut_with_a_note(self, world: World, db: Database) -> None:
        (cut,) = step(world, db, "revenue-0001", ToolCall("run_sql", {"sql": "SELECT * FROM orders"}))
        result = cut["result"]
        assert result["truncated"] and result["row_count"] == MAX_ROWS and "aggregate in SQL" in result["note"]

    @pytest.mark.parametrize("sql, fragment", [
        ("DELETE FROM orders", "read-only"),
        ("SELECT 1; DELETE FROM orders", "more than one statement"),
        ("WITH x AS (SELECT 1) INSERT INTO regions (name) SELECT 'y'", "INSERT"),
        ("PRAGMA table_info(orders)", "PRAGMA"),
        ("SELECT nope FROM orders", "no such column"),
    ])
    def test_refusals_and_errors_are_the_agents_not_the_environments(
            self, world: World, db: Database, sql: str, fragment: str) -> None:
        env = RehearsalEnv(world.scenario("revenue-0001"), world, database=db)
        env.reset(seed=0)
        before = digest(db)
        result = json.loads(env.step(ToolCall("run_sql", {"sql": sql}).to_action())[0])["tool_result"]
        assert result["status"] == "error" and fragment.lower() in result["error"].lower()
        assert env.episode.verdict is None and digest(db) == before

    def test_a_slow_query_is_stopped(self, db: Database) -> None:
        slow = "SELECT COUNT(*) FROM order_items a, order_items b, order_items c"
        with pytest.raises(ToolFailed, match="longer than"):
            read_only_query(db, slow, max_rows=10, timeout_s=0.05)
        assert read_only_query(db, "SELECT COUNT(*) FROM regions", max_rows=10, timeout_s=5).rows == ((6,),)

    def test_the_store_manager_has_no_console(self, world: World, db: Database) -> None:
        (result,) = step(world, db, "order-status-0001", ToolCall("run_sql", {"sql": "SELECT 1"}))
        assert result["status"] == "rejected" and "not available to role 'store_manager'" in result["error"]


def test_cli_run_dev_verifies_every_episode(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            world: World) -> None:
    from rehearsal_env.cli import main

    assert main(["run", "--world", "analytics", "--agent", "reference", "--split", "dev",
                 "--out", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    dev = len(world.scenarios("dev"))
    assert summary["episodes"] == dev and summary["verified"] == dev
