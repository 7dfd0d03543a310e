"""SkyRL: the SkyRL-Gym text env, made and stepped through skyrl_gym's own registry, against the Gymnasium env.

SkyRL's trainer (``skyrl`` 0.3, whose ``SkyRLGymGenerator.agent_loop`` drives a BaseTextEnv) does not import on
Python 3.11 (its ``skyrl.tinker.types`` builds pydantic models on ``typing.TypedDict``, which pydantic refuses before
3.12), so these tests drive the env through ``skyrl_gym.make`` with the generator's contract (``init(prompt)``, then
``step(text)`` per generation until ``done``, ``get_metrics``, ``close``). Skips without ``skyrl-gym`` (the ``skyrl``
extra); fails instead with REHEARSAL_REQUIRE_SKYRL=1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from trainer_parity import gym, recorded, reply_text, require, scripted

from rehearsal_env.integrations import STOPPED_REASON
from rehearsal_env.integrations._prompt import tool_text

skyrl_gym = require("skyrl_gym", "skyrl", "REHEARSAL_REQUIRE_SKYRL")
from rehearsal_env.integrations.skyrl import ENV_CLASS, dataset_rows, register  # noqa: E402

SCENARIO = "refund-item-0001"


def _row(scenario: str, **more: Any) -> dict[str, Any]:
    return {**next(r for r in dataset_rows("shop", None) if r["scenario"] == scenario), **more}


def _rollout(replies: list[str], config: dict[str, Any], scenario: str = SCENARIO,
             max_turns: int = 50) -> tuple[list[dict[str, Any]], Any, dict[str, Any]]:
    """Generations through skyrl_gym's registry, as SkyRL's generator makes and steps the env."""
    register()
    row = _row(scenario)
    env = skyrl_gym.make(row["env_class"], env_config=config, extras={**row, "max_turns": max_turns})
    chat, _ = env.init(row["prompt"])
    outputs = []
    for text in replies:
        out = env.step(text)
        outputs.append(out)
        chat += [{"role": "assistant", "content": text}, *out["observations"]]
        if out["done"]:
            break
    metrics = env.get_metrics()
    verdict = env.session.verdict
    env.close()
    return outputs, verdict, {"chat": chat, "metrics": metrics}


@pytest.mark.parametrize("profile", ["rl", "rl_turns"])
@pytest.mark.parametrize("agent", ["reference", "wrong"])
def test_a_rollout_gives_the_gymnasium_verdict_and_each_turns_reward(tmp_path: Path, profile: str,
                                                                     agent: str) -> None:
    scenario = SCENARIO
    if agent == "wrong":
        from rehearsal_env.worlds import load_world
        wrong = next(s for s in load_world("shop").scenarios("train") if s.wrong)
        scenario, agent = wrong.id, f"wrong:{wrong.wrong[0].name.removeprefix('wrong:')}"
    actions = scripted(f"shop/{scenario}", agent)
    expected = gym(f"shop/{scenario}", actions, profile)
    outputs, verdict, seen = _rollout([reply_text(a) for a in actions],
                                      {"profile": profile, "out": str(tmp_path)}, scenario)
    assert verdict == expected.verdict
    assert [o["reward"] for o in outputs] == expected.rewards  # per turn under rl_turns, at the end under rl
    assert outputs[-1]["done"] and outputs[-1]["metadata"]["verdict"]["outcome"] == expected.verdict.outcome.value
    tool_messages = [m["content"] for o in outputs for m in o["observations"]]
    assert tool_messages == [tool_text(o) for o in expected.observations[:-1]]  # as the openai agent shows them
    assert seen["metrics"]["verified"] == float(expected.verdict.outcome.value == "verified")
    assert seen["chat"][0]["role"] == "system" and "<tools>[" in seen["chat"][0]["content"]
    (record,) = recorded(tmp_path / f"shop-{profile}")
    assert [p.name for p in tmp_path.iterdir()] == [f"shop-{profile}"]
    assert record.agent == "skyrl" and record.outcome == expected.verdict.outcome.value


def test_text_goes_to_the_customer_and_the_trainers_turn_limit_ends_for_the_agent(tmp_path: Path) -> None:
    actions = scripted(f"shop/{SCENARIO}")[:1]
    outputs, verdict, seen = _rollout([reply_text(actions[0]), "Which item was broken?", ""],
                                      {"out": str(tmp_path)}, max_turns=3)
    asked = outputs[1]["observations"]
    assert [m["role"] for m in asked] == ["user"]  # the customer's answer, as the openai agent shows it
    expected = gym(f"shop/{SCENARIO}", actions + [
        {"tool": "ask_customer", "args": {"question": "Which item was broken?"}},
        {"tool": "", "args": {"dropped_reply": {"kind": "empty_reply", "text": ""}}},
        {"tool": "give_up", "args": {"reason": STOPPED_REASON}}])
    assert verdict == expected.verdict and verdict.ending.value == "gave_up"
    assert verdict.metrics.rejected_attempts == 1  # the empty reply
    assert outputs[-1]["done"] and outputs[-1]["reward"] == expected.rewards[-1]
    (record,) = recorded(tmp_path / "shop-rl")
    assert record.ending == "gave_up"


def test_close_with_the_episode_open_records_it_given_up(tmp_path: Path) -> None:
    register()
    row = _row(SCENARIO)
    env = skyrl_gym.make(ENV_CLASS, env_config={"out": str(tmp_path), "agent": "mine", "agent_version": "7"},
                         extras=row)
    env.init(row["prompt"])
    env.close()
    (record,) = recorded(tmp_path / "shop-rl")
    assert (record.agent, record.agent_version, record.ending) == ("mine", "7", "gave_up")


def test_a_row_without_a_scenario_is_refused_saying_how_to_build_one() -> None:
    register()
    with pytest.raises(ValueError, match="dataset_rows"):
        skyrl_gym.make(ENV_CLASS, env_config={}, extras={"prompt": []})


def test_the_next_trajectory_reuses_the_session_on_a_database_back_in_the_snapshot_state(tmp_path: Path) -> None:
    actions = scripted(f"shop/{SCENARIO}")
    expected = gym(f"shop/{SCENARIO}", actions)
    config = {"out": str(tmp_path)}
    first, verdict, _ = _rollout([reply_text(a) for a in actions], config)
    second, again, _ = _rollout([reply_text(a) for a in actions], config)  # the refund again: only on a reset DB
    assert verdict == again == expected.verdict and again.outcome.value == "verified"
    assert first[-1]["metadata"]["episode_id"] != second[-1]["metadata"]["episode_id"]
    register()
    row = _row(SCENARIO)
    one = skyrl_gym.make(ENV_CLASS, env_config=config, extras=row)
    two = skyrl_gym.make(ENV_CLASS, env_config=config, extras=row)  # made while the first is open: its own session
    assert one.session is not two.session
    one.close()
    two.close()
    three = skyrl_gym.make(ENV_CLASS, env_config=config, extras=row)
    assert three.session in (one.session, two.session)  # kept, not opened again
    three.close()
    assert len(recorded(tmp_path / "shop-rl")) == 2  # closing an env that never started records nothing


def test_a_closed_env_refuses_to_step_on_the_session_it_gave_back(tmp_path: Path) -> None:
    register()
    row = _row(SCENARIO)
    env = skyrl_gym.make(ENV_CLASS, env_config={"out": str(tmp_path)}, extras=row)
    env.init(row["prompt"])
    env.close()
    env.close()  # twice: nothing more
    with pytest.raises(RuntimeError, match="skyrl_gym.make"):
        env.step("Hello?")
