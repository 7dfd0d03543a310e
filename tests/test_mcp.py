"""``rehearsal mcp``: an episode and the product's tools over MCP, driven by the mcp SDK's own client.

Over stdio (the real ``rehearsal mcp`` process), streamable HTTP (a real uvicorn server on
127.0.0.1, port 0) and the SDK's in-memory transport (where a test must hold a call mid-step).
Needs the ``mcp`` extra; skips without it unless ``REHEARSAL_REQUIRE_MCP=1``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest

from rehearsal_env import RehearsalEnv
from rehearsal_env.records import read_records
from rehearsal_env.serve import Principal, Scope, ServerThread
from rehearsal_env.worlds import load_world

if importlib.util.find_spec("mcp") is None:
    if os.environ.get("REHEARSAL_REQUIRE_MCP") == "1":
        pytest.fail("REHEARSAL_REQUIRE_MCP=1 but the mcp extra is not installed: pip install -e '.[mcp]'",
                    pytrace=False)
    pytest.skip("the mcp extra is not installed (pip install -e '.[mcp]')", allow_module_level=True)

from mcp import Client, ClientSession, StdioServerParameters, types  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

from rehearsal_env.harness import (  # noqa: E402
    EPISODE_URI,
    MCP_PATH,
    PROMPT,
    EpisodeServerConfig,
    EpisodeSpec,
    Storage,
    connected,
    episode_runtime,
    http_app,
    product_server,
)

WORLD = load_world("shop")
SCENARIO = WORLD.scenario("refund-item-0004")
LOCAL = Principal("local", Scope.BUILD_AND_EVALUATE)
CLI = [sys.executable, "-c", "import sys; from rehearsal_env.cli import main; sys.exit(main())"]


def _reference() -> list[tuple[str, dict[str, Any]]]:
    return [(c.tool, dict(c.args)) for c in SCENARIO.reference.calls]


def _in_process(calls: list[tuple[str, Any]]) -> tuple[str, float]:
    """The outcome and reward the Gymnasium env gives the same actions."""
    env = RehearsalEnv(SCENARIO, WORLD)
    env.reset(seed=0)
    info: dict[str, Any] = {}
    reward = 0.0
    for tool, args in calls:
        _, reward, terminated, truncated, info = env.step(json.dumps({"tool": tool, "args": args}))
        if terminated or truncated:
            break
    env.close()
    return info["verdict"].outcome.value, reward


def _runtime(tmp_path: Path, idle: float = 300.0) -> Any:
    config = EpisodeServerConfig(spec=EpisodeSpec(world=WORLD, scenario=SCENARIO), who=LOCAL, idle_timeout=idle)
    return episode_runtime(config, Storage(out=tmp_path / "runs"))


def _records(tmp_path: Path) -> list[Any]:
    return list(read_records(tmp_path / "runs" / "shop-outcome"))


async def _play(session: ClientSession, calls: list[tuple[str, Any]]) -> list[types.CallToolResult]:
    return [await session.call_tool(tool, args) for tool, args in calls]


def test_stdio_episode_exposes_the_role_and_plays_like_the_env(tmp_path: Path) -> None:
    params = StdioServerParameters(command=CLI[0], args=[*CLI[1:], "mcp", "--scenario", f"shop/{SCENARIO.id}",
                                                         "--out", str(tmp_path / "runs")], cwd=str(tmp_path),
                                    env=dict(os.environ))  # the SDK passes only a few variables by default

    async def main() -> tuple[Any, ...]:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            init = await session.initialize()
            tools = (await session.list_tools()).tools
            prompt = await session.get_prompt(PROMPT)
            resource = await session.read_resource(EPISODE_URI)  # type: ignore[arg-type]
            results = await _play(session, _reference())
            return init, tools, prompt, resource, results

    init, tools, prompt, resource, results = anyio.run(main)
    role = WORLD.tools_for(SCENARIO.role, offers_retry=SCENARIO.offers_retry)
    assert [t.name for t in tools] == list(role)
    assert {"finish", "give_up", "ask_customer"} <= {t.name for t in tools}
    assert all(t.input_schema == dict(role[t.name].parameters) for t in tools)
    assert "Policies:" in (init.instructions or "")
    assert SCENARIO.request in prompt.messages[1].content.text  # type: ignore[union-attr]
    opening = json.loads(resource.contents[0].text)  # type: ignore[union-attr]
    assert opening["scenario"] == SCENARIO.id and opening["episode_id"].startswith("ep_")
    last = results[-1].structured_content
    assert last is not None and last["ended"] and last["ended_by"] == "agent"
    outcome, reward = _in_process(_reference())
    assert last["verdict"]["outcome"] == outcome != "not_scored" and last["reward"] == reward
    (record,) = _records(tmp_path)
    assert record.outcome == outcome and record.agent == "mcp-harness" and record.turns == len(_reference())


def test_bad_calls_are_rejected_attempts_and_the_episode_goes_on(tmp_path: Path) -> None:
    runtime = _runtime(tmp_path)
    calls: list[tuple[str, Any]] = [("drop_all_tables", {}), ("issue_refund", {"order_id": "not a number"}),
                                    ("get_order", {"order_id": 1, "unexpected": True}), *_reference()]

    async def main() -> list[types.CallToolResult]:
        async with connected(runtime.server) as session:
            return await _play(session, calls)

    results = anyio.run(main)
    runtime.close()
    for r in results[:3]:
        assert r.is_error and r.structured_content is not None and r.structured_content["status"] == "rejected"
        assert not r.structured_content["ended"]
    assert results[-1].structured_content["verdict"]["outcome"] == _in_process(calls)[0]  # type: ignore[index]
    (record,) = _records(tmp_path)
    assert record.rejected_attempts == 3 and record.outcome != "not_scored"


def test_a_second_concurrent_call_is_a_protocol_error_and_takes_no_turn(tmp_path: Path) -> None:
    runtime = _runtime(tmp_path)
    held = threading.Event()

    async def main() -> tuple[Any, Any, Any]:
        async with connected(runtime.server) as session:
            await session.list_tools()
            session_obj = next(iter(runtime.table._live.values()))
            session_obj.lock.acquire()  # the first call's step waits on the episode's lock
            first: list[Any] = []

            async def call_first() -> None:
                first.append(await session.call_tool("get_order", {"order_id": 3216}))

            async with anyio.create_task_group() as tg:
                tg.start_soon(call_first)
                await anyio.sleep(0.3)
                with pytest.raises(MCPError) as second:
                    await session.call_tool("get_order", {"order_id": 3216})
                held.set()
                session_obj.lock.release()
            after = await session.read_resource(EPISODE_URI)  # type: ignore[arg-type]
            return first[0], second.value, after

    first, error, after = anyio.run(main)
    runtime.close()
    assert held.is_set()
    assert error.code == types.INVALID_REQUEST and "one tools/call at a time" in error.message
    assert first.structured_content["status"] == "ok" and first.structured_content["turn"] == 1
    (record,) = _records(tmp_path)  # the first call, then give_up when the session closed: the refused call took none
    assert record.turns == 2 and record.ending == "gave_up" and record.outcome != "not_scored"
    assert json.loads(after.contents[0].text)["scenario"] == SCENARIO.id


def test_the_episode_resource_is_subscribable_and_an_unknown_one_is_not_found(tmp_path: Path) -> None:
    runtime = _runtime(tmp_path)
    updated: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updated.append(str(message.params.uri))

    async def main() -> tuple[Any, Any, list[Any]]:
        async with connected(runtime.server, message_handler=on_message) as session:
            init = await session.initialize()
            await session.subscribe_resource(EPISODE_URI)  # type: ignore[arg-type]
            await session.subscribe_resource("rehearsal://nothing-here")  # type: ignore[arg-type]
            results = await _play(session, _reference()[:1])
            await session.unsubscribe_resource(EPISODE_URI)  # type: ignore[arg-type]
            results += await _play(session, _reference()[1:])
            with pytest.raises(MCPError) as missing:
                await session.read_resource("rehearsal://nothing-here")  # type: ignore[arg-type]
            after = await session.read_resource(EPISODE_URI)  # type: ignore[arg-type]
            return init, (missing.value, after), results

    init, (missing, after), results = anyio.run(main)
    runtime.close()
    assert init.capabilities.resources is not None and init.capabilities.resources.subscribe
    assert updated == [EPISODE_URI]  # one step while subscribed; none for the URI that never changes
    assert missing.code == -32002 and "resource not found" in missing.message
    episode = json.loads(after.contents[0].text)
    assert episode["ended"] and episode["turns"] == len(results)
    assert episode["verdict"]["outcome"] == _in_process(_reference())[0]


def test_a_disconnect_mid_episode_is_settled_as_given_up(tmp_path: Path) -> None:
    params = StdioServerParameters(command=CLI[0], args=[*CLI[1:], "mcp", "--scenario", f"shop/{SCENARIO.id}",
                                                         "--out", str(tmp_path / "runs")], cwd=str(tmp_path),
                                    env=dict(os.environ))  # the SDK passes only a few variables by default

    async def main() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await _play(session, _reference()[:1])

    anyio.run(main)
    deadline = time.monotonic() + 30
    while not (tmp_path / "runs" / "shop-outcome" / "summary.json").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    (record,) = _records(tmp_path)
    assert record.ending == "gave_up" and record.outcome == "not_achieved" and record.turns == 2
    assert "disconnected" in json.loads(record.trace[-1].action)["args"]["reason"]


def _http(tmp_path: Path, idle: float = 300.0) -> tuple[Any, ServerThread]:
    runtime = _runtime(tmp_path, idle)
    return runtime, ServerThread(http_app(runtime.server)).start()  # type: ignore[arg-type]


def test_streamable_http_episode_idle_timeout_and_malformed_json_rpc(tmp_path: Path) -> None:
    runtime, server = _http(tmp_path, idle=1.0)
    url = server.url + MCP_PATH

    async def main() -> tuple[Any, ...]:
        seen: dict[str, str] = {}

        async def keep_session_id(response: httpx2.Response) -> None:
            seen.setdefault("id", response.headers.get("mcp-session-id") or "")

        async with (httpx2.AsyncClient(event_hooks={"response": [keep_session_id]}) as client,
                    streamable_http_client(url, http_client=client) as (read, write),
                    ClientSession(read, write) as session):
            await session.initialize()
            tools = (await session.list_tools()).tools
            first = await session.call_tool(*_reference()[0])
            headers = {"mcp-session-id": seen["id"], "content-type": "application/json",
                       "accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18"}
            async with httpx.AsyncClient() as raw:
                garbage = await raw.post(url, content=b"{not json", headers=headers)
                not_rpc = await raw.post(url, content=b'{"hello": 1}', headers=headers)
            await anyio.sleep(3.0)  # past the idle timeout: the episode is settled
            late = await session.call_tool(*_reference()[1])
            return tools, first, garbage, not_rpc, late

    try:
        tools, first, garbage, not_rpc, late = anyio.run(main)
    finally:
        server.stop()
        runtime.close()
    assert len(tools) == len(WORLD.tools_for(SCENARIO.role, offers_retry=SCENARIO.offers_retry))
    assert first.structured_content["status"] == "ok"
    assert garbage.status_code == 400 and garbage.json()["error"]["code"] == types.PARSE_ERROR
    assert not_rpc.status_code == 400 and garbage.json()["jsonrpc"] == "2.0"
    assert late.is_error and late.structured_content["status"] == "not_run"
    assert late.structured_content["ended_by"] == "idle_timeout"
    (record,) = _records(tmp_path)
    assert record.ending == "gave_up" and record.turns == 2 and record.outcome != "not_scored"


def test_product_tools(tmp_path: Path) -> None:
    server = product_server(tmp_path / "runs", LOCAL)

    async def main() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with connected(server) as session:
            out["tools"] = [t.name for t in (await session.list_tools()).tools]

            async def call(name: str, **args: Any) -> Any:
                result = await session.call_tool(name, args)
                assert not result.is_error, result.content
                return result.structured_content["result"]  # type: ignore[index]

            out["worlds"] = await call("list_worlds")
            out["scenarios"] = await call("list_scenarios", world="shop", split="dev")
            started = await call("start_run", world="shop", agent="reference",
                                 scenarios=["refund-item-0004", "cancel-order-0004"])
            out["started"] = started
            out["summary"] = await call("read_summary", run=started["run"])
            out["measure"] = await call("measure", run=started["run"])
            out["readiness"] = await call("readiness", runs=[started["run"]])
            out["rescore"] = await call("rescore", run=started["run"], reward_profile="rl")
            out["escape"] = await session.call_tool("read_summary", {"run": "../.."})
            out["unknown"] = await session.call_tool("checks", {"world": "shop"})
        return out

    out = anyio.run(main)
    assert out["tools"] == ["list_worlds", "list_scenarios", "start_run", "read_summary", "measure", "readiness",
                            "rescore"]
    assert {w["name"] for w in out["worlds"]} >= {"shop", "analytics"}
    assert all(s["split"] == "dev" and "goal_checks" not in s for s in out["scenarios"])
    assert out["summary"]["episodes"] == 2 if "episodes" in out["summary"] else out["summary"]
    assert out["measure"] and out["readiness"] and out["rescore"]["episodes"] == 2
    assert out["escape"].is_error and "under" in out["escape"].content[0].text
    assert out["unknown"].is_error


def test_a_stateless_request_lists_but_plays_nothing(tmp_path: Path) -> None:
    """The 2026-07-28 wire has no session to hold an episode: tools and prompts are listed, a call is refused with
    what to do instead, and nothing is started or recorded."""
    runtime, server = _http(tmp_path)

    async def main() -> tuple[Any, ...]:
        async with Client(server.url + MCP_PATH, mode="2026-07-28") as client:
            tools = (await client.list_tools()).tools
            resources = (await client.list_resources()).resources
            called = await client.call_tool(*_reference()[0])
            with pytest.raises(MCPError) as prompt:
                await client.get_prompt(PROMPT)
            return tools, resources, called, prompt.value

    try:
        tools, resources, called, prompt = anyio.run(main)
    finally:
        server.stop()
        runtime.close()
    assert [t.name for t in tools] == list(WORLD.tools_for(SCENARIO.role, offers_retry=SCENARIO.offers_retry))
    assert [str(r.uri) for r in resources] == ["rehearsal://policies"]
    assert called.is_error and "initialize handshake" in called.content[0].text
    assert prompt.code == types.INVALID_REQUEST and "initialize handshake" in prompt.message
    assert not (tmp_path / "runs").exists() or not _records(tmp_path)


def test_an_unsupported_sdk_is_named_with_the_range_wanted(tmp_path: Path) -> None:
    """With an SDK 1.x installed (its metadata first on the path), `rehearsal mcp` names the version found and the
    range wanted, in one line, instead of asking to install the extra that is there."""
    info = tmp_path / "site" / "mcp-1.30.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mcp\nVersion: 1.30.0\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([*CLI, "mcp", "--scenario", f"shop/{SCENARIO.id}"], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=120, stdin=subprocess.DEVNULL)
    assert run.returncode != 0 and not run.stdout
    message = run.stderr.strip()
    assert len(message.splitlines()) == 1, message
    assert "found mcp 1.30.0" in message and ">=2.0,<3" in message and "needs the mcp extra" not in message
