"""The hosted-episode floor's rules (issue 31), each one test parametrized over every transport that can host an
episode: HTTP, WebSocket, MCP in one process (what stdio carries) and MCP over streamable HTTP. Each transport is the
real one, on 127.0.0.1 with a port of its own (the stress layer off, so that a reference solution verifies); a rule
holds because every transport asks the same floor (:mod:`rehearsal_env.episodes`), so a transport added later runs the
same tests by adding one player here.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

import rehearsal_env
from rehearsal_env.client import Client, WebSocketSession
from rehearsal_env.client._client import ApiError
from rehearsal_env.episodes import CheckpointSeal, Issued, KeyStore, Refused, check_bind
from rehearsal_env.records import read_records
from rehearsal_env.serve import ServeConfig, ServerThread, create_app

WORLD = rehearsal_env.load_world("shop")
HOLDOUT = WORLD.scenario("refund-item-0006")
DEV = WORLD.scenario("refund-item-0001")
assert HOLDOUT.split == "holdout" and DEV.split != "holdout"


def _calls(scenario: Any) -> list[tuple[str, dict[str, Any]]]:
    return [(c.tool, dict(c.args)) for c in scenario.reference.calls]


def _need_mcp() -> None:
    if importlib.util.find_spec("mcp") is None:
        if os.environ.get("REHEARSAL_REQUIRE_MCP") == "1":
            pytest.fail("REHEARSAL_REQUIRE_MCP=1 but the mcp extra is not installed: pip install -e '.[mcp]'",
                        pytrace=False)
        pytest.skip("the mcp extra is not installed (pip install -e '.[mcp]')")


@contextmanager
def _serve(tmp_path: Path, keys: Path) -> Iterator[str]:
    config = ServeConfig(worlds=("shop",), out=str(tmp_path / "served"), keys=str(keys), stress=False)
    with ServerThread(create_app(config)) as server:
        yield server.url


# -- players: each plays the calls as the key and returns the last answer as the client received it -----------------
Player = Callable[[Path, Path, str, Any, list[tuple[str, dict[str, Any]]], str | None], dict[str, Any]]


def _http(tmp_path: Path, keys: Path, key: str, scenario: Any, calls: list[tuple[str, dict[str, Any]]],
          profile: str | None) -> dict[str, Any]:
    with _serve(tmp_path, keys) as url, Client(url, key) as client:
        started = client.start("shop", scenario.id, profile=profile)
        steps = [client.step(started["episode_id"], json.dumps({"tool": tool, "args": args}), i)
                 for i, (tool, args) in enumerate(calls)]
        return {"step": steps[-1], "steps": steps, "read": client.episode(started["episode_id"])}


def _ws(tmp_path: Path, keys: Path, key: str, scenario: Any, calls: list[tuple[str, dict[str, Any]]],
        profile: str | None) -> dict[str, Any]:
    with _serve(tmp_path, keys) as url:
        session = WebSocketSession(url, key)
        try:
            session.start("shop", scenario.id, profile=profile)
            steps = [session.step(json.dumps({"tool": tool, "args": args}), i) for i, (tool, args) in enumerate(calls)]
            return {"step": steps[-1], "steps": steps}
        finally:
            session.close()


def _mcp_runtime(tmp_path: Path, scenario: Any, profile: str | None, who: Any) -> Any:
    from rehearsal_env.harness import EpisodeServerConfig, EpisodeSpec, Storage, episode_runtime
    spec = EpisodeSpec(world=WORLD, scenario=scenario, reward_profile=profile)
    return episode_runtime(EpisodeServerConfig(spec=spec, who=who), Storage(out=tmp_path / "mcp", stress=False))


async def _mcp_play(session: Any, calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    from rehearsal_env.harness import EPISODE_URI
    await session.initialize()
    answers = [await session.call_tool(tool, args) for tool, args in calls]
    resource = await session.read_resource(EPISODE_URI)
    last = answers[-1]
    return {"structured": last.structured_content, "text": [c.text for c in last.content],
            "steps": [a.structured_content for a in answers], "resource": json.loads(resource.contents[0].text)}


def _mcp_memory(tmp_path: Path, keys: Path, key: str, scenario: Any, calls: list[tuple[str, dict[str, Any]]],
                profile: str | None) -> dict[str, Any]:
    _need_mcp()
    import anyio

    from rehearsal_env.episodes import Principal
    from rehearsal_env.harness import connected
    entry = KeyStore(keys).authenticate(key)
    assert entry is not None
    runtime = _mcp_runtime(tmp_path, scenario, profile, Principal(entry.id, entry.scope, entry.agents))

    async def main() -> dict[str, Any]:
        async with connected(runtime.server) as session:
            return await _mcp_play(session, calls)
    try:
        return anyio.run(main)
    finally:
        runtime.close()


@contextmanager
def _mcp_http_server(tmp_path: Path, keys: Path, scenario: Any, profile: str | None) -> Iterator[str]:
    _need_mcp()
    from rehearsal_env.episodes import LOCAL, Principal, Scope
    from rehearsal_env.harness import MCP_PATH, http_app
    runtime = _mcp_runtime(tmp_path, scenario, profile, Principal(LOCAL, Scope.BUILD_AND_EVALUATE))
    server = ServerThread(http_app(runtime.server, keys=KeyStore(keys))).start()  # type: ignore[arg-type]
    try:
        yield server.url + MCP_PATH
    finally:
        server.stop()
        runtime.close()


def _mcp_http(tmp_path: Path, keys: Path, key: str, scenario: Any, calls: list[tuple[str, dict[str, Any]]],
              profile: str | None) -> dict[str, Any]:
    _need_mcp()
    import anyio
    import httpx2  # the SDK 2.x's HTTP client
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    with _mcp_http_server(tmp_path, keys, scenario, profile) as url:
        async def main() -> dict[str, Any]:
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}) as http, \
                    streamable_http_client(url, http_client=http) as (read, write), \
                    ClientSession(read, write) as session:
                return await _mcp_play(session, calls)
        return anyio.run(main)


PLAYERS: dict[str, Player] = {"http": _http, "websocket": _ws, "mcp-stdio": _mcp_memory, "mcp-http": _mcp_http}


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, str, str]:
    """A keys file with an evaluate key and a build-and-evaluate key."""
    path = tmp_path / "keys.json"
    store = KeyStore(path)
    return path, store.create("evaluate", "player")[1], store.create("build-and-evaluate", "builder")[1]


# -- the rules --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("transport", PLAYERS)
@pytest.mark.parametrize("scope", ["evaluate", "build-and-evaluate"])
def test_a_holdout_ending_shows_its_outcome_ending_and_reward_and_nothing_else(
        tmp_path: Path, keys: tuple[Path, str, str], transport: str, scope: str) -> None:
    """Whatever the key's scope and the transport: no check, no reward component, no "N of M goal checks" note."""
    path, evaluate, build = keys
    seen = PLAYERS[transport](tmp_path, path, evaluate if scope == "evaluate" else build, HOLDOUT,
                              _calls(HOLDOUT)[:1] + [("finish", {"message": "done"})], "rl")
    text = json.dumps(seen)
    assert "goal check" not in text and "components" not in text and '"checks"' not in text, text
    verdicts = [v for v in _find(seen, "verdict") if v is not None]
    assert verdicts and all(set(v) <= {"outcome", "ending", "reward"} for v in verdicts), verdicts
    assert all(d is None for d in _find(seen, "reward_detail"))


@pytest.mark.parametrize("transport", PLAYERS)
def test_a_holdout_episode_never_shows_per_turn_progress(tmp_path: Path, keys: tuple[Path, str, str],
                                                         transport: str) -> None:
    """Under a shaped profile (rl_turns) a holdout episode's turns read 0 and its last turn the episode's reward, so
    no turn tells which call moved a goal check; a dev episode shows its per-turn rewards."""
    path, evaluate, build = keys
    holdout = PLAYERS[transport](tmp_path / "h", path, build, HOLDOUT, _calls(HOLDOUT), "rl_turns")["steps"]
    assert all(r == 0 for step in holdout[:-1] for r in _find(step, "reward")), holdout
    assert set(_find(holdout[-1], "reward")) == {1.0}, holdout[-1]
    dev = PLAYERS[transport](tmp_path / "d", path, evaluate, DEV, _calls(DEV), "rl_turns")["steps"]
    assert set(_find(dev[-1], "reward")) <= {0.0, 1.0}
    if transport in ("http", "websocket"):  # the step bodies carry each turn's reward: the write's turn earned it
        assert [step["reward"] for step in dev] == [0.0, 0.0, 1.0, 0.0], dev


def _find(value: Any, key: str) -> list[Any]:
    """Every value under ``key`` anywhere in ``value``."""
    if isinstance(value, dict):
        return [v for k, v in value.items() if k == key] + [x for v in value.values() for x in _find(v, key)]
    if isinstance(value, list):
        return [x for v in value for x in _find(v, key)]
    return []


@pytest.mark.parametrize("transport", ["http", "websocket", "mcp-http"])
def test_every_network_request_is_authenticated(tmp_path: Path, keys: tuple[Path, str, str], transport: str) -> None:
    """A client without a key, or with one the server does not know, plays nothing."""
    path, _, _ = keys
    for key in ("", "rk_0000_not-a-key"):
        if transport == "mcp-http":
            with _mcp_http_server(tmp_path, path, DEV, None) as url:
                headers = {"accept": "application/json, text/event-stream", "content-type": "application/json",
                           **({"Authorization": f"Bearer {key}"} if key else {})}
                body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
                answer = httpx.post(url, json=body, headers=headers)
                assert answer.status_code == 401 and "key" in answer.json()["detail"]
            continue
        with pytest.raises(ApiError) as refused:
            PLAYERS[transport](tmp_path, path, key, DEV, _calls(DEV), None)
        assert refused.value.status == 401


def test_a_server_without_keys_binds_to_loopback_only(tmp_path: Path) -> None:
    check_bind("127.0.0.1", None)
    check_bind("::1", None)
    with pytest.raises(ValueError, match="--keys FILE"):
        check_bind("0.0.0.0", None)
    check_bind("0.0.0.0", KeyStore(tmp_path / "keys.json"))


# -- checkpoints: only what the server handed out, unchanged, by the key it was issued to -----------------------------
def test_a_restore_takes_only_checkpoints_this_server_handed_out_to_the_same_key(
        tmp_path: Path, keys: tuple[Path, str, str]) -> None:
    path, evaluate, build = keys
    with _serve(tmp_path, path) as url, Client(url, evaluate) as mine, Client(url, build) as theirs:
        started = mine.start("shop", DEV.id, agent="honest")
        mine.step(started["episode_id"], json.dumps({"tool": _calls(DEV)[0][0], "args": _calls(DEV)[0][1]}), 0)
        served = mine.checkpoint(started["episode_id"])

        local = rehearsal_env.RehearsalEnv(DEV, WORLD)
        local.reset(seed=0)
        made_here = local.checkpoint()
        assert rehearsal_env.restore(served) is not None  # a served checkpoint still restores in one's own process
        forged = bytearray(served)
        at = forged.index(b'"steps":1')
        forged[at:at + 9] = b'"steps":0'
        other_agent = served.replace(b'"agent":"honest"', b'"agent":"rival!"')
        for data, status, words in ((made_here, 422, "handed out"), (bytes(forged), 422, "tag does not match"),
                                    (other_agent, 422, "tag does not match"), (served[:-10], 422, "tag"),
                                    (served, 403, "another key")):
            with pytest.raises(ApiError) as refused:
                (theirs if status == 403 else mine).restore(data)
            assert refused.value.status == status and words in str(refused.value), (words, refused.value)

        restored = mine.restore(served)
        assert restored["parent"] == {"episode_id": started["episode_id"], "turn": 1, "kind": "restore"}
        assert restored["step_index"] == 1
        mine.end(restored["episode_id"])
        state = mine.episode(restored["episode_id"])
        assert state["agent"]["name"] == "honest"
    records = [r for run in (tmp_path / "served").iterdir() for r in read_records(run)]
    (record,) = [r for r in records if r.episode_id == restored["episode_id"]]
    assert (record.agent, record.parent_kind, record.parent_episode) == ("honest", "restore", started["episode_id"])


def test_a_checkpoint_seal_opens_only_what_it_wrapped() -> None:
    seal, other = CheckpointSeal(), CheckpointSeal()
    env = rehearsal_env.RehearsalEnv(DEV, WORLD)
    env.reset(seed=0)
    issued = Issued(key_id="k", episode_id="ep_x", agent="a", agent_version="1", seed=0, profile=None, steps=0)
    data = seal.wrap(issued, env.checkpoint())
    assert seal.open(data)[0] == issued
    with pytest.raises(Refused, match="tag does not match"):
        other.open(data)
    with pytest.raises(Refused, match="cut short"):
        seal.open(data[:40])
