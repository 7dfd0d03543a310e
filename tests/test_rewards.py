"""Reward components and the benchmark / rl profiles (the worked example of docs/rewards.md included)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from rowsummer import RowSummer

import rehearsal_env
from rehearsal_env.agents import ScriptedAgent
from rehearsal_env.env import RehearsalEnv
from rehearsal_env.rewards import (
    COMPONENTS,
    EXTERNAL_MODE,
    ComponentInputs,
    Components,
    ProfileError,
    TurnInput,
    UnknownProfileError,
    apply_profile,
    components_of,
    compute_components,
    evaluate,
    inputs_from_episode,
    load_profile,
    profile_names,
    runtime_grounding,
    score,
)
from rehearsal_env.scenarios import Scenario, Solution, ToolCall
from rehearsal_env.verdict import Verdict
from rehearsal_env.worlds import World, load_world

Policy = Callable[[str, dict[str, Any]], str]


@pytest.fixture(scope="module")
def analytics() -> World:
    return load_world("analytics")


def play(world: World, scenario: Scenario, policy: Policy, profile: str | None = None
         ) -> tuple[RehearsalEnv, Verdict, float]:
    env = RehearsalEnv(scenario, world, reward_profile=profile)
    observation, info = env.reset(seed=0)
    while True:
        observation, reward, terminated, truncated, info = env.step(policy(observation, info))
        if terminated or truncated:
            return env, info["verdict"], reward


def script(*calls: ToolCall) -> ScriptedAgent:
    return ScriptedAgent(Solution("test", tuple(calls)))


def with_tokens(policy: Policy, per_turn: int) -> Policy:
    """The policy, reporting ``per_turn`` tokens with every action (a hosted agent)."""
    def act(observation: str, info: dict[str, Any]) -> str:
        action = json.loads(policy(observation, info))
        return json.dumps({**action, "usage": {"tokens": per_turn}})
    return act


def raw_sql(scenario: Scenario) -> str:
    """The raw-rows query of the scenario's sum-in-model wrong solution (without its ORDER BY)."""
    sql = str(scenario.solution("wrong:sum-in-model").calls[0].args["sql"])
    return sql.removesuffix(" ORDER BY 1")


def answer_of(scenario: Scenario) -> str:
    return str(scenario.reference.calls[-1].args["answer"])


# -- profiles ---------------------------------------------------------------------------------------
class TestUnknownRewardProfileIsRejected:
    def test_load_names_the_known_profiles(self) -> None:
        with pytest.raises(UnknownProfileError) as err:
            load_profile("leaderboard")
        message = str(err.value)
        assert "'leaderboard'" in message and "benchmark" in message and "rl" in message

    def test_score_and_env_reject_it(self, analytics: World) -> None:
        scenario = analytics.scenario("revenue-0002")
        env, verdict, _ = play(analytics, scenario, ScriptedAgent(scenario.reference))
        with pytest.raises(UnknownProfileError, match="known profiles: benchmark, rl"):
            score("nope", env.episode, verdict)
        with pytest.raises(UnknownProfileError):
            play(analytics, scenario, ScriptedAgent(scenario.reference), profile="nope")

    def test_a_path_is_not_a_profile_name(self) -> None:
        with pytest.raises(UnknownProfileError):
            load_profile("../profiles/rl")


class TestProfileFiles:
    def test_both_profiles_load_with_a_version(self) -> None:
        assert {"benchmark", "rl"} <= set(profile_names())
        bench, rl = load_profile("benchmark"), load_profile("rl")
        assert bench.reward_version == "benchmark/1" and rl.reward_version == "rl/1"
        assert "safety" in bench.weights and "safety" not in bench.gates
        assert rl.gates["safety"] == 1.0 and "safety" not in rl.weights
        assert max(rl.weights, key=lambda n: rl.weights[n]) == "correctness"
        assert abs(sum(bench.weights.values()) - 1.0) < 1e-9

    @pytest.mark.parametrize("text, fragment", [
        ('name = "x"\nreward_version = "x/1"\n[weights]\nluck = 1.0\n', "unknown component"),
        ('name = "x"\nreward_version = "x/1"\n[weights]\ncorrectness = 2\n', "in [0, 1]"),
        ('name = "y"\nreward_version = "x/1"\n[weights]\ncorrectness = 1\n', "file's stem"),
        ('name = "x"\n[weights]\ncorrectness = 1\n', "reward_version"),
        ('name = "x"\nreward_version = "x/1"\nweight = 1\n', "unknown key"),
    ])
    def test_malformed_files_are_refused(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         text: str, fragment: str) -> None:
        (tmp_path / "x.toml").write_text(text)
        monkeypatch.setenv("REHEARSAL_PROFILES_DIR", str(tmp_path))
        with pytest.raises(ProfileError, match=re.escape(fragment)):
            load_profile("x")


class TestApplyProfile:
    def comps(self, **values: float | None) -> Components:
        base: dict[str, float | None] = {"correctness": 1.0, "method": 1.0, "grounding": 1.0, "actions": 1.0,
                                         "scope": None, "safety": 1.0, "efficiency": 1.0, "work": 1.0}
        return Components.from_values({**base, **values})

    def test_unsafe_is_worth_nothing_under_rl_but_weighted_under_benchmark(self) -> None:
        unsafe = self.comps(safety=0.0)
        rl = apply_profile(load_profile("rl"), unsafe)
        assert rl.reward == 0.0 and rl.gated_by == ("safety",)
        assert apply_profile(load_profile("benchmark"), unsafe).reward == pytest.approx(0.8 / 0.9, abs=1e-6)

    def test_unmeasured_is_left_out_not_zero(self) -> None:
        external = apply_profile(load_profile("benchmark"), self.comps(efficiency=None))
        assert external.reward == 1.0 and external.caveats == (EXTERNAL_MODE,)
        assert apply_profile(load_profile("benchmark"), self.comps(efficiency=0.0)).reward == 0.944444  # .85/.9

    def test_no_work_scores_zero_under_both(self) -> None:
        for name in ("benchmark", "rl"):
            assert apply_profile(load_profile(name), self.comps(work=0.0)).reward == 0.0

    def test_components_round_trip_through_stored_values(self) -> None:
        c = self.comps(method=0.0, grounding=0.0, efficiency=0.5)
        stored = {name: value for name, value in c.values().items()}
        rebuilt = Components.from_values(json.loads(json.dumps(stored)))
        for name in ("benchmark", "rl"):
            assert apply_profile(load_profile(name), rebuilt) == apply_profile(load_profile(name), c)
        with pytest.raises(ValueError, match="unknown reward component"):
            Components.from_values({"vibes": 1.0})


# -- the worked example of docs/rewards.md ------------------------------------------------------------
class TestWorkedExample:
    """``analytics/revenue-0002`` played two ways by a hosted agent reporting 3,000 tokens a turn."""

    def test_careful_analyst(self, analytics: World) -> None:
        s = analytics.scenario("revenue-0002")
        agent = with_tokens(script(ToolCall("list_tables"), ToolCall("describe_table", {"table": "orders"}),
                                   *s.reference.calls), 3000)
        env, verdict, reward = play(analytics, s, agent, profile="benchmark")
        c = components_of(env.episode, verdict)
        assert c.values() == {"correctness": 1.0, "method": 1.0, "grounding": 1.0, "actions": 1.0,
                              "scope": None, "safety": 1.0, "efficiency": 0.888889, "work": 1.0}
        assert reward == 0.993827
        assert evaluate("rl", env.episode, verdict).reward == 0.983333
        assert evaluate("rl", env.episode, verdict).caveats == ()

    def test_model_adds_up_the_rows(self, analytics: World) -> None:
        s = analytics.scenario("revenue-0002")
        env, verdict, reward = play(analytics, s, with_tokens(RowSummer(raw_sql(s), money=True), 3000),
                                    profile="benchmark")
        assert verdict.outcome.value == "verified"  # the sum is right: the outcome cannot see how
        c = components_of(env.episode, verdict)
        assert c.values() == {"correctness": 1.0, "method": 0.0, "grounding": 0.0, "actions": 1.0,
                              "scope": None, "safety": 1.0, "efficiency": 0.962963, "work": 1.0}
        assert reward == 0.77572
        rl = evaluate("rl", env.episode, verdict)
        assert rl.reward == 0.0 and set(rl.gated_by) == {"grounding", "method"}


# -- components on real episodes ---------------------------------------------------------------------
class TestWrongMethod:
    def test_correct_answer_by_the_wrong_method_scores_between_zero_and_full(self, analytics: World) -> None:
        s = analytics.scenario("revenue-0002")
        ref_env, ref_verdict, _ = play(analytics, s, ScriptedAgent(s.reference))
        env, verdict, _ = play(analytics, s, RowSummer(raw_sql(s), money=True))
        full = score("benchmark", ref_env.episode, ref_verdict)
        assert full == 1.0 and 0.0 < score("benchmark", env.episode, verdict) < full  # type: ignore[operator]

    def test_listing_rows_and_counting_them_is_grounded_but_not_aggregated(self, analytics: World) -> None:
        s = analytics.scenario("channel-orders-0002")
        where = str(s.answer_sql).split(" WHERE ", 1)[1]
        env, verdict, _ = play(analytics, s, script(
            ToolCall("run_sql", {"sql": f"SELECT id FROM orders WHERE {where}"}),
            ToolCall("finish", {"message": "Counted.", "answer": answer_of(s)})))
        c = components_of(env.episode, verdict)
        assert (c.correctness, c.grounding, c.method) == (1.0, 1.0, 0.0)
        assert 0.0 < score("benchmark", env.episode, verdict) < 1.0  # type: ignore[operator]
        assert score("rl", env.episode, verdict) == 0.0


class TestGrounding:
    def test_a_dump_grounds_nothing(self, analytics: World) -> None:
        s = analytics.scenario("top-region-0001")
        env, verdict, _ = play(analytics, s, script(
            ToolCall("run_sql", {"sql": "SELECT c.*, r.name FROM customers c JOIN regions r ON r.id = c.region_id"}),
            ToolCall("finish", {"message": "Here.", "answer": answer_of(s)})))
        c = components_of(env.episode, verdict)
        assert c.correctness == 1.0 and c.grounding == 0.0 and "dump" in dict(c.notes)["grounding"]
        assert score("rl", env.episode, verdict) == 0.0

    def test_listing_every_label_does_not_ground_a_choice(self, analytics: World) -> None:
        s = analytics.scenario("top-region-0001")
        env, verdict, _ = play(analytics, s, script(ToolCall("run_sql", {"sql": "SELECT name FROM regions"}),
                                                    ToolCall("finish", {"message": "x", "answer": answer_of(s)})))
        assert components_of(env.episode, verdict).grounding == 0.0

    def test_an_echoed_literal_is_not_evidence(self, analytics: World) -> None:
        s = analytics.scenario("revenue-0002")
        env, verdict, _ = play(analytics, s, script(
            ToolCall("run_sql", {"sql": f"SELECT MAX({answer_of(s)}) FROM orders"}),
            ToolCall("finish", {"message": "x", "answer": answer_of(s)})))
        c = components_of(env.episode, verdict)
        assert c.correctness == 1.0 and c.grounding == 0.0 and c.method == 0.0

    def test_the_runtime_guard_fails_open(self) -> None:
        broken = (TurnInput("run_sql", "{not json", "ok", "{not json either"),)
        assert runtime_grounding(broken, ["run_sql"], "42") is True
        grounded = (TurnInput("run_sql", '{"tool": "run_sql", "args": {"sql": "SELECT COUNT(*) FROM t"}}', "ok",
                              json.dumps({"tool_result": {"status": "ok", "result": {"rows": [[42]]}}})),)
        assert runtime_grounding(grounded, ["run_sql"], "42") is True
        assert runtime_grounding(grounded, ["run_sql"], "43") is False


class TestEfficiencyAndCaveats:
    def test_external_mode_leaves_efficiency_unmeasured_with_the_caveat(self, analytics: World) -> None:
        s = analytics.scenario("revenue-0002")
        env, verdict, _ = play(analytics, s, ScriptedAgent(s.reference))
        assert verdict.metrics.tokens is None
        result = evaluate("benchmark", env.episode, verdict)
        assert result.components.efficiency is None and EXTERNAL_MODE in result.caveats
        assert EXTERNAL_MODE in evaluate("rl", env.episode, verdict).caveats

    def test_tokens_over_budget_lower_efficiency(self, analytics: World) -> None:
        s = analytics.scenario("revenue-0002")
        frugal = play(analytics, s, with_tokens(ScriptedAgent(s.reference), 100))
        lavish = play(analytics, s, with_tokens(ScriptedAgent(s.reference), 40_000))
        assert components_of(frugal[0].episode, frugal[1]).efficiency == 1.0
        assert components_of(lavish[0].episode, lavish[1]).efficiency == pytest.approx((1 + 1 + 0.1) / 3, abs=1e-6)


def inputs(**overrides: Any) -> ComponentInputs:
    base: dict[str, Any] = dict(
        scenario="s", question=False, method=None, answer_tolerance=0.0, required_actions=(),
        forbidden_actions=(), scope=("orders",), role_tools=("get_order", "update_order", "finish"),
        world_tools=("get_order", "update_order", "grant_credit"), write_tools=("update_order", "grant_credit"),
        turn_budget=4, tool_call_budget=4, token_budget=8000, outcome="verified", goal_passed=(True,),
        rules_passed=(True,), duplicate_effects=0, turns=3, tool_calls=3, tokens=None, trace=(), changed=())
    return ComponentInputs(**{**base, **overrides})


def turn(tool: str | None, status: str = "ok", **args: Any) -> TurnInput:
    name = tool or "grant_credit"
    return TurnInput(tool, json.dumps({"tool": name, "args": args}), status, json.dumps({"tool_result": None}))


class TestActionsAndScope:
    def test_required_order_forbidden_role_and_repeats(self) -> None:
        trace: Sequence[TurnInput] = (turn("get_order", order_id=1), turn("update_order", order_id=1))
        ok = compute_components(inputs(trace=tuple(trace), required_actions=("get_order<update_order",),
                                       forbidden_actions=("grant_credit",)))
        assert ok.actions == 1.0
        late = compute_components(inputs(trace=tuple(reversed(trace)), required_actions=("get_order<update_order",)))
        assert late.actions == pytest.approx(2 / 3)
        outside = compute_components(inputs(trace=(turn(None, "rejected", customer_id=1), *trace)))
        assert outside.actions == 0.5 and "grant_credit" in dict(outside.notes)["actions"]
        repeated = compute_components(inputs(trace=(*trace, turn("update_order", order_id=1))))
        assert repeated.actions == 0.5
        refused_then_sent = compute_components(inputs(trace=(turn("update_order", "error", order_id=1), *trace)))
        assert refused_then_sent.actions == 1.0

    def test_scope_by_table_and_by_row(self) -> None:
        assert compute_components(inputs(changed=(("orders", "updated", 7),))).scope == 1.0
        assert compute_components(inputs(changed=(("credits", "inserted", 1),))).scope == 0.0
        assert compute_components(inputs(changed=(("final_answers", "inserted", 1),))).scope == 1.0
        row = inputs(scope=("orders#7",), changed=(("orders", "updated", 8),))
        assert compute_components(row).scope == 0.0
        assert compute_components(inputs(scope=(), changed=())).scope is None

    def test_inputs_survive_json_and_give_the_same_components(self, analytics: World) -> None:
        s = analytics.scenario("top-category-0001")
        env, verdict, _ = play(analytics, s, ScriptedAgent(s.reference))
        live = inputs_from_episode(env.episode, verdict)
        stored = ComponentInputs.from_dict(json.loads(json.dumps(live.to_dict())))
        assert stored == live and compute_components(stored) == compute_components(live)


def test_the_env_reward_is_the_profile_reward(analytics: World) -> None:
    env = rehearsal_env.make("analytics/units-per-order-0001", reward_profile="rl")
    observation, info = env.reset(seed=0)
    agent = ScriptedAgent(env.scenario.reference)
    rewards = []
    while True:
        observation, reward, terminated, truncated, info = env.step(agent(observation, info))
        rewards.append(reward)
        if terminated or truncated:
            break
    assert rewards[-1] == 1.0 and info["outcome"] == "verified"
    assert set(COMPONENTS) == set(components_of(env.episode, info["verdict"]).values())


def test_components_recomputed_from_stored_records_match(tmp_path: Path) -> None:
    """A run's Parquet records alone (no database) give back every stored component."""
    from rehearsal_env.cli import main
    from rehearsal_env.records import inputs_from_record, read_records

    shop = load_world("shop")
    picks = [s.id for s in shop.scenarios("dev")][::6]
    args = ["run", "--world", "shop", "--agent", "wrong:repeat-write", "--profile", "rl", "--out", str(tmp_path)]
    assert main(args + [a for sid in picks for a in ("--scenario", sid)]) == 0
    records = read_records(tmp_path)
    assert records and any(r.changes for r in records)
    for record in records:
        stored = {c.name: c.value for c in record.reward_components}
        assert compute_components(inputs_from_record(record)).values() == stored, record.scenario
