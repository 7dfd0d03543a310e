"""Per-turn rewards from the checks (the ``rl_turns`` profile): potential-based shaping on the goal checks' share.

The turns' rewards must sum to the end reward the same episode gets under ``rl`` (the shaping telescopes, so the
best policy is unchanged), an undo-and-redo loop must earn nothing net, the safety gate must still zero an unsafe
episode, and a fork or a restored checkpoint must give the same rewards as the episode it came from.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import rehearsal_env
from rehearsal_env.agents import make_agent
from rehearsal_env.rewards import load_profile
from rehearsal_env.rewards.profiles import ProfileError, _validate

WORLD = rehearsal_env.load_world("shop")


def _act(tool: str, **args: Any) -> str:
    return json.dumps({"tool": tool, "args": args})


def _play(scenario_id: str, agent: str, profile: str, stress: bool) -> tuple[list[float], dict[str, Any]]:
    scenario = WORLD.scenario(scenario_id)
    env = rehearsal_env.RehearsalEnv(scenario, WORLD, stress=stress, reward_profile=profile)
    observation, info = env.reset(seed=3)
    policy = make_agent(agent, scenario)
    rewards: list[float] = []
    while True:
        observation, reward, terminated, truncated, info = env.step(policy(observation, info))
        rewards.append(reward)
        if terminated or truncated:
            env.close()
            return rewards, info


@pytest.mark.parametrize("stress", [False, True])
def test_the_turns_rewards_sum_to_the_end_reward_of_rl(stress: bool) -> None:
    seen = set()
    for scenario in WORLD.scenarios("train")[::4]:
        for agent in ("reference", "null", *(w.name for w in scenario.wrong)):
            shaped, info = _play(scenario.id, agent, "rl_turns", stress)
            plain, plain_info = _play(scenario.id, agent, "rl", stress)
            assert sum(shaped) == pytest.approx(plain[-1], abs=1e-6), (scenario.id, agent, shaped, plain)
            assert info["end_reward"] == plain_info["reward_detail"]["reward"]
            assert info["potential"] == 0.0 and all(r == 0.0 for r in plain[:-1])
            seen.add(info["outcome"])
            if any(r > 0 for r in shaped[:-1]) and info["outcome"] != "verified":
                seen.add("paid progress, then lost it")
    assert {"verified", "not_achieved", "rule_violated", "paid progress, then lost it"} <= seen, seen


def test_progress_is_paid_when_it_happens() -> None:
    shaped, info = _play("change-address-0001", "reference", "rl_turns", stress=False)
    assert shaped == [0.0, 0.0, 1.0, 0.0] and info["end_reward"] == 1.0


def test_undoing_and_redoing_a_write_earns_nothing_net() -> None:
    scenario = WORLD.scenario("change-address-0001")
    target = dict(scenario.reference.calls[2].args)
    env = rehearsal_env.RehearsalEnv(scenario, WORLD, stress=False, reward_profile="rl_turns")
    env.reset(seed=0)
    order = json.loads(env.step(_act("get_order", order_id=target["order_id"]))[0])["tool_result"]["result"]
    original = order["shipping_address"]
    earned = []
    for _ in range(5):
        earned.append(env.step(_act("update_shipping_address", **target))[1])
        earned.append(env.step(_act("update_shipping_address", order_id=target["order_id"], address=original))[1])
    assert earned == [1.0, -1.0] * 5 and sum(earned) == 0.0
    last = env.step(_act("give_up", reason="changed my mind"))
    assert last[2] and last[1] == 0.0 and last[4]["end_reward"] == 0.0


def test_a_fork_and_a_restored_checkpoint_pay_what_the_episode_pays() -> None:
    scenario = WORLD.scenario("change-address-0001")
    calls = [_act(c.tool, **dict(c.args)) for c in scenario.reference.calls]
    env = rehearsal_env.RehearsalEnv(scenario, WORLD, stress=False, reward_profile="rl_turns")
    env.reset(seed=0)
    env.step(calls[0])
    fork = env.fork()
    saved = env.checkpoint()
    rest = [env.step(c)[1] for c in calls[1:]]
    assert [fork.step(c)[1] for c in calls[1:]] == rest
    restored = rehearsal_env.restore(saved)
    assert [restored.step(c)[1] for c in calls[1:]] == rest == [0.0, 1.0, 0.0]
    for e in (env, fork, restored):
        e.close()


def test_a_not_scored_episode_takes_back_what_was_paid() -> None:
    from rehearsal_env.verdict import NotScoredCause
    scenario = WORLD.scenario("change-address-0001")
    env = rehearsal_env.RehearsalEnv(scenario, WORLD, stress=False, reward_profile="rl_turns")
    env.reset(seed=0)
    paid = sum(env.step(_act(c.tool, **dict(c.args)))[1] for c in scenario.reference.calls[:3])
    *_, reward, terminated, _, info = env.abort(NotScoredCause.PROVIDER, "the model provider failed")
    assert paid == 1.0 and terminated and reward == -1.0 and info["end_reward"] is None
    env.close()


def test_rl_is_unchanged_and_shaping_is_declared_in_its_own_profile_version(tmp_path: Any) -> None:
    assert load_profile("rl").shaping is None and load_profile("rl").reward_version == "rl/1"
    turns = load_profile("rl_turns")
    assert turns.shaping == "goal_share" and turns.reward_version == "rl_turns/1"
    assert (turns.weights, turns.gates) == (load_profile("rl").weights, load_profile("rl").gates)
    path = tmp_path / "odd.toml"
    for bad in ({"potential": "anything"}, {"potential": "goal_share", "gamma": 0.9}, "goal_share"):
        with pytest.raises(ProfileError, match=r"\[shaping\] must be the one key potential"):
            _validate(path, {"name": "odd", "reward_version": "odd/1", "weights": {"correctness": 1.0},
                             "shaping": bad})


def test_the_records_carry_each_turns_reward_summing_to_the_episodes(tmp_path: Any) -> None:
    from rehearsal_env.records import read_records
    from rehearsal_env.runner import RunConfig, run
    run(RunConfig(world="shop", agent="reference", scenarios=("change-address-0001", "refund-item-0001"),
                  reward_profile="rl_turns", stress=False), tmp_path / "turns")
    run(RunConfig(world="shop", agent="reference", scenarios=("change-address-0001",), reward_profile="rl",
                  stress=False), tmp_path / "plain")
    shaped = {r.scenario: r for r in read_records(tmp_path / "turns")}
    change = shaped["change-address-0001"]
    assert change.turn_rewards == (0.0, 0.0, 1.0, 0.0) and change.reward == 1.0
    assert all(sum(r.turn_rewards or ()) == pytest.approx(r.reward) for r in shaped.values())
    assert [r.turn_rewards for r in read_records(tmp_path / "plain")] == [None]
