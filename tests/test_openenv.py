"""OpenEnv: a world served by openenv-core's own create_app, played by openenv-core's own clients over a live
server on 127.0.0.1 (port 0): a reference episode to verified, and 64 concurrent sessions, each with its own
database, ending with the verdict the Gymnasium env gives for the same actions.

Skips without the ``openenv`` extra; fails instead with REHEARSAL_REQUIRE_OPENENV=1.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import rehearsal_env
from rehearsal_env.agents import make_agent
from rehearsal_env.serve import ServerThread

try:
    from openenv.core.generic_client import GenericEnvClient

    from rehearsal_env.integrations.openenv import CallToolAction, ListToolsAction, RehearsalClient, make_app
except ImportError as exc:
    if os.environ.get("REHEARSAL_REQUIRE_OPENENV") == "1":
        raise RuntimeError(f"REHEARSAL_REQUIRE_OPENENV=1 but openenv-core is not installed ({exc}): "
                           "pip install -e '.[openenv]'") from exc
    pytest.skip(f"openenv-core is not installed (pip install -e '.[openenv]'): {exc}", allow_module_level=True)


class _Quiet(logging.Filter):
    """openenv-core's /ws handler logs a client that closed first as an ASGI error; the episode is over by then."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Exception in ASGI application" not in record.getMessage()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the module's server records its episodes."""
    return tmp_path_factory.mktemp("openenv-runs")


@pytest.fixture(scope="module")
def server(runs: Path) -> Iterator[ServerThread]:
    quiet = _Quiet()
    logging.getLogger("uvicorn.error").addFilter(quiet)
    with ServerThread(make_app("shop", split=None, max_concurrent_envs=64, out=str(runs), agent="grpo",
                               agent_version="step-1")) as running:
        yield running
    logging.getLogger("uvicorn.error").removeFilter(quiet)


def _gym(scenario_id: str, agent: str) -> tuple[list[dict[str, Any]], list[str], Any, float]:
    """The calls the scripted ``agent`` makes on the Gymnasium env, its observations, verdict and reward (rl)."""
    env = rehearsal_env.make(f"shop/{scenario_id}", reward_profile="rl")
    policy = make_agent(agent, env.scenario)
    observation, info = env.reset(seed=0)
    calls, observations, done, reward = [], [], False, 0.0
    while not done:
        action = policy(observation, info)
        calls.append(json.loads(action))
        observation, reward, terminated, truncated, info = env.step(action)
        observations.append(observation)
        done = terminated or truncated
    env.close()
    return calls, observations, info["verdict"], reward


async def _play(url: str, scenario_id: str, calls: list[dict[str, Any]]) -> tuple[list[str], Any]:
    async with RehearsalClient(base_url=url, message_timeout_s=120) as env:
        first = await env.reset(scenario=scenario_id, seed=0)
        assert first.observation.scenario == scenario_id and not first.done
        texts, step = [], None
        for call in calls:
            step = await env.step(CallToolAction(tool_name=call["tool"], arguments=call["args"]))
            texts.append(step.observation.text)
        assert step is not None
        return texts, step


def test_a_reference_episode_is_verified_with_the_gymnasium_observations_and_reward(server: ServerThread) -> None:
    calls, observations, verdict, reward = _gym("refund-item-0001", "reference")
    texts, last = asyncio.run(_play(server.url, "refund-item-0001", calls))
    assert texts == observations
    assert last.done and last.reward == reward and reward > 0
    assert last.observation.verdict["outcome"] == "verified" == verdict.outcome.value
    assert last.observation.verdict == {**verdict.to_dict(), "reward": reward}


def test_openenv_cores_generic_client_plays_an_episode_to_its_verdict(server: ServerThread) -> None:
    calls, _, verdict, reward = _gym("cancel-order-0001", "reference")
    with GenericEnvClient(base_url=server.url).sync() as env:
        first = env.reset(scenario="cancel-order-0001")
        assert first.observation["role"] == "support_agent" and "cancel" in first.observation["text"].lower()
        tools = env.step({"type": "list_tools"}).observation["tools"]
        assert {t["name"] for t in tools} >= {"cancel_order", "issue_store_credit", "finish", "retry_operation"}
        for call in calls:
            step = env.step({"type": "call_tool", "tool_name": call["tool"], "arguments": call["args"]})
        assert step.done and step.reward == reward
        assert step.observation["verdict"]["outcome"] == verdict.outcome.value == "verified"
        state = env.state()
        assert state["scenario"] == "cancel-order-0001" and state["outcome"] == "verified"


def test_mcp_tools_carry_our_schemas_and_bad_arguments_are_rejected_attempts(server: ServerThread) -> None:
    world = rehearsal_env.load_world("shop")

    async def go() -> tuple[Any, Any, Any]:
        async with RehearsalClient(base_url=server.url) as env:
            await env.reset(scenario="refund-item-0001")
            tools = await env.step(ListToolsAction())
            bad = await env.step(CallToolAction(tool_name="get_order", arguments={"order_id": "3294", "x": 1}))
            end = await env.step(CallToolAction(tool_name="give_up", arguments={"reason": "test"}))
            return tools, bad, end

    tools, bad, end = asyncio.run(go())
    schemas = {t.name: t.input_schema for t in tools.observation.tools}
    for tool in world.tools:
        assert schemas[tool.name] == dict(tool.parameters)
    result = json.loads(bad.observation.text)["tool_result"]
    assert result["status"] == "rejected" and "unknown argument" in result["error"] and not bad.done
    assert end.done and end.observation.verdict["metrics"]["rejected_attempts"] == 1


def test_a_holdout_verdict_is_its_outcome_ending_and_reward_only_and_every_episode_is_recorded(
        server: ServerThread, runs: Path) -> None:
    from rehearsal_env.integrations._recording import flush_all
    from rehearsal_env.records import read_records, verify_run_dir
    holdout = rehearsal_env.load_world("shop").scenarios("holdout")[0].id
    _, last = asyncio.run(_play(server.url, holdout, [{"tool": "give_up", "args": {"reason": "test"}}]))
    assert last.done and last.observation.verdict == {"outcome": "not_achieved", "ending": "gave_up",
                                                      "reward": last.reward}
    flush_all()
    (run,) = runs.iterdir()
    assert verify_run_dir(run) == []
    mine = [r for r in read_records(run) if r.scenario == holdout]
    assert [(r.agent, r.agent_version, r.ending) for r in mine] == [("grpo", "step-1", "gave_up")]


def test_64_concurrent_sessions_each_end_with_the_right_verdict(server: ServerThread) -> None:
    world = rehearsal_env.load_world("shop")
    plays = []
    for scenario in world.scenarios("train")[:16]:
        for agent in ("reference", "null", *(w.name for w in scenario.wrong[:2])):
            plays.append((scenario.id, agent))
    plays = (plays * 2)[:64]
    expected = {play: _gym(*play) for play in set(plays)}
    assert {v[2].outcome.value for v in expected.values()} >= {"verified", "not_achieved", "rule_violated"}

    async def everyone() -> list[tuple[list[str], Any]]:
        return list(await asyncio.gather(*(_play(server.url, s, expected[(s, a)][0]) for s, a in plays)))

    results = asyncio.run(everyone())
    assert len(results) == 64
    for (scenario_id, agent), (texts, last) in zip(plays, results, strict=True):
        _, observations, verdict, reward = expected[(scenario_id, agent)]
        assert texts == observations, (scenario_id, agent)
        assert last.done and last.observation.verdict["outcome"] == verdict.outcome.value, (scenario_id, agent)
        assert last.reward == reward


def test_a_shaped_profile_gives_each_step_its_turns_reward_but_not_on_holdout(tmp_path: Path) -> None:
    world = rehearsal_env.load_world("shop")

    async def rewards(url: str, scenario_id: str) -> list[float | None]:
        calls = [{"tool": c.tool, "args": dict(c.args)} for c in world.scenario(scenario_id).reference.calls]
        async with RehearsalClient(base_url=url, message_timeout_s=120) as env:
            await env.reset(scenario=scenario_id, seed=0)
            return [(await env.step(CallToolAction(tool_name=c["tool"], arguments=c["args"]))).reward for c in calls]

    holdout = next(s.id for s in world.scenarios("holdout") if s.id.startswith("change-address"))
    with ServerThread(make_app("shop", split=None, profile="rl_turns", stress=False, out=str(tmp_path))) as running:
        assert asyncio.run(rewards(running.url, "change-address-0001")) == [0.0, 0.0, 1.0, 0.0]  # sums to 1
        assert asyncio.run(rewards(running.url, holdout)) == [0.0, 0.0, 0.0, 1.0]
