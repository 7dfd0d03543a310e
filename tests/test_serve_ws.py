"""The WebSocket session of `rehearsal serve` (uvicorn on 127.0.0.1, port 0): the reference played over
one connection is verified with the same record as over HTTP and in process; bad frames, wrong step
indexes and retries answer exactly as HTTP does; keys are checked at the handshake; a dropped
connection's episode can be re-attached, and is otherwise freed by the idle timer."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.sync.client import ClientConnection, connect
from websockets.sync.connection import Connection

import rehearsal_env
from rehearsal_env.agents import make_agent
from rehearsal_env.client import ApiError, RemoteEnv, StepConflict, WebSocketSession
from rehearsal_env.records import read_records
from rehearsal_env.rewards import EXTERNAL_MODE
from rehearsal_env.serve import KeyStore, ServeConfig, ServerThread, create_app

SCENARIO = "refund-item-0001"
LOOKUP = json.dumps({"tool": "get_order", "args": {"order_id": 3294}})


@contextmanager
def serving(tmp_path: Path, **options: Any) -> Iterator[tuple[str, httpx.Client, Path]]:
    out = tmp_path / "served"
    config = ServeConfig(**{"worlds": ("shop",), "out": str(out), **options})
    with ServerThread(create_app(config)) as server, httpx.Client(base_url=server.url, timeout=30) as http:
        yield server.url, http, out


def ws(url: str, key: str | None = None) -> ClientConnection:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return connect(url.replace("http://", "ws://") + "/v1/ws", additional_headers=headers, compression=None)


def frame(conn: Connection, body: Any) -> tuple[int, Any]:
    conn.send(body if isinstance(body, str) else json.dumps(body))
    answer = json.loads(conn.recv(timeout=30))
    return answer["code"], answer["body"]


def played(record: Any) -> tuple[Any, ...]:
    """What must match between transports: the verdict and every turn's action, tool, status, observation."""
    return (record.outcome, record.ending, record.reward, record.turns,
            [(t.turn, t.action, t.tool, t.status, t.observation, t.fault, t.rejected) for t in record.trace])


def test_the_reference_over_websocket_is_verified_with_the_record_of_http_and_in_process(tmp_path: Path) -> None:
    world = rehearsal_env.load_world("shop")
    with serving(tmp_path) as (url, http, out):
        over_ws = RemoteEnv(url, SCENARIO, "shop", transport="websocket", agent="ws")
        over_http = RemoteEnv(url, SCENARIO, "shop", agent="http")
        finals = []
        for env in (over_ws, over_http):
            agent = make_agent("reference", world.scenario(SCENARIO))
            observation, info = env.reset(seed=0)
            assert info["caveats"] == [EXTERNAL_MODE]
            done = False
            while not done:
                observation, reward, terminated, truncated, info = env.step(agent(observation, info))
                done = terminated or truncated
            finals.append((reward, info["outcome"], info["caveats"]))
            env.close()
    assert finals[0] == finals[1] == (1.0, "verified", [EXTERNAL_MODE])
    records = {r.agent: r for r in read_records(out / "shop-outcome")}
    assert played(records["ws"]) == played(records["http"])

    local = rehearsal_env.RehearsalEnv(world.scenario(SCENARIO), world)
    agent = make_agent("reference", world.scenario(SCENARIO))
    observation, info = local.reset(seed=0)
    turns = []
    while True:
        action = agent(observation, info)
        observation, reward, terminated, truncated, info = local.step(action)
        turns.append((action, observation))
        if terminated or truncated:
            break
    assert info["verdict"].outcome == "verified"
    assert [(t.action, t.observation) for t in records["ws"].trace] == turns


def test_frames_answer_as_http_does_bad_frames_wrong_indexes_and_retries(tmp_path: Path) -> None:
    with serving(tmp_path) as (url, http, out), ws(url) as conn:
        assert frame(conn, {"action": LOOKUP, "step_index": 0})[0] == 404  # no episode on this connection yet
        code, started = frame(conn, {"op": "start", "world": "shop", "scenario": SCENARIO, "seed": 0})
        assert code == 201 and started["step_index"] == 0 and started["caveats"] == [EXTERNAL_MODE]
        eid = started["episode_id"]
        twin = http.post("/v1/episodes", json={"world": "shop", "scenario": SCENARIO}).json()["episode_id"]

        def both(body: Any, index_ok: bool = True) -> tuple[tuple[int, Any], httpx.Response]:
            over_ws = frame(conn, body)
            over_http = http.post(f"/v1/episodes/{twin}/step", content=body if isinstance(body, str)
                                  else json.dumps(body), headers={"content-type": "application/json"})
            return over_ws, over_http

        for bad in ("{not json", json.dumps([1, 2]), json.dumps({"action": LOOKUP}),
                    json.dumps({"action": LOOKUP, "step_index": -1}),
                    json.dumps({"action": LOOKUP, "step_index": 0, "extra": 1})):
            (code, body), r = both(bad)
            assert code == r.status_code == 422 and body == r.json()  # a protocol error; nothing taken
        (code, ahead), r = both({"action": LOOKUP, "step_index": 1})
        assert code == r.status_code == 409 and ahead == r.json() and ahead["expected_step_index"] == 0
        (code, rejected), r = both({"action": "refund it all", "step_index": 0})  # not a tool call
        assert code == r.status_code == 200 and rejected["status"] == "rejected" == r.json()["status"]
        assert rejected["step_index"] == 1 and rejected["observation"] == r.json()["observation"]
        first = frame(conn, {"action": LOOKUP, "step_index": 1})
        again = frame(conn, {"action": LOOKUP, "step_index": 1})  # a retry: the stored answer, applied once
        assert first == again and first[0] == 200 and first[1]["turn"] == 2
        code, stale = frame(conn, {"action": LOOKUP, "step_index": 0})
        assert code == 409 and stale["expected_step_index"] == 2
        assert frame(conn, {"op": "dance"})[0] == 422
        assert frame(conn, "x" * (ServeConfig().max_body_bytes + 1))[0] == 413
        assert http.get(f"/v1/episodes/{eid}").json()["turn"] == 2
        code, ended = frame(conn, {"op": "end"})
        assert code == 200 and ended["ended_by"] == "delete" and ended["verdict"]["ending"] == "gave_up"
        assert frame(conn, {"action": LOOKUP, "step_index": 2})[0] == 409  # ended
    records = sorted(read_records(out / "shop-outcome"), key=lambda r: r.turns)  # the HTTP twin's, then ours
    assert [r.ending for r in records] == ["gave_up", "gave_up"]
    assert [[t.tool for t in r.trace] for r in records] == [[None, "give_up"], [None, "get_order", "give_up"]]
    assert records[1].trace[0].rejected and records[1].trace[0].observation == records[0].trace[0].observation


def test_keys_are_checked_at_the_handshake_and_episodes_stay_their_owners(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "keys.json")
    _, mine = store.create("evaluate", "mine")
    _, theirs = store.create("evaluate", "theirs")
    with serving(tmp_path, keys=str(store.path)) as (url, http, _):
        for key in (None, "rk_nope_nope"):
            with ws(url, key) as conn:
                code, body = json.loads(conn.recv(timeout=30)).values()
                assert code == 401 and "key" in body["detail"]
        session = WebSocketSession(url, mine)
        eid = session.start("shop", SCENARIO)["episode_id"]
        with pytest.raises(ApiError) as refused:
            WebSocketSession(url, theirs).attach(eid)
        assert refused.value.status == 403 and "another key" in refused.value.detail
        assert session.step(LOOKUP, 0)["turn"] == 1
        session.close()


def test_a_dropped_connection_can_reattach_and_is_otherwise_freed_by_the_idle_timer(tmp_path: Path) -> None:
    with serving(tmp_path, idle_timeout=1.0) as (url, http, out):
        session = WebSocketSession(url)
        eid = session.start("shop", SCENARIO)["episode_id"]
        first = session.step(LOOKUP, 0)
        session.close()  # the answer "lost": a new connection re-attaches and retries the same index
        again = WebSocketSession(url)
        assert again.attach(eid)["step_index"] == 1
        assert again.step(LOOKUP, 0) == first
        with pytest.raises(StepConflict) as conflict:
            again.step(LOOKUP, 5)
        assert conflict.value.expected == 1
        again.close()  # gone for good, mid-episode
        deadline = time.monotonic() + 10
        while http.get(f"/v1/episodes/{eid}").json()["state"] != "ended" and time.monotonic() < deadline:
            time.sleep(0.1)
        polled = http.get(f"/v1/episodes/{eid}").json()
        live = http.get("/health").json()["server"]["sessions"]["live"]
    assert polled["ended_by"] == "idle_timeout" and live == 0
    [record] = read_records(out / "shop-outcome")
    assert record.ending == "gave_up" and record.turns == 2  # the retried step taken once, then give_up


def test_deeply_nested_bodies_are_a_422_over_http_and_an_error_frame_over_websocket(tmp_path: Path) -> None:
    deep = '{"action": ' + "[" * 30_000 + "]" * 30_000 + ', "step_index": 0}'
    with serving(tmp_path) as (url, http, _), ws(url) as conn:
        started = http.post("/v1/episodes", content='{"world": ' + "[" * 30_000 + "]" * 30_000 + "}",
                            headers={"content-type": "application/json"})
        eid = http.post("/v1/episodes", json={"world": "shop", "scenario": SCENARIO}).json()["episode_id"]
        stepped = http.post(f"/v1/episodes/{eid}/step", content=deep, headers={"content-type": "application/json"})
        assert frame(conn, {"op": "start", "world": "shop", "scenario": SCENARIO})[0] == 201
        code, body = frame(conn, deep)
        after = frame(conn, {"action": LOOKUP, "step_index": 0})  # the connection is still there, nothing taken
    assert 400 <= started.status_code < 500  # FastAPI's own body parser refuses it (never a 500)
    assert stepped.status_code == 422 and "nested" in str(stepped.json())
    assert code == 422 and "nested" in str(body)
    assert after[0] == 200 and after[1]["turn"] == 1


def test_frames_sent_without_waiting_are_each_answered_in_order(tmp_path: Path) -> None:
    """The server reads on while a few frames wait for the app (``_wsproto``) and stops reading past that: either
    way every frame of a client that does not wait for answers gets its own answer, in the order sent."""
    with serving(tmp_path) as (url, http, out), ws(url) as conn:
        code, started = frame(conn, {"op": "start", "world": "shop", "scenario": SCENARIO, "seed": 0})
        assert code == 201
        sent = [{"action": LOOKUP, "step_index": i} for i in range(12)]  # past QUEUED frames at once
        for body in sent:
            conn.send(json.dumps(body))
        answers = [json.loads(conn.recv(timeout=30)) for _ in sent]
        assert [a["code"] for a in answers] == [200] * len(sent)
        assert [a["body"]["step_index"] for a in answers] == list(range(1, len(sent) + 1))
        assert http.get(f"/v1/episodes/{started['episode_id']}").json()["turn"] == len(sent)


def test_step_many_plays_several_episodes_in_one_frame_as_single_steps_would(tmp_path: Path) -> None:
    """A lock-step batch of reference episodes on one connection: every item answers as its single step does,
    and the records are the in-process env's turns."""
    world = rehearsal_env.load_world("shop")
    ids = [s.id for s in world.scenarios()][:3]
    with serving(tmp_path) as (url, http, out), ws(url) as conn:
        started = [frame(conn, {"op": "start", "world": "shop", "scenario": s, "seed": 0,
                                "agent": {"name": f"batch-{i}", "version": "1"}})[1] for i, s in enumerate(ids)]
        agents = [make_agent("reference", world.scenario(s)) for s in ids]
        state = [(b["observation"], {"tools": b["tools"]}, 0) for b in started]
        live = set(range(len(ids)))
        while live:
            order = sorted(live)
            steps = [{"episode_id": started[i]["episode_id"], "action": agents[i](*state[i][:2]),
                      "step_index": state[i][2]} for i in order]
            code, body = frame(conn, {"op": "step_many", "steps": steps})
            assert code == 200 and [r["code"] for r in body["results"]] == [200] * len(order)
            assert frame(conn, {"op": "step_many", "steps": steps}) == (code, body)  # a retried frame: applied once
            for i, result in zip(order, body["results"], strict=True):
                answer = result["body"]
                state[i] = (answer["observation"], state[i][1], answer["step_index"])
                if answer["terminated"] or answer["truncated"]:
                    assert answer["verdict"]["outcome"] == "verified"
                    live.discard(i)
    records = {r.agent: r for r in read_records(out / "shop-outcome")}
    for i, scenario in enumerate(ids):
        local = rehearsal_env.RehearsalEnv(world.scenario(scenario), world)
        agent = make_agent("reference", world.scenario(scenario))
        observation, info = local.reset(seed=0)
        turns = []
        while True:
            action = agent(observation, info)
            observation, _, terminated, truncated, info = local.step(action)
            turns.append((action, observation))
            if terminated or truncated:
                break
        assert [(t.action, t.observation) for t in records[f"batch-{i}"].trace] == turns


def test_step_many_answers_each_item_as_its_single_step_and_refuses_a_malformed_frame(tmp_path: Path) -> None:
    with serving(tmp_path) as (url, http, out), ws(url) as conn:
        eid = frame(conn, {"op": "start", "world": "shop", "scenario": SCENARIO, "seed": 0})[1]["episode_id"]
        code, body = frame(conn, {"op": "step_many", "steps": [
            {"episode_id": eid, "action": LOOKUP, "step_index": 0},
            {"episode_id": eid, "action": LOOKUP, "step_index": 1},  # the same episode's next step
            {"episode_id": eid, "action": LOOKUP, "step_index": 5},  # a wrong index: 409
            {"episode_id": "ep_" + "0" * 32, "action": LOOKUP, "step_index": 0},  # no such episode: 404
            {"episode_id": eid, "action": LOOKUP},  # no index: 422
            [1, 2],
        ]})
        assert code == 200
        codes = [r["code"] for r in body["results"]]
        assert codes == [200, 200, 409, 404, 422, 422]
        assert [r["body"]["turn"] for r in body["results"][:2]] == [1, 2]
        assert body["results"][2]["body"]["expected_step_index"] == 2
        single = frame(conn, {"action": LOOKUP, "step_index": 1})  # the connection's episode: a retry of step 1
        assert single == (200, body["results"][1]["body"])
        for bad in ({"op": "step_many"}, {"op": "step_many", "steps": []}, {"op": "step_many", "steps": {}},
                    {"op": "step_many", "steps": [{}], "extra": 1}):
            assert frame(conn, bad)[0] == 422
        assert http.get(f"/v1/episodes/{eid}").json()["turn"] == 2
