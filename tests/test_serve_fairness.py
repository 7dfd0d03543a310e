"""`rehearsal serve` fairness and what a key may learn, over real HTTP (uvicorn on 127.0.0.1, port 0):
per-key session quota, an idle timer reads do not reset, bounded bodies and names, a lone surrogate
as a rejected attempt, holdout verdicts cut to outcome/ending/reward, the key id on every record, keys
bound to agent names, open episodes settled when the server stops, readiness per key, and the fair
share of worker threads."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

import rehearsal_env
from rehearsal_env.agents import make_agent
from rehearsal_env.cli import main as cli
from rehearsal_env.readiness import assess, format_readiness, readiness_of
from rehearsal_env.records import read_records
from rehearsal_env.serve import FairLimiter, KeyStore, ServeConfig, ServerThread, create_app

SCENARIO = "refund-item-0001"
HOLDOUT = "refund-item-0006"
GIVE_UP = json.dumps({"tool": "give_up", "args": {"reason": "test"}})
LOOKUP = json.dumps({"tool": "get_order", "args": {"order_id": 3294}})


@contextmanager
def serving(tmp_path: Path, **options: Any) -> Iterator[tuple[httpx.Client, Path, ServerThread]]:
    out = tmp_path / "served"
    config = ServeConfig(**{"worlds": ("shop",), "out": str(out), **options})
    server = ServerThread(create_app(config)).start()
    try:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            yield http, out, server
    finally:
        server.stop()


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def start(http: httpx.Client, scenario: str = SCENARIO, headers: dict[str, str] | None = None,
          **body: Any) -> httpx.Response:
    return http.post("/v1/episodes", json={"world": "shop", "scenario": scenario, **body}, headers=headers or {})


def step(http: httpx.Client, episode: str, action: str, index: int,
         headers: dict[str, str] | None = None) -> dict[str, Any]:
    r = http.post(f"/v1/episodes/{episode}/step", json={"action": action, "step_index": index}, headers=headers or {})
    assert r.status_code == 200, r.text
    return dict(r.json())


def test_a_key_holds_at_most_its_quota_and_leaves_the_rest_to_other_keys(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "keys.json")
    (_, key_a), (_, key_b) = store.create("evaluate", "greedy"), store.create("evaluate", "other")
    with serving(tmp_path, keys=str(store.path), max_sessions=8, max_sessions_per_key=2) as (http, _, _):
        held = [start(http, headers=auth(key_a)).status_code for _ in range(2)]
        refused = start(http, headers=auth(key_a))
        other = start(http, headers=auth(key_b))
        health = http.get("/health").json()["server"]["sessions"]
    assert held == [201, 201] and other.status_code == 201
    assert refused.status_code == 429 and int(refused.headers["retry-after"]) >= 1
    assert "this key to hold fewer than 2 live sessions; it holds 2" in refused.json()["detail"]
    assert health["per_key"] == 2 and health["live"] == 3


def test_reads_do_not_keep_a_session_alive_only_steps_do(tmp_path: Path) -> None:
    with serving(tmp_path, idle_timeout=1.0) as (http, _, _):
        stepped = start(http).json()["episode_id"]
        read = start(http).json()["episode_id"]
        step(http, read, LOOKUP, 0)
        deadline, index = time.monotonic() + 3.0, 0
        while time.monotonic() < deadline:  # one session is read every 0.1 s, the other stepped every 0.3 s
            assert http.get(f"/v1/episodes/{read}").status_code == 200
            if int((deadline - time.monotonic()) * 10) % 3 == 0:
                step(http, stepped, LOOKUP, index)
                index += 1
            time.sleep(0.1)
        polled, kept = http.get(f"/v1/episodes/{read}").json(), http.get(f"/v1/episodes/{stepped}").json()
    assert polled["state"] == "ended" and polled["ended_by"] == "idle_timeout"
    assert polled["verdict"]["ending"] == "gave_up"
    assert kept["state"] == "active" and index >= 5


def test_bodies_and_names_are_bounded_before_they_are_read_and_never_echoed(tmp_path: Path) -> None:
    with serving(tmp_path, max_body_bytes=4096) as (http, _, _):
        declared = http.post("/v1/episodes", content=b"x" * 10_000, headers={"content-type": "application/json"})

        def chunks() -> Iterator[bytes]:  # no Content-Length: cut off as the bound passes
            yield b'{"world": "shop", "scenario": "'
            for _ in range(100):
                yield b"a" * 1000
            yield b'"}'

        streamed = http.post("/v1/episodes", content=chunks(), headers={"content-type": "application/json"})
        name = "refund-" + "x" * 3000
        body = start(http, name)
        path = http.get(f"/v1/worlds/shop/scenarios/{name}/checks")
        world = start(http, world="w" * 3000)
        url = http.get("/v1/worlds/" + "w" * 5000)
        extra = http.post("/v1/episodes", json={"world": "shop", "scenario": SCENARIO, "x" * 3000: 1})
        alive = http.get("/health").status_code
    assert declared.status_code == 413 and "at most 4096 bytes" in declared.json()["detail"]
    assert streamed.status_code == 413 and "at most 4096 bytes" in streamed.json()["detail"]
    for r in (body, path, world):
        assert r.status_code == 404 and len(r.text) < 600 and "x" * 100 not in r.text and "w" * 100 not in r.text
        assert "more characters" in r.json()["detail"]
    assert url.status_code == 414
    assert extra.status_code == 422 and len(extra.text) < 1000  # the unknown field's name is cut short
    assert alive == 200


def test_a_lone_surrogate_in_an_action_is_a_rejected_attempt(tmp_path: Path) -> None:
    with serving(tmp_path) as (http, _, _):
        eid = start(http).json()["episode_id"]
        raw = (b'{"action": "{\\"tool\\": \\"get_order\\", \\"args\\": {\\"order_id\\": \\"\\ud800\\"}}", '
               b'"step_index": 0}')
        r = http.post(f"/v1/episodes/{eid}/step", content=raw, headers={"content-type": "application/json"})
        bare = http.post(f"/v1/episodes/{eid}/step", content=b'{"action": "\\udfff", "step_index": 1}',
                         headers={"content-type": "application/json"})
        wrong = http.post(f"/v1/episodes/{eid}/step", content=b'{"action": "x", "step_index": "\\ud800"}',
                          headers={"content-type": "application/json"})
        key = http.post("/v1/episodes", content=b'{"world": "shop", "scenario": "x", "\\ud800": 1}',
                        headers={"content-type": "application/json"})
        long_action = step(http, eid, json.dumps({"tool": "get_order", "args": {"order_id": "9" * 100_000}}), 2)
        long_start = start(http, "x" * 100_000)  # only a step may carry a long body
        final = step(http, eid, GIVE_UP, 3)
    assert long_action["status"] in ("rejected", "error") and long_action["turn"] == 3
    assert long_start.status_code == 413 and "at most 65536 bytes" in long_start.json()["detail"]
    assert r.status_code == 200 and r.json()["status"] == "rejected" and "surrogate" in r.json()["observation"]
    assert bare.status_code == 200 and bare.json()["status"] == "rejected" and bare.json()["turn"] == 2
    assert wrong.status_code == 422 and key.status_code == 422  # malformed requests, never HTTP 500
    assert final["verdict"]["metrics"]["rejected_attempts"] >= 2


def test_holdout_episodes_return_outcome_ending_and_reward_only(tmp_path: Path) -> None:
    with serving(tmp_path) as (http, _, _):  # loopback: a build-and-evaluate principal, the widest view
        held = start(http, HOLDOUT, profile="rl").json()
        final = step(http, held["episode_id"], GIVE_UP, 0)
        state = http.get(f"/v1/episodes/{held['episode_id']}").json()
        train = start(http, SCENARIO, profile="rl").json()
        seen = step(http, train["episode_id"], GIVE_UP, 0)
    assert final["verdict"] == {"outcome": "not_achieved", "ending": "gave_up", "reward": final["reward"]}
    assert final["reward_detail"] is None and state["verdict"] == final["verdict"]
    for text in (json.dumps(final), json.dumps(state)):
        assert "goal check" not in text and "scope" not in text and "checks" not in text
    assert seen["verdict"]["checks"] and "goal checks passed" in json.dumps(seen["reward_detail"])


def test_records_carry_the_key_id_and_readiness_never_mixes_keys(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "keys.json")
    (owner, key_owner), (other, key_other) = store.create("evaluate", "owner"), store.create("evaluate", "other")
    world = rehearsal_env.load_world("shop")
    with serving(tmp_path, keys=str(store.path)) as (http, out, _):
        for key in (key_owner, key_other):
            started = start(http, headers=auth(key), agent={"name": "support-bot", "version": "v7"}).json()
            agent, observation = make_agent("reference", world.scenario(SCENARIO)), started["observation"]
            info, index = {"tools": started["tools"]}, 0
            while True:
                result = step(http, started["episode_id"], agent(observation, info), index, auth(key))
                observation, index = result["observation"], result["step_index"]
                if result["terminated"] or result["truncated"]:
                    break
    records = read_records(out / "shop-outcome")
    assert sorted(r.key_id or "" for r in records) == sorted([owner.id, other.id])
    stored = b"".join(p.read_bytes() for p in (out / "shop-outcome").rglob("*") if p.is_file())
    assert key_owner.encode() not in stored and key_other.encode() not in stored  # ids, never secrets
    verdicts = assess(records)
    assert [v.key_id for v in verdicts] == sorted([owner.id, other.id]) and not any(v.ready for v in verdicts)
    for v in verdicts:
        assert v.counted == 1 and v.other_keys and not any("also played" in x for x in v.reasons)
        text = format_readiness(v)
        assert f"(played by key {v.key_id})" in text and "also played under this agent version by key(s)" in text
    with pytest.raises(ValueError, match="one API key's episodes"):
        readiness_of(records)
    [alone] = assess([r for r in records if r.key_id == owner.id])
    assert alone.key_id == owner.id and not alone.other_keys


def test_a_key_bound_to_agent_names_plays_only_as_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file = str(tmp_path / "keys.json")
    assert cli(["keys", "create", "--scope", "evaluate", "--agent", "support-bot", "--file", file]) == 0
    key = capsys.readouterr().out.strip()
    assert cli(["keys", "list", "--file", file]) == 0
    assert "agents: support-bot" in capsys.readouterr().out
    with serving(tmp_path, keys=file) as (http, _, _):
        refused = start(http, headers=auth(key), agent={"name": "other-bot", "version": "1"})
        allowed = start(http, headers=auth(key), agent={"name": "support-bot", "version": "1"})
    assert refused.status_code == 403 and "plays only as agent(s) support-bot" in refused.json()["detail"]
    assert "'other-bot'" in refused.json()["detail"] and allowed.status_code == 201
    with pytest.raises(ValueError, match="printable characters"):
        KeyStore(file).create("evaluate", agents=["bad\nname"])


def test_episodes_open_when_the_server_stops_are_given_up_and_judged(tmp_path: Path) -> None:
    with serving(tmp_path) as (http, out, server):
        acted = start(http, agent={"name": "parker", "version": "1"}).json()["episode_id"]
        step(http, acted, LOOKUP, 0)
        start(http, agent={"name": "parker", "version": "1"})  # opened, never acted on
        server.stop()
    records = read_records(out / "shop-outcome")
    assert len(records) == 2 and {r.ending for r in records} == {"gave_up"}
    assert {r.outcome for r in records} == {"not_achieved"} and all(r.not_scored_cause is None for r in records)
    assert sorted(r.turns for r in records) == [1, 2]
    assert all("the server stopped" in r.trace[-1].action for r in records)


def test_one_keys_slow_work_never_takes_the_threads_another_key_needs() -> None:
    release = threading.Event()
    done: list[str] = []

    def slow() -> None:
        release.wait(10)
        done.append("slow")

    def quick() -> None:
        done.append("quick")

    async def main() -> tuple[int, int]:
        limiter = FairLimiter(total=4, per_key=2)
        async with anyio.create_task_group() as tg:
            for _ in range(6):  # six slow requests of one key: two run, four wait behind their own key
                tg.start_soon(limiter.run, "hostile", slow)
            await anyio.sleep(0.2)
            await limiter.run("victim", quick)  # answered while the slow ones still hold their slots
            running, waiting = limiter.running("hostile"), limiter.waiting("hostile")
            release.set()
        return running, waiting

    running, waiting = anyio.run(main)
    assert (running, waiting) == (2, 4)
    assert done.count("slow") == 6 and done.index("quick") == 0  # no slow request had ended before the victim's


@pytest.mark.parametrize("started_nicer", [0, 10])
def test_keys_whose_requests_are_slow_share_the_heavy_threads_and_become_light_again(started_nicer: int) -> None:
    """A heavy key's threads run 10 nice levels below the light ones, also in a server started under ``nice``
    (its threads inherit that; the heavy ones go 10 lower from there, at most to 19)."""
    release = threading.Event()

    async def main() -> tuple[bool, int, int, bool, bool, tuple[int, int]]:
        limiter = FairLimiter(total=4, per_key=2, heavy_total=1, heavy_s=0.05)
        await limiter.run("analyst", time.sleep, 0.2)  # one slow request: the key is heavy now
        heavy = limiter.heavy("analyst")
        async with anyio.create_task_group() as tg:
            for _ in range(2):
                tg.start_soon(limiter.run, "analyst", release.wait, 10)
            await anyio.sleep(0.2)
            running, waiting = limiter.running("analyst"), limiter.waiting("analyst")  # one heavy thread at most
            await limiter.run("victim", time.sleep, 0)
            victim_light = not limiter.heavy("victim")
            release.set()
        niced = await limiter.run("analyst", priority), await limiter.run("victim", priority)
        for _ in range(10):
            await limiter.run("analyst", time.sleep, 0)
        limiter.close()
        return heavy, running, waiting, victim_light, limiter.heavy("analyst"), niced

    def priority() -> int:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) if sys.platform == "linux" else 10

    results: list[tuple[bool, int, int, bool, bool, tuple[int, int]]] = []

    def server() -> None:  # the limiter's threads start from this thread, and inherit its priority
        if sys.platform == "linux" and started_nicer:
            task = threading.get_native_id()
            os.setpriority(os.PRIO_PROCESS, task, min(19, os.getpriority(os.PRIO_PROCESS, task) + started_nicer))
        results.append(anyio.run(main))

    thread = threading.Thread(target=server)
    thread.start()
    thread.join()
    heavy, running, waiting, victim_light, still_heavy, (heavy_nice, light_nice) = results[0]
    assert heavy and (running, waiting) == (1, 1) and victim_light and not still_heavy
    if sys.platform == "linux":  # the heavy threads run at a lower CPU priority: nice +10 from the inherited one
        assert heavy_nice == min(19, light_nice + 10), (heavy_nice, light_nice)  # 19 is the lowest there is


def test_a_call_cancelled_while_it_runs_keeps_its_slot_until_it_ends_and_errors_reach_the_caller() -> None:
    """The worker threads (``serve._handoff``) keep anyio's rule: a cancelled call is waited for, so its slot is
    never given to another call while its thread still runs it; an exception of the call is the caller's."""
    started, release = threading.Event(), threading.Event()

    def slow() -> str:
        started.set()
        release.wait(10)
        return "done"

    def broken() -> None:
        raise ValueError("the world's code failed")

    async def main() -> tuple[bool, int, int, str, str]:
        limiter = FairLimiter(total=1, per_key=1)
        task = asyncio.create_task(limiter.run("k", slow))
        while not started.is_set():
            await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.sleep(0.05)
        waited, held = not task.done(), limiter.running("k")
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        with pytest.raises(ValueError) as error:
            await limiter.run("k", broken)
        after = limiter.running("k")
        following = await limiter.run("k", lambda: "next")  # the one thread serves the next call
        limiter.close()
        return waited, held, after, following, str(error.value)

    assert asyncio.run(main()) == (True, 1, 0, "next", "the world's code failed")
