"""A model agent's limits on its own side, over real HTTP: tools offered, runaways cut off and scored, the
context respected, and what the model was given stored by hash.

The provider is an outside party, so its test double is fair: the scripted OpenAI-protocol server
(:mod:`rehearsal_env.agents.testing`) streams server-sent events as OpenAI does, and a runaway reply
streams forever. A provider that accepts connections and never answers is a bare socket.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from rehearsal_env.agents import (
    AgentProfile,
    Endpoint,
    OpenAIAgent,
    ProviderError,
    Sampling,
    given_for,
    parse_profile,
)
from rehearsal_env.agents.testing import ModelServer, Reply
from rehearsal_env.cli import main
from rehearsal_env.env import RehearsalEnv
from rehearsal_env.measure import load_run, summarize
from rehearsal_env.readiness import assess
from rehearsal_env.records import EpisodeRecord, read_records
from rehearsal_env.runner import RunConfig, format_table, run, run_episode
from rehearsal_env.worlds import load_world

SHOP = "refund-item-0001"


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer(world="shop") as s:
        yield s


@pytest.fixture
def silent() -> Iterator[str]:
    """A base URL whose server accepts connections and never answers (a provider that hangs)."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue
            except OSError:
                return

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    listener.close()


def run_one(base_url: str, profile: AgentProfile, out: Path, *, retries: int = 1) -> EpisodeRecord:
    config = RunConfig(world="shop", agent=profile.name, agent_version=profile.label, scenarios=(SHOP,),
                       agent_profile=profile.to_toml(), endpoint=Endpoint(base_url=base_url, timeout_s=5.0,
                                                                          max_retries=retries, backoff_s=0.01),
                       retries=0)  # one episode, one record (the run's retries: tests/test_retries.py)
    summary = run(config, out)
    (record,) = read_records(out)
    assert summary["episodes"] == 1
    return record


def kinds(record: EpisodeRecord) -> list[str | None]:
    return [t.rejected_kind for t in record.trace if t.rejected]


# -- tools offered -----------------------------------------------------------------------------

def test_the_tools_are_offered_with_tool_choice_and_the_profiles_provider_options(server: ModelServer) -> None:
    text = """name = "p"
model = "opts"
[provider]
parallel_tool_calls = false
extra_body = { top_k = 40, cache_prompt = true }
"""
    profile = parse_profile(text)
    server.script("opts", Reply.call("give_up", reason="seen"))
    world = load_world("shop")
    run_episode(RehearsalEnv(world.scenario(SHOP), world), OpenAIAgent(profile, Endpoint(base_url=server.base_url)))
    (sent,) = server.requests  # what the server received
    assert sent["tool_choice"] == "auto" and sent["parallel_tool_calls"] is False
    assert sent["top_k"] == 40 and sent["cache_prompt"] is True and sent["stream"] is True
    assert {t["function"]["name"] for t in sent["tools"]} >= {"get_order", "finish", "ask_customer"}
    assert profile.content_hash != parse_profile('name = "p"\nmodel = "opts"\n').content_hash  # a new version


def test_tool_choice_omit_sends_none_and_stream_false_asks_for_one_answer(server: ModelServer) -> None:
    profile = parse_profile('name = "p"\nmodel = "omit"\n[provider]\ntool_choice = "omit"\nstream = false\n')
    server.script("omit", Reply.call("give_up", reason="seen"))
    world = load_world("shop")
    run_episode(RehearsalEnv(world.scenario(SHOP), world), OpenAIAgent(profile, Endpoint(base_url=server.base_url)))
    (sent,) = server.requests
    assert "tool_choice" not in sent and "stream" not in sent and sent["tools"]


def test_a_run_where_no_episode_called_a_world_tool_says_so(server: ModelServer, tmp_path: Path) -> None:
    server.script("talker", Reply.text("I am sure it is fine."), Reply.text("All done, goodbye."))
    record = run_one(server.base_url, AgentProfile(name="talker", model="talker"), tmp_path)
    assert record.world_tool_calls == 0 and record.outcome != "not_scored"
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["no_world_tool_calls"] is True and summary["world_tool_calls"] == 0
    assert "NO WORLD-TOOL CALLS" in format_table(summary)
    (report,) = [summarize(r) for r in load_run(str(tmp_path))]
    assert any("no episode called one of the world's tools" in w for w in report.warnings)  # measure.py says so
    (readiness,) = assess(read_records(tmp_path), versions_root=tmp_path / "versions", profiles_root=tmp_path)
    assert not readiness.ready and any("called one of the world's tools" in x for x in readiness.reasons)


def test_what_the_model_was_given_is_stored_once_by_hash(server: ModelServer, tmp_path: Path) -> None:
    record = run_one(server.base_url, AgentProfile(name="solver", model="scripted", instructions="Be brief."),
                     tmp_path)
    assert record.outcome == "verified" and record.world_tool_calls and record.world_tool_calls >= 2
    system = (tmp_path / "prompts" / f"{record.system_prompt_sha}.txt").read_text()
    tools = json.loads((tmp_path / "prompts" / f"{record.tools_sha}.json").read_text())
    sent = server.requests[0]
    assert sent["messages"][0]["content"] == system and sent["tools"] == tools  # exactly what the server got
    shop = load_world("shop")
    other = next(s for s in shop.scenarios() if s.id != SHOP and s.role == shop.scenario(SHOP).role)
    assert SHOP not in system and "Be brief." in system  # nothing per episode: a prompt cache keeps all of it
    assert given_for("Be brief.", shop, other)["system"][1] == system


# -- runaways: the agent's, scored -------------------------------------------------------------

def test_a_reply_streaming_past_max_tokens_is_cut_off_and_scored(server: ModelServer, tmp_path: Path) -> None:
    server.script("runaway", *[Reply.runaway()] * 3)
    profile = AgentProfile(name="r", model="runaway", sampling=Sampling(max_tokens=16), max_model_calls=3)
    record = run_one(server.base_url, profile, tmp_path)
    assert record.outcome == "not_achieved" and record.not_scored_cause is None  # scored, never not_scored
    assert kinds(record) == ["cut_off_tokens"] * 3 and record.rejected_attempts == 3
    assert record.trace[-1].tool == "give_up" and "max_model_calls" in record.trace[-1].action
    assert record.model_calls == 3 and record.model_latency_ms and record.model_latency_ms > 0


def test_a_reply_streaming_past_max_call_s_is_cut_off_and_scored(server: ModelServer, tmp_path: Path) -> None:
    server.script("forever", *[Reply.runaway()] * 2)
    profile = AgentProfile(name="r", model="forever", max_call_s=0.3, max_model_calls=2)
    record = run_one(server.base_url, profile, tmp_path)
    assert record.outcome == "not_achieved" and record.not_scored_cause is None
    assert kinds(record) == ["cut_off_time"] * 2
    assert record.model_latency_ms is not None and record.model_latency_ms >= 2 * 300  # the failed tries count


def test_an_unstreamed_reply_past_max_call_s_from_a_live_provider_is_the_agents(server: ModelServer,
                                                                                 tmp_path: Path) -> None:
    server.script("slow", *[Reply.runaway(delay_s=3.0)] * 2)
    profile = parse_profile('name = "r"\nmodel = "slow"\nmax_call_s = 0.3\nmax_model_calls = 2\n'
                            '[provider]\nstream = false\n')
    record = run_one(server.base_url, profile, tmp_path)
    assert record.outcome == "not_achieved" and kinds(record) == ["cut_off_time"] * 2


def test_a_provider_that_never_answers_is_not_scored(silent: str, tmp_path: Path) -> None:
    profile = AgentProfile(name="r", model="m", max_call_s=0.3)
    record = run_one(silent, profile, tmp_path, retries=1)
    assert record.outcome == "not_scored" and record.not_scored_cause == "provider"
    assert "after 2 tries" in (record.reason or "")


def test_a_provider_that_never_answers_raises_from_the_agent(silent: str) -> None:
    world = load_world("shop")
    env = RehearsalEnv(world.scenario(SHOP), world)
    agent = OpenAIAgent(AgentProfile(name="r", model="m", max_call_s=0.2),
                        Endpoint(base_url=silent, max_retries=0))
    observation, info = env.reset()
    with pytest.raises(ProviderError):
        agent(observation, info)
    env.close()
    assert agent.stats.calls == 0 and agent.stats.latency_ms >= 200  # the failed try still counts


def test_nothing_listening_fails_the_run_at_once_with_one_line(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    code = main(["run", "--world", "shop", "--agent", "openai:m", "--base-url", f"http://127.0.0.1:{port}/v1",
                 "--out", str(tmp_path / "run"), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code != 0 and len(err.splitlines()) == 1 and err.startswith("rehearsal: error:")
    assert not (tmp_path / "run" / "summary.json").exists()


# -- the context ----------------------------------------------------------------------------------

def test_a_prompt_over_the_profiles_context_is_never_sent_and_the_reason_says_so(server: ModelServer,
                                                                                 tmp_path: Path) -> None:
    profile = AgentProfile(name="small", model="small", context=500)
    record = run_one(server.base_url, profile, tmp_path)
    assert not server.requests  # nothing was sent
    reason = json.loads(record.trace[-1].action)["args"]["reason"]
    assert record.trace[-1].tool == "give_up" and "does not fit the model's context" in reason
    assert "context of 500 tokens" in reason and record.outcome == "not_achieved"


def test_context_max_call_s_and_provider_round_trip_through_toml() -> None:
    text = ('name = "p"\nmodel = "m"\ncontext = 8192\nmax_call_s = 90.0\n[provider]\ntool_choice = "required"\n'
            'parallel_tool_calls = true\nextra_body = { top_k = 40, grammar = { kind = "json" } }\n')
    profile = parse_profile(text)
    again = parse_profile(profile.to_toml())
    assert again == profile and again.content_hash == profile.content_hash
    assert profile.provider.request_params(True) == {"tool_choice": "required", "parallel_tool_calls": True,
                                                     "top_k": 40, "grammar": {"kind": "json"}}
    plain = AgentProfile(name="p", model="m")
    assert "[provider]" not in plain.to_toml()  # defaults are not written, so old profiles keep their hash


@pytest.mark.parametrize(("text", "message"), [
    ('[provider]\ntool_choice = "sometimes"\n', "tool_choice to be one of auto, required, none, omit"),
    ("[provider]\nextra_body = { model = \"x\" }\n", "may not set ['model']"),
    ("[provider]\nretries = 3\n", "unknown [provider] key(s) ['retries']"),
    ("context = 0\n", "context to be the model's context in tokens"),
    ("max_call_s = -1\n", "max_call_s to be seconds > 0"),
])
def test_bad_limits_and_provider_options_are_refused(text: str, message: str) -> None:
    head, _, rest = text.partition("[provider]")
    body = f'name = "p"\nmodel = "m"\n{head}' + (f"[provider]{rest}" if rest or "[provider]" in text else "")
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")
                       .replace(")", r"\)")):
        parse_profile(body)
