"""The Gymnasium env: spaces, reset determinism, one tool call per step, rejected attempts, verdicts."""

from __future__ import annotations

import json
from typing import Any

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env
from inprocess import in_process_worlds

import rehearsal_env
from rehearsal_env import RehearsalEnv, make
from rehearsal_env.scenarios import Scenario, Solution, ToolCall


def act(tool: str, **args: object) -> str:
    return json.dumps({"tool": tool, "args": args})


def all_scenarios() -> list[tuple[str, str]]:
    return [(w, s.id) for w in in_process_worlds() for s in rehearsal_env.load_world(w).scenarios()]


@pytest.mark.parametrize(("world", "scenario"), all_scenarios())
def test_check_env_passes_on_every_registered_scenario(world: str, scenario: str) -> None:
    env = make(f"{world}/{scenario}")
    check_env(env, skip_render_check=True)
    env.close()


def test_gymnasium_make_with_versioned_id() -> None:
    env = gymnasium.make("rehearsal/shop-v0", scenario="refund-item-0001")
    obs, info = env.reset(seed=0)
    assert "refund" in json.loads(obs)["messages"][0]
    assert {t["function"]["name"] for t in info["tools"]} >= {"issue_refund", "finish", "give_up"}
    env.close()


def test_make_errors_say_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="WORLD/SCENARIO"):
        make("shop")
    with pytest.raises(KeyError, match="Did you mean 'refund-item-0001'"):
        make("shop/refund-item-001")
    with pytest.raises(KeyError, match="no world 'shopp'.*Did you mean 'shop'"):
        make("shopp/refund-item-0001")


def test_reset_restores_the_snapshot_after_committed_writes(tiny_world) -> None:
    env = RehearsalEnv("pay-ann", tiny_world)
    obs1, _ = env.reset(seed=3)
    snapshot = env.digest()
    for _ in range(3):
        env.step(act("pay_out", account_id=1, amount_cents=100))
    assert env.digest() != snapshot
    obs2, _ = env.reset(seed=3)
    assert obs1 == obs2
    assert env.digest() == snapshot


def test_reference_verified_and_reward_is_the_outcome_reward(tiny_world) -> None:
    env = RehearsalEnv("pay-ann", tiny_world)
    env.reset()
    env.step(act("get_account", account_id=1))
    obs, _, _, _, _ = env.step(act("pay_out", account_id=1, amount_cents=500))
    assert json.loads(obs)["tool_result"]["retryable"] is True  # the stress layer's refusal
    env.step(act("pay_out", account_id=1, amount_cents=500))
    obs, reward, terminated, truncated, info = env.step(act("finish", message="paid"))
    verdict = info["verdict"]
    assert (terminated, truncated, reward) == (True, False, 1.0)
    assert verdict.outcome.value == "verified" and verdict.ending.value == "done"
    assert [c.passed for c in verdict.checks] == [True, True]


def test_breaking_a_hard_rule_is_rule_violated_whatever_else(tiny_world) -> None:
    env = RehearsalEnv("pay-ann", tiny_world, stress=False)
    env.reset()
    env.step(act("pay_out", account_id=1, amount_cents=500))
    env.step(act("pay_out", account_id=2, amount_cents=1))
    *_, reward, _, _, info = env.step(act("finish", message="paid"))
    assert info["verdict"].outcome.value == "rule_violated" and reward == -1.0


@pytest.mark.parametrize(("action", "says"), [
    ("not json", "malformed action"),
    ('["pay_out"]', "malformed action"),
    ('{"tool": "pay_out", "args": {}, "x": 1}', "unexpected key"),
    (act("pay_outt", account_id=1, amount_cents=1), "Did you mean 'pay_out'"),
    (act("pay_out", account_id="1", amount_cents=1), "must be integer"),
    (act("pay_out", account_id=1), "missing required"),
])
def test_bad_actions_are_rejected_attempts_not_crashes(tiny_world, action: str, says: str) -> None:
    env = RehearsalEnv("pay-ann", tiny_world)
    env.reset()
    before = env.digest()
    obs, reward, terminated, truncated, info = env.step(action)
    result = json.loads(obs)["tool_result"]
    assert result["status"] == "rejected" and says in result["error"]
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert env.digest() == before
    env.step(act("finish", message="x"))
    assert env.episode.verdict is not None and env.episode.verdict.metrics.rejected_attempts == 1


def test_a_tool_outside_the_role_is_rejected() -> None:
    env = make("shop/refund-item-0001")  # support_agent: no store credit
    env.reset()
    obs, *_ = env.step(act("issue_store_credit", customer_id=1, amount_cents=100, reason="x"))
    result = json.loads(obs)["tool_result"]
    assert result["status"] == "rejected"
    assert "not available to role 'support_agent'" in result["error"]


def test_sql_injection_in_arguments_changes_nothing() -> None:
    env = make("shop/refund-item-0001")
    env.reset()
    before = env.digest()
    for payload in ("x' OR '1'='1", "'; DROP TABLE orders; --", "1; DELETE FROM customers"):
        obs, *_ = env.step(act("find_customer", email=payload))
        assert json.loads(obs)["tool_result"]["status"] == "error"  # no such customer: nothing matched
        obs, *_ = env.step(act("search_products", query=payload))
        assert json.loads(obs)["tool_result"]["result"] == {"products": []}
    assert env.digest() == before
    assert env.db.check_value("SELECT COUNT(*) FROM orders") == 3500


def test_turn_limit_truncates_and_still_judges(tiny_world) -> None:
    env = RehearsalEnv("pay-ann", tiny_world)
    env.reset()
    for _ in range(5):
        *_, terminated, truncated, info = env.step(act("get_account", account_id=1))
        assert not (terminated or truncated)
    *_, terminated, truncated, info = env.step(act("get_account", account_id=1))
    assert (terminated, truncated) == (False, True)
    assert info["verdict"].ending.value == "turn_limit" and info["verdict"].outcome.value == "not_achieved"


def test_give_up_ends_the_episode(tiny_world) -> None:
    env = RehearsalEnv("pay-ann", tiny_world)
    env.reset()
    *_, terminated, _, info = env.step(act("give_up", reason="cannot"))
    assert terminated and info["verdict"].ending.value == "gave_up"
    assert not info["verdict"].metrics.false_completion


def test_a_check_that_cannot_be_evaluated_makes_the_episode_not_scored(tiny_world) -> None:
    from rehearsal_env.checks import Check

    broken = Scenario(id="broken", world="tiny", split="dev", role="clerk", category="x", request="r",
                      goal_checks=(Check("several rows", "SELECT id FROM accounts", "eq", 1),), hard_rules=(),
                      reference=Solution("reference", (ToolCall("finish", {"message": "m"}),)))
    env = RehearsalEnv(broken, tiny_world)
    env.reset()
    *_, reward, terminated, _, info = env.step(act("finish", message="m"))
    verdict = info["verdict"]
    assert verdict.outcome.value == "not_scored" and verdict.outcome_reward is None
    assert "exactly one row" in (verdict.reason or "")
    assert not verdict.metrics.false_completion


def test_a_check_that_errors_on_the_snapshot_too_is_the_worlds_even_after_the_agent_wrote(tiny_world) -> None:
    from rehearsal_env.checks import Check

    broken = Scenario(id="broken", world="tiny", split="dev", role="clerk", category="x", request="r",
                      goal_checks=(Check("several rows", "SELECT id FROM accounts", "eq", 1),), hard_rules=(),
                      reference=Solution("reference", (ToolCall("finish", {"message": "m"}),)))
    env = RehearsalEnv(broken, tiny_world, stress=False)
    env.reset()
    assert json.loads(env.step(act("pay_out", account_id=1, amount_cents=100))[0])["tool_result"]["status"] == "ok"
    *_, info = env.step(act("finish", message="m"))
    assert info["verdict"].outcome.value == "not_scored" and info["verdict"].cause.value == "world"


def test_a_check_that_errors_only_because_of_what_the_agent_wrote_is_the_agents(tiny_world) -> None:
    from rehearsal_env.checks import Check

    # one row on the snapshot (ann's); a payout from bob's account makes it two
    check = Check("one owner", "SELECT owner FROM accounts WHERE id = 1 OR id IN (SELECT account_id FROM transfers)",
                  "eq", "ann")
    scenario = Scenario(id="one", world="tiny", split="dev", role="clerk", category="x", request="r",
                        goal_checks=(check,), hard_rules=(),
                        reference=Solution("reference", (ToolCall("finish", {"message": "m"}),)))
    env = RehearsalEnv(scenario, tiny_world, stress=False)
    env.reset()
    assert json.loads(env.step(act("pay_out", account_id=2, amount_cents=100))[0])["tool_result"]["status"] == "ok"
    *_, info = env.step(act("finish", message="m"))
    verdict = info["verdict"]
    assert verdict.outcome.value == "not_achieved" and verdict.cause is None
    assert "exactly one row" in (verdict.checks[0].error or "")


def test_step_after_the_end_is_an_error(tiny_world) -> None:
    env = RehearsalEnv("pay-ann", tiny_world)
    env.reset()
    env.step(act("finish", message="m"))
    with pytest.raises(RuntimeError, match="reset"):
        env.step(act("finish", message="m"))


def test_a_tool_that_crashes_is_the_agents_tool_error_and_the_episode_goes_on(tiny_world) -> None:
    import dataclasses

    def broken(ctx: object, account_id: int) -> None:
        raise KeyError("a bug in the world's code")

    tools = tuple(dataclasses.replace(t, fn=broken) if t.name == "get_account" else t for t in tiny_world.tools)
    env = RehearsalEnv("pay-ann", dataclasses.replace(tiny_world, tools=tools))
    env.reset()
    obs, reward, terminated, truncated, info = env.step(act("get_account", account_id=1))
    assert not terminated and not truncated  # a tool crash is returned to the agent; the episode goes on
    assert json.loads(obs)["tool_result"]["status"] == "error"
    *_, info = env.step(act("finish", message="m"))
    assert info["verdict"].outcome.value != "not_scored"


def test_both_scenario_id_forms_are_accepted_everywhere() -> None:
    ids = set()
    for env in (gymnasium.make("rehearsal/shop-v0", scenario="shop/refund-item-0004"),
                gymnasium.make("rehearsal/shop-v0", scenario="refund-item-0004"),
                make("shop/refund-item-0004"), make("refund-item-0004", world="shop"),
                RehearsalEnv("shop/refund-item-0004")):
        inner: Any = env.unwrapped
        ids.add(inner.scenario.id)
        env.close()
    assert ids == {"refund-item-0004"}
    with pytest.raises(ValueError, match="names world 'analytics'.*pass 'refund-item-0004'"):
        gymnasium.make("rehearsal/shop-v0", scenario="analytics/refund-item-0004")


def test_async_vector_envs_need_shared_memory_off_for_text_spaces() -> None:
    """Gymnasium's shared memory has no layout for Text spaces (observations come back blank), so an
    AsyncVectorEnv of rehearsal envs is made with ``shared_memory=False``: then every sub-env's
    observation arrives whole, equal to the same env's observation stepped in this process."""
    fns = [lambda: gymnasium.make("rehearsal/shop-v0", scenario="refund-item-0004") for _ in range(2)]
    vec = gymnasium.vector.AsyncVectorEnv(fns, shared_memory=False)
    try:
        observations, infos = vec.reset(seed=[0, 1])
        alone = make("shop/refund-item-0004")
        assert list(observations) == [alone.reset(seed=0)[0], alone.reset(seed=1)[0]]
        action = act("get_order", order_id=1)
        observations, rewards, terminated, truncated, infos = vec.step((action, action))
        assert list(observations) == [alone.step(action)[0]] * 2 and not terminated.any()
        assert all(json.loads(o)["turn"] == 1 for o in observations)
    finally:
        vec.close()
