"""Records carry input and output tokens (record version 5), so a profile whose input and output prices differ is
costed (issue 35); older records read as before, their split null."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import rehearsal_env
from rehearsal_env.agents import AgentProfile, Endpoint
from rehearsal_env.agents.testing import ModelServer
from rehearsal_env.measure import Prices, load_run, summarize
from rehearsal_env.records import RECORD_VERSION, read_records
from rehearsal_env.runner import RunConfig, run
from rehearsal_env.worlds import load_world

SCENARIOS = ("refund-item-0004", "cancel-order-0004")


def test_a_model_run_records_input_and_output_tokens_and_is_costed_at_two_prices(tmp_path: Path) -> None:
    with ModelServer(world=load_world("shop"), tokens=100) as server:  # each reply: 80 prompt + 20 completion
        run(RunConfig(world="shop", agent="bot", agent_version="v1", scenarios=SCENARIOS, repeats=2,
                      agent_profile=AgentProfile(name="bot", model="m").to_toml(),
                      endpoint=Endpoint(base_url=server.base_url)), tmp_path, progress=False)
    records = read_records(tmp_path)
    assert RECORD_VERSION == 8 and all(r.record_version == 8 for r in records)
    split = {}
    for r in records:
        assert r.model_calls and r.input_tokens is not None and r.output_tokens is not None
        assert (r.input_tokens, r.output_tokens) == (80 * r.model_calls, 20 * r.model_calls)
        assert r.tokens == r.input_tokens + r.output_tokens
        split[(r.scenario, r.repeat)] = (r.input_tokens, r.output_tokens)
    (agent,) = load_run(tmp_path)
    cost = summarize(agent, Prices(input_per_million=1.0, output_per_million=4.0, source="test")).cost
    assert cost is not None and cost.per_episode is not None
    by_scenario: dict[str, list[float]] = {}
    for (scenario, _), (inp, out) in split.items():
        by_scenario.setdefault(scenario, []).append((inp * 1.0 + out * 4.0) / 1e6)
    expected = sum(sum(v) / len(v) for v in by_scenario.values()) / len(by_scenario)
    assert cost.per_episode.value == pytest.approx(expected)
    assert "left out of the cost" not in (cost.note or "")


@pytest.mark.parametrize("usage", [{"tokens": 10, "input_tokens": 4}, {"tokens": 10, "input_tokens": 4,
                                                                        "output_tokens": 5},
                                   {"tokens": 10, "input_tokens": -1, "output_tokens": 11}])
def test_a_split_that_does_not_add_up_is_a_rejected_attempt_never_a_record(usage: dict[str, int]) -> None:
    env = rehearsal_env.make("shop/refund-item-0004")
    env.reset(seed=0)
    observation, *_ = env.step(json.dumps({"tool": "get_order", "args": {"order_id": 3294}, "usage": usage}))
    result = json.loads(observation)["tool_result"]
    assert result["status"] == "rejected"
    assert 'optionally split as "input_tokens" and "output_tokens" adding up to N' in result["error"]
    observation, *_ = env.step(json.dumps({"tool": "get_order", "args": {"order_id": 3294},
                                           "usage": {"tokens": 10, "input_tokens": 7, "output_tokens": 3}}))
    *_, info = env.step(json.dumps({"tool": "give_up", "args": {"reason": "test"}}))
    metrics = info["verdict"].metrics
    assert (metrics.tokens, metrics.input_tokens, metrics.output_tokens) == (10, 7, 3)
