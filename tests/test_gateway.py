"""``rehearsal gateway``: a harness's model calls forwarded, streamed and logged per episode.

The provider is the OpenAI-protocol test server (``rehearsal_env.agents.testing.ModelServer``: real HTTP,
its solver plays the scenario's reference); the gateway is a real uvicorn server on 127.0.0.1; the
harness is :func:`rehearsal_env.harness.drive` with the official ``openai`` and ``mcp`` clients. Needs the
``mcp`` extra for the episode tests; skips without it unless ``REHEARSAL_REQUIRE_MCP=1``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import httpx
import openai
import pytest
from test_live_model import live_server  # noqa: F401  (the tiny model's server fixture: started, skipped, required)

from rehearsal_env import RehearsalEnv
from rehearsal_env.agents.testing import ModelServer, Reply
from rehearsal_env.gateway import (
    HARNESS_CLOSED,
    PROVIDER_FAILED,
    REFUSED,
    RETRY_STATUSES,
    GatewayConfig,
    Ledger,
    gateway_app,
)
from rehearsal_env.records import read_records
from rehearsal_env.serve import Principal, Scope, ServerThread
from rehearsal_env.worlds import load_world

WORLD = load_world("shop")
LIVE_CALLS = 2
"""Model calls the live episode may make (about 3 s each on one idle core, as in test_live_model)."""
SCENARIO = WORLD.scenario("refund-item-0004")
LOCAL = Principal("local", Scope.BUILD_AND_EVALUATE)


def _need_mcp() -> None:
    if importlib.util.find_spec("mcp") is None:
        if os.environ.get("REHEARSAL_REQUIRE_MCP") == "1":
            pytest.fail("REHEARSAL_REQUIRE_MCP=1 but the mcp extra is not installed: pip install -e '.[mcp]'")
        pytest.skip("the mcp extra is not installed (pip install -e '.[mcp]')")


@pytest.fixture
def provider() -> Iterator[ModelServer]:
    with ModelServer(world=WORLD) as server:
        yield server


@pytest.fixture
def gateway(provider: ModelServer, tmp_path: Path) -> Iterator[tuple[str, Ledger]]:
    ledger = Ledger(tmp_path / "ledger")
    with ServerThread(gateway_app(GatewayConfig(upstream=provider.base_url, ledger=ledger))) as server:
        yield server.url, ledger


def _in_process(actions: list[tuple[str, Any]], profile: str | None) -> tuple[str, float]:
    env = RehearsalEnv(SCENARIO, WORLD, reward_profile=profile)
    env.reset(seed=0)
    reward = 0.0
    info: dict[str, Any] = {}
    for tool, args in actions:
        _, reward, terminated, truncated, info = env.step(json.dumps({"tool": tool, "args": args}))
        if terminated or truncated:
            break
    env.close()
    return info["verdict"].outcome.value, reward


def _episode(tmp_path: Path, url: str, ledger: Ledger, link: str, model: str = "solver",
             max_retries: int = 0) -> tuple[Any, list[Any]]:
    """Play SCENARIO through MCP (in memory) with the model behind the gateway; the harness's result and the
    run directory's records."""
    from rehearsal_env.harness import EpisodeServerConfig, EpisodeSpec, Storage, connected, drive, episode_runtime

    runtime = episode_runtime(EpisodeServerConfig(spec=EpisodeSpec(world=WORLD, scenario=SCENARIO,
                                                                   reward_profile="rl"),
                                                  who=LOCAL, ledger=ledger, link=link),
                              Storage(out=tmp_path / "runs"))

    async def main() -> Any:
        async with openai.AsyncOpenAI(base_url=f"{url}/episodes/{link}/v1", api_key="unused",
                                      max_retries=max_retries) as client, \
                connected(runtime.server) as session:
            init = await session.initialize()
            try:
                return await drive(session, client, model, instructions=init.instructions or "")
            except openai.APIError as exc:
                return exc

    played = anyio.run(main)
    runtime.close()
    return played, list(read_records(tmp_path / "runs" / "shop-rl"))


def test_an_episode_through_the_gateway_has_measured_tokens(gateway: tuple[str, Ledger], tmp_path: Path) -> None:
    _need_mcp()
    url, ledger = gateway
    played, (record,) = _episode(tmp_path, url, ledger, "ep-one")
    calls = ledger.read("ep-one")
    assert played.ended is not None and played.ended["caveats"] == []
    assert len(calls) == played.model_calls and all(c["status"] == "ok" and c["latency_s"] > 0 for c in calls)
    assert record.tokens == sum(c["usage"]["total_tokens"] for c in calls) == 100 * len(calls)
    assert {c.name: c.value for c in record.reward_components}["efficiency"] is not None
    outcome, reward = _in_process(played.actions, "rl")
    assert record.outcome == played.ended["verdict"]["outcome"] == outcome and record.reward == pytest.approx(reward)
    kept = Path(played.ended["run_dir"]) / "gateway" / f"{played.ended['episode_id']}.jsonl"
    assert [json.loads(line) for line in kept.read_text().splitlines()] == calls


def test_streaming_is_relayed_and_logged(gateway: tuple[str, Ledger], provider: ModelServer) -> None:
    url, ledger = gateway
    provider.script("m", Reply.text("one two three"), Reply.text("four five"))
    client = openai.OpenAI(base_url=f"{url}/episodes/s1/v1", api_key="k", max_retries=0)
    chunks = list(client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}],
                                                 stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "one two three"
    assert all(c.choices for c in chunks)  # the usage chunk the gateway asked for is not passed on
    asked = list(client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}],
                                                stream=True, stream_options={"include_usage": True}))
    assert asked[-1].usage is not None and asked[-1].usage.total_tokens == 100
    deadline = time.monotonic() + 10  # a stream is logged once relayed, just after the client read its end
    while len(ledger.read("s1")) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    first, second = ledger.read("s1")
    assert first["stream"] and first["usage"]["total_tokens"] == 100 and first["first_byte_s"] is not None
    assert second["call"] == 1 and provider.requests[0]["stream_options"] == {"include_usage": True}


def test_links_by_path_or_header(gateway: tuple[str, Ledger], provider: ModelServer) -> None:
    url, ledger = gateway
    provider.script("m", Reply.text("hi"))
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    by_header = httpx.post(f"{url}/v1/chat/completions", json=body, headers={"x-rehearsal-link": "h1"})
    assert by_header.status_code == 200 and ledger.read("h1")[0]["usage"]["total_tokens"] == 100
    assert httpx.post(f"{url}/v1/chat/completions", json=body).status_code == 400
    assert httpx.post(f"{url}/episodes/a%2F..%2Fb/v1/chat/completions", json=body).status_code in (400, 404)
    assert httpx.post(f"{url}/episodes/x/v1/chat/completions", content=b"{not json").status_code == 400
    assert httpx.get(f"{url}/episodes/x/v1/models").status_code == 200


def test_the_provider_failing_makes_an_abandoned_episode_not_scored(gateway: tuple[str, Ledger],
                                                                     provider: ModelServer, tmp_path: Path) -> None:
    _need_mcp()
    url, ledger = gateway
    provider.script("flaky", Reply.call("get_order", order_id=3216), Reply.error(503, "overloaded"))
    played, (record,) = _episode(tmp_path, url, ledger, "ep-flaky", model="flaky")
    assert isinstance(played, openai.InternalServerError)  # the harness saw the provider's 503 and stopped
    assert [c["status"] for c in ledger.read("ep-flaky")] == ["ok", PROVIDER_FAILED]
    assert record.outcome == "not_scored" and record.not_scored_cause == "provider" and record.turns == 1


def test_a_refused_request_is_the_harness_s_and_the_episode_is_scored(gateway: tuple[str, Ledger],
                                                                    provider: ModelServer, tmp_path: Path) -> None:
    _need_mcp()
    url, ledger = gateway
    provider.script("tooshort", Reply.call("get_order", order_id=3216), Reply.error(400, "context too long"))
    played, (record,) = _episode(tmp_path, url, ledger, "ep-400", model="tooshort")
    assert isinstance(played, openai.BadRequestError)
    assert [c["status"] for c in ledger.read("ep-400")] == ["ok", REFUSED]
    assert record.outcome != "not_scored" and record.ending == "gave_up"



def test_a_provider_failure_the_harness_got_past_leaves_the_episode_scored(
        gateway: tuple[str, Ledger], provider: ModelServer, tmp_path: Path) -> None:
    _need_mcp()
    url, ledger = gateway
    provider.script("retried", Reply.error(503, "overloaded"), Reply.text("I cannot help"))
    played, (record,) = _episode(tmp_path, url, ledger, "ep-past", model="retried", max_retries=1)
    assert played.ended is None and played.model_calls == 1  # the client's own retry got the answer
    assert [c["status"] for c in ledger.read("ep-past")] == [PROVIDER_FAILED, "ok"]
    assert record.outcome != "not_scored" and record.ending == "gave_up" and record.tokens == 100


def test_an_unreachable_provider_is_a_provider_failure(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ledger = Ledger(tmp_path / "ledger")
    with ServerThread(gateway_app(GatewayConfig(upstream=f"http://127.0.0.1:{port}/v1", ledger=ledger))) as gw:
        answer = httpx.post(f"{gw.url}/episodes/u1/v1/chat/completions", json={"model": "m", "messages": []})
    assert answer.status_code == 502 and "did not answer" in answer.json()["error"]["message"]
    (call,) = ledger.read("u1")
    assert call["status"] == PROVIDER_FAILED and call["http_status"] is None and call["error"]


def test_the_gateway_and_the_openai_agent_blame_the_provider_for_the_same_statuses() -> None:
    from rehearsal_env.agents import _provider

    assert RETRY_STATUSES == _provider.RETRY_STATUSES


Play = Callable[[Any, openai.AsyncOpenAI], Awaitable[None]]
"""What a harness does with its MCP session and its model client before it disconnects."""


def _hosted(tmp_path: Path, url: str, ledger: Ledger, link: str, play: Play) -> Any:
    """Host SCENARIO over MCP (in memory) with ``ledger``, let ``play`` drive it through the gateway at ``url``,
    disconnect (the episode is settled ``disconnect``) and return its record."""
    from rehearsal_env.harness import EpisodeServerConfig, EpisodeSpec, Storage, connected, episode_runtime

    runtime = episode_runtime(EpisodeServerConfig(spec=EpisodeSpec(world=WORLD, scenario=SCENARIO,
                                                                   reward_profile="rl"),
                                                  who=LOCAL, ledger=ledger, link=link),
                              Storage(out=tmp_path / "runs"))

    async def main() -> None:
        async with openai.AsyncOpenAI(base_url=f"{url}/episodes/{link}/v1", api_key="unused",
                                      max_retries=0) as client, \
                connected(runtime.server) as session:
            await session.initialize()
            await session.list_tools()  # the episode starts
            await play(session, client)

    anyio.run(main)
    runtime.close()
    (record,) = read_records(tmp_path / "runs" / "shop-rl")
    return record


async def _logged(ledger: Ledger, link: str, calls: int) -> list[dict[str, Any]]:
    """The ledger's calls for ``link`` once it holds ``calls`` of them (the gateway logs a stream's end, or a
    hang-up, as soon as it sees it, which may be just after the harness saw it)."""
    deadline = time.monotonic() + 10
    while len(ledger.read(link)) < calls and time.monotonic() < deadline:
        await anyio.sleep(0.02)
    return ledger.read(link)


def test_a_stream_the_harness_hangs_up_is_the_harness_s_doing_not_a_provider_failure(
        gateway: tuple[str, Ledger], provider: ModelServer, tmp_path: Path) -> None:
    """Issue 31: a harness that cuts one streamed call off and then disconnects gave up; its episode is scored
    (before, the hang-up was logged ``provider_failed`` and the episode became ``not_scored (provider)``)."""
    _need_mcp()
    url, ledger = gateway
    provider.script("runaway", Reply.runaway())

    async def play(session: Any, client: openai.AsyncOpenAI) -> None:
        await session.call_tool("get_order", {"order_id": 3216})
        stream = await client.chat.completions.create(model="runaway", stream=True,
                                                      messages=[{"role": "user", "content": "hi"}])
        seen = 0
        async for _ in stream:  # the provider streams on and on; the harness stops reading after three chunks
            seen += 1
            if seen == 3:
                break
        await stream.close()
        (call,) = await _logged(ledger, "ep-hangup", 1)  # the gateway saw the hang-up before the disconnect
        assert call["status"] == HARNESS_CLOSED and call["http_status"] == 200 and call["stream"], call

    record = _hosted(tmp_path, url, ledger, "ep-hangup", play)
    assert record.outcome != "not_scored" and record.not_scored_cause is None and record.ending == "gave_up"
    assert record.turns == 2 and "disconnected" in json.loads(record.trace[-1].action)["args"]["reason"]


class _BrokenStream(BaseHTTPRequestHandler):
    """A provider that starts a chunked event stream, sends one chunk, and drops the connection mid-answer."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        chunk = b'data: {"id": "x", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": ' \
                b'{"role": "assistant", "content": "Let me"}}]}\n\n'
        self.wfile.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                         + f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
        self.wfile.flush()
        self.close_connection = True  # no terminating chunk: the answer broke off on the provider's side

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass


@pytest.mark.parametrize("failure", ["5xx", "broken stream"])
def test_a_streamed_call_the_provider_failed_before_the_disconnect_is_not_scored(
        failure: str, provider: ModelServer, tmp_path: Path) -> None:
    """What the provider did is still its failure with streams: a 503 answer to a streamed call, or a stream the
    provider broke off, last before the harness disconnects, makes the episode ``not_scored`` (cause ``provider``)."""
    _need_mcp()
    provider.script("flaky", Reply.error(503, "overloaded"))
    broken = ThreadingHTTPServer(("127.0.0.1", 0), _BrokenStream)
    threading.Thread(target=broken.serve_forever, daemon=True).start()
    upstream = provider.base_url if failure == "5xx" else f"http://127.0.0.1:{broken.server_address[1]}/v1"
    ledger = Ledger(tmp_path / "ledger")

    async def play(session: Any, client: openai.AsyncOpenAI) -> None:
        await session.call_tool("get_order", {"order_id": 3216})
        with pytest.raises(openai.APIError):
            async for _ in await client.chat.completions.create(model="flaky", stream=True,
                                                                messages=[{"role": "user", "content": "hi"}]):
                pass
        (call,) = await _logged(ledger, "ep-failed", 1)
        assert call["status"] == PROVIDER_FAILED and call["http_status"] == (503 if failure == "5xx" else None), call

    try:
        with ServerThread(gateway_app(GatewayConfig(upstream=upstream, ledger=ledger))) as gw:
            record = _hosted(tmp_path, gw.url, ledger, "ep-failed", play)
    finally:
        broken.shutdown()
        broken.server_close()
    assert record.outcome == "not_scored" and record.not_scored_cause == "provider" and record.turns == 1


def test_a_provider_failure_logged_under_the_link_before_the_episode_is_not_its_own(
        gateway: tuple[str, Ledger], provider: ModelServer, tmp_path: Path) -> None:
    """A call logged under a link before the episode holding that link began is not the episode's client's: a
    harness that names a link whose last call the provider failed (another episode's, or one it prepared) and
    disconnects gave up."""
    _need_mcp()
    url, ledger = gateway
    provider.script("flaky", Reply.error(503, "overloaded"))
    body = {"model": "flaky", "messages": [{"role": "user", "content": "hi"}]}
    assert httpx.post(f"{url}/episodes/ep-reused/v1/chat/completions", json=body).status_code == 503
    assert [c["status"] for c in ledger.read("ep-reused")] == [PROVIDER_FAILED]
    time.sleep(0.01)  # the ledger's times are in milliseconds

    async def play(session: Any, client: openai.AsyncOpenAI) -> None:
        pass  # lists the tools (the episode starts) and disconnects

    record = _hosted(tmp_path, url, ledger, "ep-reused", play)
    assert record.outcome != "not_scored" and record.not_scored_cause is None and record.ending == "gave_up"


def _replayed(record: Any) -> tuple[str, float | None]:
    """The outcome and reward the Gymnasium env gives the record's actions, sent as recorded."""
    env = RehearsalEnv(SCENARIO, WORLD, reward_profile="rl")
    env.reset(seed=0)
    reward: float | None = None
    info: dict[str, Any] = {}
    for turn in record.trace:
        _, reward, terminated, truncated, info = env.step(turn.action)
        if terminated or truncated:
            break
    env.close()
    return info["verdict"].outcome.value, reward


def test_the_tiny_real_model_plays_an_mcp_episode_through_the_gateway(live_server: str,  # noqa: F811
                                                                      tmp_path: Path) -> None:
    """SmolLM2 behind llama.cpp's OpenAI server (the ``live`` extra; skips without it unless
    ``REHEARSAL_REQUIRE_LIVE_MODEL=1``), through the gateway, driving the episode over MCP: the record's tokens are
    the gateway's, it carries no caveat, and its verdict is what the same actions give in process."""
    _need_mcp()
    from rehearsal_env.harness import EpisodeServerConfig, EpisodeSpec, Storage, connected, drive, episode_runtime

    ledger = Ledger(tmp_path / "ledger")
    runtime = episode_runtime(EpisodeServerConfig(spec=EpisodeSpec(world=WORLD, scenario=SCENARIO,
                                                                   reward_profile="rl", agent="smollm2-mcp"),
                                                  who=LOCAL, ledger=ledger, link="live-1"),
                              Storage(out=tmp_path / "runs"))
    config = GatewayConfig(upstream=live_server, ledger=ledger, logprobs=True, timeout=180.0)

    async def main(url: str) -> Any:
        async with openai.AsyncOpenAI(base_url=f"{url}/episodes/live-1/v1", api_key="unused", max_retries=1,
                                      timeout=180.0) as client, \
                connected(runtime.server) as session:
            init = await session.initialize()
            # auto tool choice lets SmolLM2 answer in text at once; naming the first tool makes it write the call
            return await drive(session, client, "smollm2", instructions=init.instructions or "",
                               max_calls=LIVE_CALLS, temperature=0.0, seed=0, max_tokens=48,
                               tool_choice={"type": "function", "function": {"name": "find_customer"}})

    with ServerThread(gateway_app(config)) as gw:
        played = anyio.run(main, gw.url)
    runtime.close()
    (record,) = read_records(tmp_path / "runs" / "shop-rl")
    calls = ledger.read("live-1")
    print(f"live model through MCP + gateway: {len(calls)} calls, {[c['latency_s'] for c in calls]} s, "
          f"{record.tokens} tokens, {len(played.actions)} tool calls, outcome {record.outcome}")
    assert 1 <= len(calls) == played.model_calls <= LIVE_CALLS and all(c["status"] == "ok" for c in calls)
    assert record.tokens == sum(c["usage"]["total_tokens"] for c in calls) > 0  # the gateway's, llama.cpp's usage
    # llama-cpp-python's function-calling replies carry no logprobs; a plain reply does, and the gateway logs them
    with ServerThread(gateway_app(config)) as gw:
        openai.OpenAI(base_url=f"{gw.url}/episodes/live-text/v1", api_key="unused", timeout=180.0).chat.completions\
            .create(model="smollm2", messages=[{"role": "user", "content": "Say hi."}], max_tokens=4, temperature=0.0)
    (text_call,) = ledger.read("live-text")
    assert text_call["logprobs"] and text_call["usage"]["completion_tokens"] > 0
    assert played.actions and all(tool == "find_customer" for tool, _ in played.actions)  # the model's own calls
    assert "external mode" not in json.dumps(record.reward_components, default=str)
    assert {c.name: c.value for c in record.reward_components}["efficiency"] is not None
    assert record.outcome in ("verified", "not_achieved", "rule_violated")  # the model is weak, never the instrument
    assert (record.outcome, record.reward) == pytest.approx(_replayed(record))


def test_an_episode_without_a_chosen_link_gets_a_fresh_secret_one(tmp_path: Path) -> None:
    """The default link is random and shown only in the episode's opening: never the episode id, which records and
    other keys' reads show, so nobody but the episode's client can log calls under it."""
    _need_mcp()
    from rehearsal_env.episodes import SessionTable
    from rehearsal_env.harness import EpisodeSpec, HostedEpisode

    table = SessionTable()
    try:
        spec = EpisodeSpec(world=WORLD, scenario=SCENARIO)
        first, second = (HostedEpisode(table, LOCAL, spec) for _ in range(2))
        assert first.link != first.id and first.id not in first.link and first.link != second.link
        assert len(first.link) >= 32 and first.opening()["link"] == first.link
    finally:
        table.close()
