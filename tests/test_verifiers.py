"""verifiers: load_environment(world=..., split=...) rolled out by verifiers' own evaluation code against the
scripted OpenAI-protocol server (real HTTP on 127.0.0.1, the real openai SDK inside verifiers' client); the
rubric's reward is the episode's reward, equal to the Gymnasium env's for the same actions.

Skips without the ``verifiers`` extra; fails instead with REHEARSAL_REQUIRE_VERIFIERS=1.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

import rehearsal_env
from rehearsal_env.agents.testing import ModelServer, Reply
from rehearsal_env.integrations import STOPPED_REASON

try:
    import verifiers as vf

    from rehearsal_env.integrations.verifiers import RehearsalVerifiersEnv, load_environment
except ImportError as exc:
    if os.environ.get("REHEARSAL_REQUIRE_VERIFIERS") == "1":
        raise RuntimeError(f"REHEARSAL_REQUIRE_VERIFIERS=1 but verifiers is not installed ({exc}): "
                           "pip install -e '.[verifiers]'") from exc
    pytest.skip(f"verifiers is not installed (pip install -e '.[verifiers]'): {exc}", allow_module_level=True)

MODULE = "rehearsal_env.integrations.verifiers"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> RehearsalVerifiersEnv:
    loaded = vf.load_environment(MODULE, world="shop", split="dev", out=str(tmp_path_factory.mktemp("runs")))
    assert isinstance(loaded, RehearsalVerifiersEnv)
    return loaded


def _evaluate(env: RehearsalVerifiersEnv, server: ModelServer, model: str, n: int) -> list[dict[str, Any]]:
    client = vf.ClientConfig(api_base_url=server.base_url, api_key_var="REHEARSAL_TEST_NO_KEY")
    results = env.evaluate_sync(client=client, model=model, num_examples=n, rollouts_per_example=1,
                                state_columns=["rehearsal"])
    return list(results["outputs"])


def _actions(completion: list[Any], tokens: int) -> list[str]:
    """The env actions of a rollout's assistant messages: each call, the reply's tokens on its first call."""
    actions = []
    for message in completion:
        message = message if isinstance(message, dict) else message.model_dump()
        if message.get("role") != "assistant":
            continue
        for n, raw in enumerate(message.get("tool_calls") or []):
            call = json.loads(raw) if isinstance(raw, str) else raw
            try:
                args: Any = json.loads(call["arguments"])
            except ValueError:
                args = call["arguments"]
            action: dict[str, Any] = {"tool": call["name"], "args": args}
            if n == 0:
                action["usage"] = {"tokens": tokens}
            actions.append(json.dumps(action))
    return actions


def _gym(scenario: str, actions: list[str]) -> tuple[Any, float]:
    env = rehearsal_env.make(f"shop/{scenario}", reward_profile="rl")
    env.reset(seed=0)
    info: dict[str, Any] = {}
    reward = 0.0
    for action in actions:
        _, reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    env.close()
    return info["verdict"], reward


def test_load_environment_is_found_by_module_name_and_its_rubric_is_our_reward(env: RehearsalVerifiersEnv) -> None:
    world = rehearsal_env.load_world("shop")
    assert len(env.eval_dataset) == len(world.scenarios("dev"))
    row = env.eval_dataset[0]
    info = json.loads(row["info"])
    scenario = world.scenario(info["scenario"])
    assert [t["name"] for t in info["tool_defs"]] == list(world.tools_for(scenario.role,
                                                                          offers_retry=scenario.offers_retry))
    assert row["prompt"][1]["content"] == scenario.request
    rubrics = env.rubric.rubrics if isinstance(env.rubric, vf.RubricGroup) else [env.rubric]
    weights = {f.__name__: w for r in rubrics for f, w in zip(r.funcs, r.weights, strict=True) if f.__name__ in
               ("reward", "verified", "rule_violated", "false_completion", "not_scored") or w}
    assert weights == {"reward": 1.0, "verified": 0.0, "rule_violated": 0.0, "false_completion": 0.0,
                       "not_scored": 0.0}
    assert load_environment(world="shop", split="holdout").split == "holdout"


def test_verifiers_rollouts_reach_the_gymnasium_verdict_and_reward(env: RehearsalVerifiersEnv) -> None:
    with ModelServer(world="shop", tokens=100) as server:
        outputs = _evaluate(env, server, "solver", 6)
    assert len(outputs) == 6
    for out in outputs:
        played = out["rehearsal"]
        verdict, reward = _gym(played["scenario"], _actions(out["completion"], 100))
        assert played["verdict"] == {**verdict.to_dict(), "reward": reward}, played["scenario"]
        assert out["reward"] == reward == played["reward"]
        assert played["verdict"]["outcome"] == "verified" and out["metrics"]["verified"] == 1.0
        assert played["verdict"]["metrics"]["tokens"] == 100 * played["verdict"]["metrics"]["turns"]
        assert out["stop_condition"] == "episode_over"


def test_a_model_that_stops_calling_tools_is_settled_and_bad_arguments_are_rejected_attempts(
        env: RehearsalVerifiersEnv) -> None:
    with ModelServer() as server:
        server.script("careless", Reply.raw_call("get_order", "{not json"), Reply.call("get_order", order_id="7"),
                      Reply.text("I think it is done."))
        (out,) = _evaluate(env, server, "careless", 1)
    played = out["rehearsal"]
    assert out["stop_condition"] == "no_tool_called"
    assert played["verdict"]["outcome"] == "not_achieved" and played["verdict"]["ending"] == "gave_up"
    assert played["verdict"]["metrics"]["rejected_attempts"] == 2 and out["reward"] == 0.0
    actions = _actions(out["completion"], 100) + [json.dumps({"tool": "give_up", "args": {"reason": STOPPED_REASON}})]
    verdict, reward = _gym(played["scenario"], actions)
    assert played["verdict"] == {**verdict.to_dict(), "reward": reward} and out["reward"] == reward
