"""verifiers' current API (0.4, ``verifiers.v1``): a world's split as a taskset whose episode is an MCP toolset.

verifiers' own eval runner (``run_eval``) rolls the dev split out with its ``null`` harness (its chat loop,
run as a PEP 723 program by ``uv``, calling our tools over MCP) and its interception server in front of the
scripted OpenAI-protocol server (real HTTP on 127.0.0.1), which plays each scenario's reference solution.
The trace's reward is our verdict's reward under the profile; the episodes are recorded in a sealed run
directory whose records give, replayed in the Gymnasium env, the same outcome and reward.

Runs in the one environment beside every other extra (verifiers 0.4 pins mcp==2.0.0 and openai<3, which the mcp
extra and the core dependencies allow). Skips without verifiers 0.4; fails instead with
REHEARSAL_REQUIRE_VERIFIERS_V1=1 (or REHEARSAL_REQUIRE_VERIFIERS=1).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

import rehearsal_env
from rehearsal_env.agents.testing import ModelServer, Reply
from rehearsal_env.integrations import STOPPED_REASON
from rehearsal_env.records import read_records, verify_run_dir
from rehearsal_env.worlds import load_world

try:
    import verifiers.v1 as vf
    from verifiers.v1.cli.eval.runner import run_eval
    from verifiers.v1.configs.cli.eval import EvalConfig

    from rehearsal_env.integrations.verifiers_v1 import RehearsalTaskset
except ImportError as exc:
    if "1" in (os.environ.get("REHEARSAL_REQUIRE_VERIFIERS_V1"), os.environ.get("REHEARSAL_REQUIRE_VERIFIERS")):
        raise RuntimeError(f"REHEARSAL_REQUIRE_VERIFIERS(_V1)=1 but verifiers 0.4 is not installed ({exc}): "
                           "pip install -e '.[verifiers]'") from exc
    pytest.skip(f"verifiers 0.4 is not installed (pip install -e '.[verifiers]'): {exc}",
                allow_module_level=True)

MODULE = "rehearsal-verifiers"  # the top-level id (rehearsal_verifiers.py)
if shutil.which("uv") is None and os.environ.get("REHEARSAL_REQUIRE_VERIFIERS_V1") != "1":
    pytest.skip("uv is not on PATH (the verifiers-v1 extra installs it; verifiers runs its harness programs with it)",
                allow_module_level=True)


def _evaluate(tmp_path: Path, server: ModelServer, model: str, limit: int) -> list[Any]:
    config = EvalConfig.model_validate({
        "env": {"taskset": {"id": MODULE, "world": "shop", "split": "dev",
                            "task": {"tools": {"out": str(tmp_path / "runs"), "agent_version": "test"}}},
                "agent": {"harness": {"id": "null"}, "runtime": {"type": "subprocess"}, "max_turns": 40}},
        "model": model, "client": {"type": "eval", "base_url": server.base_url, "api_key_var": "REHEARSAL_NO_KEY"},
        "select": {"limit": limit}, "push": False, "rich": None, "output_dir": str(tmp_path / "vf"),
        "max_concurrent": 2})
    return asyncio.run(run_eval(config))


def _gym(scenario: str, actions: list[str]) -> tuple[str, float]:
    """The outcome and reward (profile rl) the Gymnasium env gives the same actions."""
    env = rehearsal_env.make(f"shop/{scenario}", reward_profile="rl")
    env.reset(seed=0)
    info: dict[str, Any] = {}
    reward = 0.0
    for action in actions:
        _, reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    env.close()
    return info["verdict"].outcome.value, reward


def test_the_taskset_is_found_by_module_name_and_holds_the_split() -> None:
    from verifiers.v1.utils.loaders import taskset_class

    assert taskset_class(MODULE) is RehearsalTaskset
    world = load_world("shop")
    taskset = RehearsalTaskset(_config(seeds=2))
    tasks = list(taskset)
    dev = world.scenarios("dev")
    assert [t.data.scenario for t in tasks] == [s.id for s in dev for _ in range(2)]
    first = tasks[0]
    assert first.data.prompt == dev[0].request and "Policies:" in (first.data.system_prompt or "")
    assert first.key == f"shop/{dev[0].id}#0" and len({t.key for t in tasks}) == len(tasks)
    assert [type(t).__name__ for t in first.toolsets(first.config)] == ["RehearsalToolset"]


def _config(**fields: Any) -> Any:
    from rehearsal_env.integrations.verifiers_v1 import RehearsalTasksetConfig

    return RehearsalTasksetConfig(id=MODULE, world="shop", split="dev", **fields)


def test_verifiers_rollouts_play_episodes_scored_by_our_verdict_and_recorded(tmp_path: Path) -> None:
    with ModelServer(world="shop") as server:
        episodes = _evaluate(tmp_path, server, "scripted", limit=3)
    traces = [t for e in episodes for t in e.traces]
    assert len(traces) == 3 and all(t.ok for t in traces), [t.last_error for t in traces]
    # one run directory (shop-rl): a second only when the package's files changed between the rollouts' tool
    # servers starting (its provenance names the package's hash), e.g. while the tree is being edited
    run_dirs = sorted((tmp_path / "runs").iterdir())
    assert run_dirs[0].name == "shop-rl" and all(verify_run_dir(d) == [] for d in run_dirs)
    records = {r.scenario: r for d in run_dirs for r in read_records(d)}
    assert len(records) == 3
    for trace in traces:
        ours = trace.info["rehearsal"]
        record = records[trace.task.data.scenario]
        assert ours["verdict"]["outcome"] == record.outcome == "verified", ours
        assert ours["ended_by"] == "agent" and ours["run_dir"] in map(str, run_dirs)
        assert trace.rewards["rehearsal"].score == pytest.approx(record.reward) and record.reward == ours["reward"]
        assert trace.metrics["verified"] == 1.0 and trace.metrics["turns"] == record.turns
        assert trace.stop_condition == "episode_ended"
        assert record.agent == "verifiers-v1" and record.agent_version == "test"
        assert record.tokens == 100 * ours["model_calls"] and ours["caveats"] == []  # measured: no external mode
        outcome, reward = _gym(record.scenario, [t.action for t in record.trace])
        assert (outcome, reward) == (record.outcome, pytest.approx(record.reward))


def test_a_model_that_stops_calling_tools_is_settled_as_given_up(tmp_path: Path) -> None:
    with ModelServer(world="shop") as server:
        server.script("quits", Reply.call("get_order", order_id=1), Reply.text("I think we are done here."))
        (episode,) = _evaluate(tmp_path, server, "quits", limit=1)
    (trace,) = episode.traces
    ours = trace.info["rehearsal"]
    assert ours["ended_by"] == "stopped" and ours["verdict"]["ending"] == "gave_up", ours
    (record,) = read_records(tmp_path / "runs" / "shop-rl")
    assert record.ending == "gave_up" and record.outcome != "not_scored" and record.turns == 2
    assert json.loads(record.trace[-1].action)["args"]["reason"] == STOPPED_REASON
    assert record.tokens == 200  # both model calls, the text reply's with the give_up that settled it
    assert trace.rewards["rehearsal"].score == pytest.approx(record.reward or 0.0)


def test_arguments_that_do_not_fit_are_a_rejected_attempt_and_the_episode_goes_on(tmp_path: Path) -> None:
    """A call for a tool the role lacks never reaches the episode under ``null``: its chat loop answers the model
    itself (no such MCP tool). Arguments of the wrong type do reach it: a rejected attempt, and play goes on."""
    scenario = load_world("shop").scenarios("dev")[0]
    with ModelServer(world="shop") as server:
        server.script("bad", Reply.call("drop_all_tables"), Reply.raw_call("get_order", '{"order_id": "x"}'),
                      *[Reply.call(c.tool, **dict(c.args)) for c in scenario.reference.calls])
        (episode,) = _evaluate(tmp_path, server, "bad", limit=1)
    (trace,) = episode.traces
    (record,) = read_records(tmp_path / "runs" / "shop-rl")
    first = record.trace[0]
    assert json.loads(first.action)["tool"] == "get_order" and first.rejected and record.rejected_attempts == 1
    assert "drop_all_tables" not in {json.loads(t.action)["tool"] for t in record.trace}
    assert record.outcome == trace.info["rehearsal"]["verdict"]["outcome"] != "not_scored"
    assert record.outcome == _gym(scenario.id, [t.action for t in record.trace])[0]
    assert isinstance(trace, vf.Trace)
