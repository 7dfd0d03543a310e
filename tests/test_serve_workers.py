"""`rehearsal serve --workers 2` (the real CLI, uvicorn's worker processes, 127.0.0.1 port 0): one address
reaches every episode, whichever process a request lands on (issue 24, section 3).

Clients here open a new connection for every request, so requests land on both workers; a request for
the other worker's episode is forwarded to it (the answer says by whom, ``x-rehearsal-forwarded-by``),
its answer passed on as it is (a 429 with its Retry-After), a WebSocket ``attach`` is relayed. A
worker killed mid-episode: its open episodes are recorded ``not_scored`` with cause ``worker``, and a
request for one of them answers 410 saying so. One server serves both tests (the killing one last).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any

import httpx
import pytest
from served import listening_url

import rehearsal_env
from rehearsal_env.agents import make_agent
from rehearsal_env.cli import main as cli
from rehearsal_env.client import ApiError, AtCapacity, Client, WebSocketSession
from rehearsal_env.readiness import assess
from rehearsal_env.records import read_records

SCENARIOS = ("refund-item-0001", "refund-item-0002", "cancel-order-0001")
CLI = "import sys; from rehearsal_env.cli import main; sys.exit(main())"
FORWARDED_BY = "x-rehearsal-forwarded-by"


class Landing(httpx.HTTPTransport):
    """A new connection for every request (so requests land on either worker), counting forwarded answers."""

    def __init__(self) -> None:
        super().__init__(limits=httpx.Limits(max_keepalive_connections=0))
        self.forwarded: Counter[str] = Counter()
        self.last: httpx.Response | None = None

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.last = super().handle_request(request)
        if FORWARDED_BY in response.headers:
            self.forwarded[response.headers[FORWARDED_BY]] += 1
        return response


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """``rehearsal serve --workers 2 --max-sessions 4`` on a free port, for this file's tests (the one that kills a
    worker comes last); (its address, its --out). Stopped with SIGINT (as Ctrl-C)."""
    out = tmp_path_factory.mktemp("workers") / "served"
    proc = subprocess.Popen([sys.executable, "-c", CLI, "serve", "--world", "shop", "--workers", "2", "--port", "0",
                             "--out", str(out), "--threads", "2", "--max-sessions", "4"], stdout=subprocess.PIPE,
                            text=True)
    try:
        url = listening_url(proc)
        deadline = time.monotonic() + 60
        while len(serving(out)) < 2:
            assert proc.poll() is None and time.monotonic() < deadline, "the two workers did not start"
            time.sleep(0.1)
        yield url, out
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:  # uvicorn's supervisor waits out its health check on a killed worker
            for entry in serving(out).values():
                with suppress(ProcessLookupError):
                    os.kill(int(entry["pid"]), signal.SIGKILL)
            proc.kill()
            proc.wait()


def written(out: Path, episode_ids: list[str]) -> dict[str | None, Any]:
    """The records once every episode of ``episode_ids`` has its record on disk (housekeeping writes them within
    about a second)."""
    deadline = time.monotonic() + 30
    while True:
        records = on_disk(out)
        if set(episode_ids) <= set(records):
            return records
        assert time.monotonic() < deadline, f"{len(set(episode_ids) & set(records))} of {len(episode_ids)} written"
        time.sleep(0.2)


def entries(out: Path) -> dict[str, dict[str, Any]]:
    """The workers' entries in the shared folder, by tag."""
    return {p.stem: json.loads(p.read_text()) for p in (out / ".workers").glob("*.json")}


def serving(out: Path) -> dict[str, dict[str, Any]]:
    return {tag: e for tag, e in entries(out).items() if e["state"] == "serving"} if (out / ".workers").exists() else {}


def on_disk(out: Path) -> dict[str | None, Any]:
    """The written records by episode id (none yet: empty)."""
    try:
        return {r.episode_id: r for r in read_records(out / "shop-outcome")}
    except (FileNotFoundError, ValueError):
        return {}


def worker_of(episode_id: str) -> str:
    return episode_id.removeprefix("ep_").split("_")[0]


def start_on_both(client: Client, per_worker: int) -> dict[str, list[dict[str, Any]]]:
    """Start episodes until each of the two workers holds ``per_worker`` of them (fresh connections land on
    either); the started episodes by worker tag."""
    held: dict[str, list[dict[str, Any]]] = {}
    for n in range(200):
        try:
            started = client.start("shop", SCENARIOS[n % len(SCENARIOS)], agent="ref", agent_version="1")
        except AtCapacity:  # landed on a worker holding its --max-sessions
            continue
        held.setdefault(worker_of(started["episode_id"]), []).append(started)
        if len(held) == 2 and all(len(v) >= per_worker for v in held.values()):
            return held
    raise AssertionError(f"200 starts never reached both workers: {Counter({k: len(v) for k, v in held.items()})}")


def landed_on(url: str, tag: str) -> WebSocketSession:
    """A WebSocket connection accepted by worker ``tag`` (a started episode's id says which worker accepted one;
    that episode is ended)."""
    for _ in range(100):
        ws = WebSocketSession(url)
        probe = ws.start("shop", SCENARIOS[0], agent="probe")
        ws.end()
        if worker_of(probe["episode_id"]) == tag:
            return ws
        ws.close()
    raise AssertionError(f"100 WebSocket connections never reached worker {tag}")


def play(client: Client, started: dict[str, Any], steps: int | None = None) -> dict[str, Any]:
    """Play the reference (``steps`` of it, else to the end); the last answer."""
    agent = make_agent("reference", rehearsal_env.load_world("shop").scenario(started["scenario"]))
    observation, info, index = started["observation"], {"tools": started["tools"]}, started["step_index"]
    result: dict[str, Any] = {}
    while steps is None or index < steps:
        result = client.step(started["episode_id"], agent(observation, info), index)
        index, observation = result["step_index"], result["observation"]
        if result["terminated"] or result["truncated"]:
            break
    return result


def test_every_episode_is_reached_through_one_address_and_recorded_once(server: tuple[str, Path]) -> None:
    url, out = server
    landing = Landing()
    with Client(url, transport=landing) as client:
        held = start_on_both(client, per_worker=4)
        for n in range(100):  # both are full: forking an episode is 429, passed on with Retry-After when forwarded
            with pytest.raises(AtCapacity):
                client.fork(held[sorted(held)[n % 2]][0]["episode_id"])
            assert landing.last is not None and landing.last.status_code == 429
            if FORWARDED_BY in landing.last.headers:
                break
        overloaded = landing.last
        played = {s["episode_id"]: play(client, s) for starts in held.values() for s in starts}
        health = client.health()["server"]
        # a WebSocket lands on one worker and attaches the other's episode: its frames are relayed there
        other = next(iter(held))
        ws = landed_on(url, next(tag for tag in held if tag != other))
        extra = client.start("shop", SCENARIOS[0], agent="ws", agent_version="1")
        while worker_of(extra["episode_id"]) != other:  # ended unplayed: recorded as given up, agent "ws"
            client.end(extra["episode_id"])
            extra = client.start("shop", SCENARIOS[0], agent="ws", agent_version="1")
        ws.attach(extra["episode_id"])
        agent = make_agent("reference", rehearsal_env.load_world("shop").scenario(SCENARIOS[0]))
        observation, info, index = extra["observation"], {"tools": extra["tools"]}, 0
        while True:
            over_ws = ws.step(agent(observation, info), index)
            index, observation = over_ws["step_index"], over_ws["observation"]
            if over_ws["terminated"]:
                break
        ws.close()
        read_back = client.episode(extra["episode_id"])
    assert health["worker"] in held and len(held) == 2
    assert overloaded is not None and FORWARDED_BY in overloaded.headers and int(overloaded.headers["retry-after"]) >= 1
    assert "expected a free session" in overloaded.json()["detail"]
    assert {r["verdict"]["outcome"] for r in played.values()} == {"verified"}
    assert over_ws["verdict"]["outcome"] == "verified" and read_back["verdict"]["outcome"] == "verified"
    assert set(landing.forwarded) == set(held), f"requests forwarded by each worker: {landing.forwarded}"
    written(out, [*played, extra["episode_id"]])
    records = read_records(out / "shop-outcome")  # sealed by both workers' writes; measure and readiness read it
    ids = [str(r.episode_id) for r in records if r.agent == "ref"]
    assert sorted(ids) == sorted(played)  # every episode once
    assert {r.outcome for r in records if r.agent == "ref"} == {"verified"}
    [over_the_relay] = [r for r in records if r.episode_id == extra["episode_id"]]
    assert over_the_relay.outcome == "verified" and over_the_relay.agent == "ws"
    assert [a.agent for a in assess(records) if a.agent == "ref"] == ["ref"]


def test_a_killed_worker_s_open_episodes_are_recorded_with_the_cause_and_the_caller_told(
        server: tuple[str, Path]) -> None:
    url, out = server
    with Client(url, transport=Landing(), retries=0) as client:
        held = start_on_both(client, per_worker=2)
        for tag, starts in held.items():  # two on each (room for the WebSocket's probe below); the rest ended
            for extra in starts[2:]:
                client.end(extra["episode_id"])
            held[tag] = starts[:2]
            for started in held[tag]:
                play(client, started, steps=1)
        victim, survivor = sorted(held)
        ws = landed_on(url, survivor)  # a WebSocket relayed from the survivor to an episode of the victim
        ws.attach(held[victim][1]["episode_id"])
        os.kill(int(serving(out)[victim]["pid"]), signal.SIGKILL)
        with pytest.raises(ApiError) as lost:
            play(client, {**held[victim][0], "step_index": 1})
        with pytest.raises(ApiError) as lost_over_ws:
            ws.step("not a tool call", 1)
        ws.close()
        survived = [play(client, {**s, "step_index": 1}) for s in held[survivor]]
        records = written(out, [s["episode_id"] for starts in held.values() for s in starts])
    assert entries(out)[victim]["state"] == "died"
    assert lost_over_ws.value.status == 410 and lost_over_ws.value.body["cause"] == "worker"
    assert lost.value.status == 410 and lost.value.body["cause"] == "worker", lost.value.body
    assert lost.value.body["outcome"] == "not_scored" and "died" in lost.value.detail
    assert {r["verdict"]["outcome"] for r in survived} == {"verified"}
    for started in held[victim]:
        record = records[started["episode_id"]]
        assert record.outcome == "not_scored" and record.not_scored_cause == "worker", record
    for started in held[survivor]:
        assert records[started["episode_id"]].outcome == "verified"
    mine = [r for r in read_records(out / "shop-outcome") if r.episode_id in {s["episode_id"] for v in held.values()
                                                                              for s in v}]
    assert len(mine) == sum(len(v) for v in held.values())  # each once, none lost


def test_an_instance_name_that_cannot_prefix_an_id_is_refused_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["serve", "--world", "shop", "--instance", "Node_A", "--port", "0"]) != 0
    err = capsys.readouterr().err.strip()
    assert err.startswith("rehearsal: error: expected an instance name") and "'Node_A'" in err and "\n" not in err


def test_an_unrecorded_server_leaves_no_workers_folder(tmp_path: Path) -> None:
    """Unrecorded (``ServeConfig.out`` None, as benchmarks/serve.py serves), the workers' journal is a temporary
    folder of that run alone: gone once the server stops (Ctrl-C)."""
    temp = tmp_path / "temp"
    temp.mkdir()
    unrecorded = ("from rehearsal_env.serve import ServeConfig, run_server; run_server(ServeConfig(worlds=('shop',)), "
                  "port=0, on_listen=lambda url: print('listening on', url, flush=True))")
    proc = subprocess.Popen([sys.executable, "-c", unrecorded], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "TMPDIR": str(temp)})
    try:
        url = listening_url(proc)
        deadline = time.monotonic() + 60
        while True:  # bound before it listens: wait for its answer
            try:
                if httpx.get(url + "/health", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "the server did not answer"
            time.sleep(0.1)
        started = Client(url).start("shop", SCENARIOS[0], agent="probe")  # a journaled open episode
        assert started["episode_id"]
        assert [p.name.startswith("rehearsal-workers-") for p in temp.iterdir()] == [True]
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
    assert not list(temp.glob("rehearsal-workers-*")), "the workers' folder outlived the server"
