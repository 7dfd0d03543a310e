"""A call the agent abandons is never charged to another episode (``rehearsal_env.agents._drain``).

The scripted server answers one request at a time here, as llama-cpp-python's server does, and a reply that
is not streamed cannot be cancelled: the abandoned reply keeps the server busy after the agent cut it off.
"""

from __future__ import annotations

import json
from pathlib import Path

from rehearsal_env.agents import AgentProfile, Endpoint, OpenAIAgent, Provider
from rehearsal_env.agents.testing import ModelServer, Reply
from rehearsal_env.env import RehearsalEnv
from rehearsal_env.records import read_records
from rehearsal_env.runner import RunConfig, run, run_episode
from rehearsal_env.worlds import load_world

SCENARIO = "refund-item-0001"


def test_the_next_episode_is_not_charged_for_a_reply_the_last_one_abandoned() -> None:
    shop = load_world("shop")
    scenario = shop.scenario(SCENARIO)
    with ModelServer(world=shop, one_at_a_time=True) as server:
        server.script("m", Reply.runaway(delay_s=3.0))  # not streamed: the server is busy with it for 3 s
        cut = AgentProfile(name="m", model="m", max_call_s=1.0, max_model_calls=1, provider=Provider(stream=False))
        first = OpenAIAgent(cut, Endpoint(base_url=server.base_url))
        result = run_episode(RehearsalEnv(scenario, shop), first)
        said = json.loads(result.episode.trace[0].action)["args"]["dropped_reply"]
        assert said["kind"] == "cut_off_time"
        assert said["server"]["answered"] and said["server"]["waited_ms"] >= 1500  # the abandoned reply's rest
        assert first.stats.drained_ms >= 1500 and first.stats.latencies_ms[0] < 1900  # not in the call's time
        assert len(server.probes) == 1 and server.probes[0]["messages"][0]["content"] == first.conversation.system

        second = OpenAIAgent(AgentProfile(name="m", model="m", max_call_s=1.0, provider=Provider(stream=False)),
                             Endpoint(base_url=server.base_url))
        after = run_episode(RehearsalEnv(scenario, shop), second)
    assert second.stats.latencies_ms[0] < 900  # answered at once: the server was idle (else ~2 s, cut off)
    assert all(t.status != "rejected" for t in after.episode.trace) and after.verdict.outcome.value == "verified"


def test_the_record_says_how_long_the_episode_waited_for_an_abandoned_reply(tmp_path: Path) -> None:
    profile = AgentProfile(name="m", model="m", max_call_s=1.0, max_model_calls=1, provider=Provider(stream=False))
    with ModelServer(world=load_world("shop"), one_at_a_time=True) as server:
        server.script("m", Reply.runaway(delay_s=3.0))
        config = RunConfig(world="shop", agent="m", scenarios=(SCENARIO,), agent_profile=profile.to_toml(),
                           agent_version=profile.label, endpoint=Endpoint(base_url=server.base_url))
        run(config, tmp_path)
    (record,) = read_records(tmp_path)
    assert record.model_drained_ms is not None and record.model_drained_ms >= 1500  # the abandoned reply's rest
    assert record.model_held_ms is not None and record.model_held_ms < 500 \
        and record.model_latency_ms is not None and record.model_latency_ms < 1900
