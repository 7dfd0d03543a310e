"""The openai agent over real HTTP: the real SDK against the scripted OpenAI-protocol server on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rehearsal_env.agents import (
    AgentProfile,
    Endpoint,
    OpenAIAgent,
    ProviderError,
    ProviderRefused,
    Sampling,
)
from rehearsal_env.agents.testing import ModelServer, Reply
from rehearsal_env.cli import main
from rehearsal_env.env import RehearsalEnv
from rehearsal_env.records import read_records
from rehearsal_env.runner import EpisodeResult, RunConfig, run, run_episode
from rehearsal_env.verdict import NotScoredCause, NotScoredError
from rehearsal_env.worlds import World, load_world

SHOP = "refund-item-0001"
"""Omar's broken Mini Backpack in order #3294: refund that item."""


@pytest.fixture(scope="module")
def shop() -> World:
    return load_world("shop")


@pytest.fixture(scope="module")
def server(shop: World) -> Iterator[ModelServer]:
    with ModelServer(world=shop) as s:
        yield s


FAST: dict[str, Any] = {"timeout_s": 5.0, "max_retries": 2, "backoff_s": 0.01, "max_backoff_s": 0.05}


def play(server: ModelServer, world: World, scenario: str, model: str, *, stress: bool = True,
         sampling: Sampling | None = None, **endpoint: Any) -> tuple[EpisodeResult, OpenAIAgent]:
    s = world.scenario(scenario)
    profile = AgentProfile(name="t", model=model, instructions="Be careful.", sampling=sampling or Sampling())
    agent = OpenAIAgent(profile, Endpoint(base_url=server.base_url, **{**FAST, **endpoint}),
                        max_customer_contacts=s.max_customer_contacts)
    env = RehearsalEnv(s, world, stress=stress)
    try:
        return run_episode(env, agent), agent
    finally:
        env.close()


def last_request(server: ModelServer, model: str) -> dict[str, Any]:
    return [r for r in server.requests if r["model"] == model][-1]


def tool_answers(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [json.loads(m["content"]) for m in request["messages"] if m["role"] == "tool"]


def test_solves_a_shop_scenario_with_tokens_and_latency(server: ModelServer, shop: World) -> None:
    result, agent = play(server, shop, SHOP, "solver-shop", sampling=Sampling(temperature=0.0, seed=7, max_tokens=64))
    assert result.verdict.outcome.value == "verified"
    assert agent.stats.calls == result.episode.turn  # one call per step: the solver sends one call a reply
    assert result.verdict.metrics.tokens == agent.stats.tokens == 100 * agent.stats.calls
    assert agent.stats.latency_ms > 0 and len(agent.stats.latencies_ms) == agent.stats.calls
    first = [r for r in server.requests if r["model"] == "solver-shop"][0]
    assert first["temperature"] == 0.0 and first["seed"] == 7 and first["max_tokens"] == 64
    assert "top_p" not in first  # unset sampling parameters are left to the provider
    system = first["messages"][0]
    assert system["role"] == "system" and "Be careful." in system["content"]
    assert "Refund at most once per request" in system["content"]  # the world's policies
    assert first["messages"][1] == {"role": "user", "content": shop.scenario(SHOP).request}
    assert {t["function"]["name"] for t in first["tools"]} >= {"get_order", "issue_refund", "finish"}


def test_the_api_key_is_sent(server: ModelServer, shop: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REHEARSAL_TEST_KEY", "sk-test-123")
    server.script("keyed", Reply.call("give_up", reason="only the key matters"))
    s = shop.scenario(SHOP)
    agent = OpenAIAgent(AgentProfile(name="k", model="keyed"),
                        Endpoint(base_url=server.base_url, api_key_env="REHEARSAL_TEST_KEY"))
    run_episode(RehearsalEnv(s, shop), agent)
    assert server.authorizations[server.requests.index(last_request(server, "keyed"))] == "Bearer sk-test-123"


def test_solves_an_analytics_question(server: ModelServer) -> None:
    analytics = load_world("analytics")
    with ModelServer(world=analytics) as s:
        result, agent = play(s, analytics, "revenue-0002", "solver-analytics")
    assert result.verdict.outcome.value == "verified"
    assert result.verdict.metrics.tokens == 100 * agent.stats.calls


def test_parallel_calls_run_in_order_and_each_gets_its_answer(server: ModelServer, shop: World) -> None:
    server.script("parallel",
                  Reply.calls(("get_order", {"order_id": 3294}), ("find_customer", {"email": "nobody@example.com"}),
                              tokens=300),
                  Reply.call("give_up", reason="enough"))
    result, agent = play(server, shop, SHOP, "parallel")
    trace = result.episode.trace
    assert [t.tool for t in trace] == ["get_order", "find_customer", "give_up"]
    assert json.loads(trace[0].action)["usage"] == {"tokens": 300, "input_tokens": 240, "output_tokens": 60}
    assert "usage" not in json.loads(trace[1].action)  # a reply's usage rides on its first action only
    second = last_request(server, "parallel")["messages"]
    assistant = next(i for i, m in enumerate(second) if m.get("tool_calls"))
    ids = [c["id"] for c in second[assistant]["tool_calls"]]
    answered = [m["tool_call_id"] for m in second[assistant + 1:assistant + 3]]
    assert answered == ids  # the tool messages follow the calls, in order
    assert result.verdict.metrics.tokens == 400


def test_episode_ending_mid_batch_answers_every_call(server: ModelServer, shop: World) -> None:
    server.script("mid-batch", Reply.calls(("give_up", {"reason": "stop"}), ("get_order", {"order_id": 3294})))
    result, agent = play(server, shop, SHOP, "mid-batch")
    assert [t.tool for t in result.episode.trace] == ["give_up"]
    transcript = agent.conversation.transcript()
    calls = [c["id"] for m in transcript if m.get("tool_calls") for c in m["tool_calls"]]
    answers = {m["tool_call_id"]: json.loads(m["content"]) for m in transcript if m["role"] == "tool"}
    assert set(answers) == set(calls)
    assert answers[calls[1]]["status"] == "not_run"


@pytest.mark.parametrize(("reply", "problem", "kind"), [
    (Reply.raw_call("get_order", '{"order_id": 32'), "not valid JSON", "malformed_json"),
    (Reply.call("refund_everything", order_id=3294), "no tool 'refund_everything'", "unknown_tool"),
])
def test_malformed_calls_are_rejected_attempts_the_model_sees(server: ModelServer, shop: World, reply: Reply,
                                                              problem: str, kind: str) -> None:
    model = f"malformed-{problem}"
    server.script(model, reply, Reply.call("give_up", reason="after the rejection"))
    result, agent = play(server, shop, SHOP, model)
    first = result.episode.trace[0]
    assert first.status == "rejected"
    assert result.verdict.metrics.rejected_attempts == 1 and agent.rejections == {1: kind}
    assert result.verdict.ending.value == "gave_up" and result.verdict.outcome.value == "not_achieved"
    assert result.verdict.metrics.tokens == 200  # the rejected reply's usage still counts
    answer = tool_answers(last_request(server, model))[0]  # the model's real call stays, with its answer
    assert answer["status"] == "rejected" and problem in json.dumps(answer)


@pytest.mark.parametrize(("reply", "note", "kind"), [
    (Reply(tool_calls=(("finish", '{"message": "Done."}'),), finish_reason="length"), "cut off", "cut_off_length"),
    (Reply.text("I will refund the Mini Backp", finish_reason="length"), "cut off", "cut_off_length"),
    (Reply(content=None), "neither text nor a tool call", "empty_reply"),
])
def test_dropped_replies_stay_out_of_the_history(server: ModelServer, shop: World, reply: Reply, note: str,
                                                 kind: str) -> None:
    model = f"dropped-{kind}-{reply.content}"
    server.script(model, reply, Reply.call("get_order", order_id=3294), Reply.call("give_up", reason="stop"))
    result, agent = play(server, shop, SHOP, model)
    first = result.episode.trace[0]
    assert first.status == "rejected"  # never carried out: a cut-off finish does not end the episode
    assert agent.rejections == {1: kind} and json.loads(first.action)["args"]["dropped_reply"]["kind"] == kind
    assert result.verdict.metrics.tokens == 300  # the dropped reply's usage still counts
    after, last = [r for r in server.requests if r["model"] == model][1:]
    assert after["messages"][-1]["role"] == "user" and note in after["messages"][-1]["content"]
    assert after["messages"][-1]["content"].startswith("[From the environment, not the customer]")
    for request in (after, last):  # no call stands in for the dropped reply; the note is gone next time
        assert [m for m in request["messages"] if m["role"] == "assistant"] == last["messages"][2:3][:len(
            [m for m in request["messages"] if m["role"] == "assistant"])]
        assert "invalid_reply" not in json.dumps(request["messages"])
    assert not any(note in str(m.get("content")) for m in last["messages"])


def test_rate_limit_then_success_is_retried(server: ModelServer, shop: World) -> None:
    server.script("limited", Reply.error(429, "slow down", retry_after_ms=5), Reply.error(503, "busy"))
    result, agent = play(server, shop, SHOP, "limited")  # then the solver answers
    assert result.verdict.outcome.value == "verified"
    assert agent.stats.retries == 2


@pytest.mark.parametrize("replies", [
    [Reply.error(500, "boom")] * 3,
    [Reply.error(429, "quota", retry_after_ms=1)] * 3,
], ids=["5xx", "429"])
def test_provider_failures_end_in_a_provider_error(server: ModelServer, shop: World, replies: list[Reply]) -> None:
    model = f"failing-{id(replies)}"
    server.script(model, *replies)
    s = shop.scenario(SHOP)
    agent = OpenAIAgent(AgentProfile(name="t", model=model),
                        Endpoint(base_url=server.base_url, **{**FAST, "timeout_s": 0.2, "max_retries": 2}))
    env = RehearsalEnv(s, shop)
    observation, info = env.reset()
    with pytest.raises(ProviderError) as caught:  # the agent raises; the runner records it not scored
        agent(observation, info)
    env.close()
    error = caught.value
    assert isinstance(error, NotScoredError) and error.cause is NotScoredCause.PROVIDER
    assert error.tries == 3 and "not scored" in str(error)


def test_unknown_model_stops_the_run(server: ModelServer, shop: World) -> None:
    server.script("missing", Reply.error(404, "The model 'missing' does not exist"))
    with pytest.raises(ProviderRefused, match="does not exist.*fix the profile's model name"):
        play(server, shop, SHOP, "missing")


def test_context_too_long_is_the_profiles_fault_and_scored(server: ModelServer, shop: World) -> None:
    server.script("too-long", Reply.call("get_order", order_id=3294),
                  Reply.error(400, "This model's maximum context length is 4096 tokens"))
    result, _ = play(server, shop, SHOP, "too-long")
    assert result.verdict.ending.value == "gave_up" and result.verdict.outcome.value == "not_achieved"
    reason = json.loads(result.episode.trace[-1].action)["args"]["reason"]
    assert "maximum context length" in reason and "agent profile's fault" in reason


def test_a_context_refusal_the_profiles_context_contradicts_is_the_providers_and_not_scored(
        server: ModelServer, shop: World) -> None:
    # llama-cpp-python's chatml-function-calling counts its own runaway first completion "in the messages"
    refused = ("This model's maximum context length is 8192 tokens. However, you requested 8192 tokens (8192 in the "
               "messages, 0 in the completion). Please reduce the length of the messages or completion.")
    for context in (8192, None):  # the request (about 2,300 tokens) fits the declared context; none declared
        server.script("ctx", Reply.error(400, refused))
        profile = AgentProfile(name="t", model="ctx", context=context, sampling=Sampling(max_tokens=64))
        agent = OpenAIAgent(profile, Endpoint(base_url=server.base_url, **FAST))
        env = RehearsalEnv(shop.scenario(SHOP), shop)
        observation, info = env.reset()
        if context is not None:
            with pytest.raises(ProviderError, match="within the profile's context of 8192") as caught:
                agent(observation, info)
            assert caught.value.cause is NotScoredCause.PROVIDER and caught.value.status == 400
        else:  # nothing says the server miscounted: the profile's fault, scored
            reason = json.loads(agent(observation, info))["args"]["reason"]
            assert "maximum context length" in reason and "agent profile's fault" in reason
        env.close()


def test_missing_usage_leaves_tokens_unmeasured(server: ModelServer, shop: World) -> None:
    server.script("no-usage", Reply.call("get_order", tokens=None, order_id=3294),
                  Reply.call("give_up", tokens=None, reason="done looking"))
    result, agent = play(server, shop, SHOP, "no-usage")
    assert result.verdict.metrics.tokens is None  # unknown, not zero: efficiency is unmeasured
    assert agent.stats.replies_without_usage == 2 and agent.stats.tokens == 0


def test_text_goes_to_the_customer_then_finishes(server: ModelServer, shop: World) -> None:
    server.script("chatty", Reply.text("Which item arrived broken?"), Reply.text("Thanks, all sorted."))
    result, _ = play(server, shop, SHOP, "chatty")
    trace = result.episode.trace
    assert [t.tool for t in trace] == ["ask_customer", "finish"]  # one contact allowed, then the last word
    assert json.loads(trace[0].action)["args"] == {"question": "Which item arrived broken?"}
    assert json.loads(trace[1].action)["args"] == {"message": "Thanks, all sorted."}
    assert result.verdict.ending.value == "done" and result.verdict.metrics.false_completion
    second = last_request(server, "chatty")["messages"]
    assert second[-2] == {"role": "assistant", "content": "Which item arrived broken?"}
    assert second[-1]["role"] == "user"  # the customer's answer comes back as the customer's message


# -- runs: the CLI, records, concurrency, not scored ---------------------------------------------

DEV = ("refund-item-0004", "order-count-question-0002", "cancel-order-0004")


def test_rehearsal_run_against_the_test_server(server: ModelServer, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    scenarios = [a for s in DEV for a in ("--scenario", s)]
    code = main(["run", "--world", "shop", "--agent", "openai:scripted", "--base-url", server.base_url, *scenarios,
                 "--out", str(tmp_path), "--quiet"])
    assert code == 0, capsys.readouterr().err
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["verified"] == summary["episodes"] == len(DEV)
    assert summary["model_calls"] > 0 and summary["tokens_per_episode"] > 0
    assert summary["model_latency_ms_per_episode"] > 0
    for r in read_records(tmp_path):
        assert r.agent == "openai:scripted" and r.agent_version.startswith("unregistered-")
        assert r.model == "scripted" and r.model_calls == r.turns
        assert r.tokens == 100 * r.turns and r.model_latency_ms is not None and r.model_latency_ms > 0


def test_in_flight_episodes_record_what_a_serial_run_records(server: ModelServer, tmp_path: Path) -> None:
    profile = AgentProfile(name="p", model="scripted", sampling=Sampling(temperature=0.0))
    shaped = {"world": "shop", "agent": "p", "agent_version": "v1", "scenarios": DEV, "repeats": 2,
              "agent_profile": profile.to_toml(), "endpoint": Endpoint(base_url=server.base_url), "run_id": "run_same"}
    run(RunConfig(**shaped), tmp_path / "serial")  # type: ignore[arg-type]
    run(RunConfig(**shaped, concurrency=4), tmp_path / "inflight")  # type: ignore[arg-type]

    def comparable(path: Path) -> list[tuple[Any, ...]]:
        return [(r.scenario, r.repeat, r.outcome, r.tokens, r.model_calls, [t.action for t in r.trace],
                 [t.observation for t in r.trace]) for r in read_records(path)]

    assert comparable(tmp_path / "serial") == comparable(tmp_path / "inflight")


def test_each_repeat_sends_its_own_seed_the_same_on_a_rerun(tmp_path: Path) -> None:
    """Repeat k resets with seed + k and sends sampling.seed + that seed: repeats sample their own replies."""
    seeds: list[list[int]] = []
    for attempt in range(2):
        with ModelServer(world=load_world("shop")) as s:
            profile = AgentProfile(name="p", model="seeded", sampling=Sampling(temperature=0.7, seed=7))
            run(RunConfig(world="shop", agent="p", agent_version="v1", scenarios=DEV[:1], repeats=3, seed=10,
                          agent_profile=profile.to_toml(), endpoint=Endpoint(base_url=s.base_url)),
                tmp_path / str(attempt))
            seeds.append([r["seed"] for r in s.requests if len(r["messages"]) == 2])  # each episode's first call
    assert seeds[0] == seeds[1] == [17, 18, 19]


@pytest.mark.parametrize("concurrency", [1, 2])
def test_a_provider_that_stays_down_is_not_scored(tmp_path: Path, concurrency: int) -> None:
    with ModelServer() as down:  # no world: scripted replies only
        down.script("m", *[Reply.error(503, "overloaded")] * 8)
        profile = AgentProfile(name="p", model="m")
        config = RunConfig(world="shop", agent="p", scenarios=DEV[:2], agent_profile=profile.to_toml(),
                           endpoint=Endpoint(base_url=down.base_url, max_retries=1), concurrency=concurrency,
                           retries=0)  # the run's retries of not-scored episodes: tests/test_retries.py
        summary = run(config, tmp_path)
    assert summary["not_scored"] == summary["episodes"] == 2
    for r in read_records(tmp_path):
        assert r.not_scored_cause == "provider" and "after 2 tries" in (r.reason or "")
        assert r.reward is None and r.outcome_reward is None  # never scored against the agent


def test_an_unknown_model_stops_the_run_before_it_starts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with ModelServer() as s:
        s.script("nope", Reply.error(404, "The model 'nope' does not exist"))
        code = main(["run", "--world", "shop", "--agent", "openai:nope", "--base-url", s.base_url,
                     "--out", str(tmp_path), "--quiet"])
    assert code == 2
    err = capsys.readouterr().err
    assert "does not exist" in err and "fix the profile's model name" in err
    assert not (tmp_path / "summary.json").exists()


def test_the_profiles_call_budget_ends_the_episode_scored(server: ModelServer, shop: World) -> None:
    server.script("budget", *[Reply.call("get_order", order_id=3294)] * 2)
    s = shop.scenario(SHOP)
    agent = OpenAIAgent(AgentProfile(name="b", model="budget", max_model_calls=2), Endpoint(base_url=server.base_url))
    result = run_episode(RehearsalEnv(s, shop), agent)
    assert agent.stats.calls == 2 and [t.tool for t in result.episode.trace] == ["get_order", "get_order", "give_up"]
    assert result.verdict.outcome.value == "not_achieved" and server.pending("budget") == 0
