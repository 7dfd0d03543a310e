"""Each message says what happened (issue 38): an unknown customer, a dropped model reply, a run with no
world-tool call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import measure
from rehearsal_env.agents import AgentProfile, Endpoint, Provider, Sampling
from rehearsal_env.agents.testing import ModelServer, Reply
from rehearsal_env.env import RehearsalEnv
from rehearsal_env.records import read_records
from rehearsal_env.runner import RunConfig, format_table, no_world_tool_hint, run
from rehearsal_env.worlds import load_world

UNKNOWN = 987654


def test_an_unknown_customer_is_an_error_in_every_shop_tool_that_takes_one() -> None:
    shop = load_world("shop")
    takes = [t for t in shop.tools if "customer_id" in t.parameters.get("properties", {})]
    assert {t.name for t in takes} >= {"get_customer", "list_orders", "send_email", "issue_store_credit"}
    scenario = next(s for s in shop.scenarios()
                    if not s.faults and s.change is None and all(t.name in shop.role(s.role).tools for t in takes))
    env = RehearsalEnv(scenario, shop, stress=False)  # the stress layer would refuse the first write
    env.reset(seed=0)
    for t in takes:
        args = {"customer_id": UNKNOWN, "subject": "s", "body": "b", "amount_cents": 100, "reason": "r"}
        args = {k: v for k, v in args.items() if k in t.parameters["properties"]}
        observation, *_ = env.step(json.dumps({"tool": t.name, "args": args}))
        result = json.loads(observation)["tool_result"]
        assert result["status"] == "error" and f"no customer #{UNKNOWN}" in result["error"], (t.name, result)
    env.close()


def test_a_dropped_reply_says_so_instead_of_naming_a_tool_called_nothing(tmp_path: Path) -> None:
    profile = AgentProfile(name="m", model="m", sampling=Sampling(max_tokens=16), max_model_calls=1)
    with ModelServer(world="shop") as server:
        server.script("m", Reply.runaway())  # streamed past max_tokens: the agent cuts it off
        config = RunConfig(world="shop", agent="m", scenarios=("refund-item-0001",), agent_profile=profile.to_toml(),
                           agent_version=profile.label, endpoint=Endpoint(base_url=server.base_url))
        run(config, tmp_path)
    (record,) = read_records(tmp_path)
    first = record.trace[0]
    error = json.loads(first.observation)["tool_result"]["error"]
    assert first.rejected_kind == "cut_off_tokens" and "has no tool" not in error
    assert "no tool was called: the agent dropped its model's reply (cut_off_tokens)" in error


def test_the_no_world_tool_line_says_whether_the_tools_were_offered(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    profile = AgentProfile(name="talker", model="talker", max_model_calls=1, provider=Provider(tool_choice="auto"))
    with ModelServer() as server:
        server.script("talker", Reply.text("Happy to help!"), Reply.text("Happy to help!"))
        config = RunConfig(world="shop", agent="talker", scenarios=("refund-item-0001",),
                           agent_profile=profile.to_toml(), agent_version=profile.label,
                           endpoint=Endpoint(base_url=server.base_url))
        summary = run(config, tmp_path)
    assert summary["no_world_tool_calls"] and summary["world_tools_offered"] >= 10 and summary["tool_choice"] == "auto"
    line = next(x for x in format_table(summary).splitlines() if x.startswith("NO WORLD-TOOL CALLS"))
    assert "OFFERED, ANSWERED IN TEXT" in line and "check that its model is offered" not in line
    assert measure.main([str(tmp_path)]) == 0  # measure.py's warning says the same as the run's own line
    printed = capsys.readouterr().out
    assert "OFFERED, ANSWERED IN TEXT" in printed and "check that its model is offered" not in printed
    assert "NOT OFFERED" in no_world_tool_hint({"world_tools_offered": 0, "tool_choice": "auto"})
    assert "forbids" in no_world_tool_hint({"world_tools_offered": 12, "tool_choice": "none"})
    assert "without tool_choice" in no_world_tool_hint({"world_tools_offered": 12, "tool_choice": "omit"})
    assert "check that the agent is offered" in no_world_tool_hint({"world_tools_offered": None})
