"""`rehearsal serve` over real HTTP (uvicorn on 127.0.0.1, port 0): health, idempotent steps, capacity,
DELETE, keys and splits, records that measure.py / rescore / readiness read, /health during a
PostgreSQL reset."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

import rehearsal_env
from rehearsal_env.agents import make_agent
from rehearsal_env.cli import main as cli
from rehearsal_env.readiness import assess
from rehearsal_env.records import read_records
from rehearsal_env.rewards import EXTERNAL_MODE
from rehearsal_env.serve import KeyStore, ServeConfig, ServerThread, create_app

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = "refund-item-0001"  # train: a write, the stress layer's refusal, a verified reference
HOLDOUT = "refund-item-0006"


@contextmanager
def serving(tmp_path: Path, **options: Any) -> Iterator[tuple[httpx.Client, Path]]:
    out = tmp_path / "served"
    config = ServeConfig(**{"worlds": ("shop",), "out": str(out), **options})
    with ServerThread(create_app(config)) as server, httpx.Client(base_url=server.url, timeout=30) as http:
        yield http, out


def start(http: httpx.Client, scenario: str = SCENARIO, **body: Any) -> dict[str, Any]:
    r = http.post("/v1/episodes", json={"world": "shop", "scenario": scenario, **body})
    assert r.status_code == 201, r.text
    return dict(r.json())


def play_reference(http: httpx.Client, started: dict[str, Any], *, retry_every_step: bool = False) -> dict[str, Any]:
    """Play the scenario's reference over HTTP; with ``retry_every_step`` send every step twice."""
    world = rehearsal_env.load_world("shop")
    agent = make_agent("reference", world.scenario(started["scenario"]))
    observation, info = started["observation"], {"tools": started["tools"]}
    index = 0
    while True:
        body = {"action": agent(observation, info), "step_index": index}
        r = http.post(f"/v1/episodes/{started['episode_id']}/step", json=body)
        assert r.status_code == 200, r.text
        if retry_every_step:
            again = http.post(f"/v1/episodes/{started['episode_id']}/step", json=body)
            assert again.status_code == 200 and again.json() == r.json()
        result = r.json()
        index = result["step_index"]
        observation = result["observation"]
        if result["terminated"] or result["truncated"]:
            return dict(result)


def test_health_carries_provenance_and_capabilities(tmp_path: Path) -> None:
    with serving(tmp_path) as (http, _):
        health = http.get("/health").json()
        rl = http.get("/health", params={"profile": "rl"}).json()
    for field in ("reward_version", "reward_profile", "world_version"):
        assert health[field]
    assert health["dataset"]["catalog_hash"] and health["dataset"]["data_anchor"]
    assert health["dataset"]["seed_manifest_hash"] and health["suite"]["version"]
    assert health["capabilities"]["suite_fingerprint"] and health["capabilities"]["catalog_match"] is True
    assert health["build"]["version"] == rehearsal_env.__version__ and health["build"]["binary_sha256"]
    assert rl["reward_profile"] == "rl" and rl["reward_version"] != health["reward_version"]
    server = health["server"]
    assert server["worlds"] == ["shop"] and {"benchmark", "rl"} <= set(server["profiles"])
    assert server["auth"] == "loopback-only" and server["sessions"]["live"] == 0
    assert server["external_mode"] == EXTERNAL_MODE
    assert server["observation_space"]["max_length"] > 0


def test_reference_episode_is_verified_and_carries_the_external_mode_caveat(tmp_path: Path) -> None:
    with serving(tmp_path) as (http, out):
        started = start(http, agent={"name": "ref-over-http", "version": "7"})
        assert started["caveats"] == [EXTERNAL_MODE] and started["step_index"] == 0
        final = play_reference(http, started)
        state = http.get(f"/v1/episodes/{started['episode_id']}").json()
    assert final["verdict"]["outcome"] == "verified" and final["reward"] == 1.0
    assert final["caveats"] == [EXTERNAL_MODE]
    assert state["state"] == "ended" and state["ended_by"] == "agent" and state["caveats"] == [EXTERNAL_MODE]
    [record] = read_records(out / "shop-outcome")
    assert (record.agent, record.agent_version, record.outcome) == ("ref-over-http", "7", "verified")


def test_a_retried_step_returns_the_same_response_and_is_never_applied_twice(tmp_path: Path) -> None:
    with serving(tmp_path) as (http, out):
        started = start(http)
        final = play_reference(http, started, retry_every_step=True)
        eid = started["episode_id"]
        late = http.post(f"/v1/episodes/{eid}/step", json={"action": "{}", "step_index": final["step_index"]})
    assert final["verdict"]["outcome"] == "verified"
    assert final["verdict"]["metrics"]["duplicate_effects"] == 0
    assert late.status_code == 409 and "has ended" in late.json()["detail"]
    [record] = read_records(out / "shop-outcome")
    assert record.turns == final["turn"] == len(record.trace)  # each step once, though each was sent twice
    assert sum(t.tool == "issue_refund" and t.status == "ok" for t in record.trace) == 1


def test_a_wrong_step_index_is_409_with_the_expected_one(tmp_path: Path) -> None:
    with serving(tmp_path) as (http, _):
        eid = start(http)["episode_id"]
        action = json.dumps({"tool": "get_order", "args": {"order_id": 3294}})
        ahead = http.post(f"/v1/episodes/{eid}/step", json={"action": action, "step_index": 1})
        first = http.post(f"/v1/episodes/{eid}/step", json={"action": action, "step_index": 0})
        second = http.post(f"/v1/episodes/{eid}/step", json={"action": action, "step_index": 1})
        stale = http.post(f"/v1/episodes/{eid}/step", json={"action": action, "step_index": 0})
        turn = http.get(f"/v1/episodes/{eid}").json()["turn"]
    assert ahead.status_code == 409 and ahead.json()["expected_step_index"] == 0
    assert first.status_code == 200 and first.json()["step_index"] == 1
    assert second.status_code == 200 and second.json()["turn"] == 2
    assert stale.status_code == 409 and stale.json()["expected_step_index"] == 2
    assert turn == 2


def test_capacity_is_429_with_retry_after_and_delete_frees_a_session(tmp_path: Path) -> None:
    with serving(tmp_path, max_sessions=2) as (http, out):
        ids = [start(http)["episode_id"], start(http)["episode_id"]]
        full = http.post("/v1/episodes", json={"world": "shop", "scenario": SCENARIO})
        ended = http.delete(f"/v1/episodes/{ids[0]}").json()
        again = http.delete(f"/v1/episodes/{ids[0]}").json()
        ids.append(start(http)["episode_id"])
        live = http.get("/health").json()["server"]["sessions"]["live"]
    assert full.status_code == 429 and int(full.headers["retry-after"]) >= 1
    assert "all 2 are in use" in full.json()["detail"]
    assert ended["state"] == "ended" and ended["ended_by"] == "delete"
    assert ended["verdict"]["ending"] == "gave_up" and again == ended
    assert len(set(ids)) == 3 and live == 2
    records = read_records(out / "shop-outcome")  # the deleted one, and the live two at shutdown: all given up
    assert [r.ending for r in records] == ["gave_up"] * 3
    assert {r.outcome for r in records} == {"not_achieved"}


def test_delete_after_the_end_keeps_the_verdict(tmp_path: Path) -> None:
    with serving(tmp_path) as (http, _):
        started = start(http)
        play_reference(http, started)
        ended = http.delete(f"/v1/episodes/{started['episode_id']}").json()
        unknown = http.get("/v1/episodes/ep_00000000000000000000000000000000")
    assert ended["ended_by"] == "agent" and ended["verdict"]["outcome"] == "verified"
    assert unknown.status_code == 404


def test_served_runs_read_by_measure_rescore_and_readiness_unchanged(tmp_path: Path) -> None:
    with serving(tmp_path, flush_every=2) as (http, out):
        for scenario in ("refund-item-0001", "refund-item-0002", "cancel-order-0001"):
            for _ in range(2):
                play_reference(http, start(http, scenario, agent={"name": "ref", "version": "1"}))
    run = out / "shop-outcome"
    records = read_records(run)
    assert len(records) == 6 and {r.repeat for r in records} == {0, 1}
    assert json.loads((run / "summary.json").read_text())["verified"] == 6
    measured = subprocess.run([sys.executable, str(ROOT / "measure.py"), str(run), "--json"], capture_output=True,
                              text=True, check=True)
    assert "verified" in measured.stdout
    assert cli(["eval", "rescore", str(run), "--profile", "benchmark", "--out", str(tmp_path / "r2")]) == 0
    [readiness] = assess(records)
    assert readiness.agent_version == "1"


def test_an_evaluate_key_is_refused_checks_and_holdout_checks_are_never_served(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "keys.json")
    _, evaluate = store.create("evaluate", "ci")
    _, build = store.create("build-and-evaluate", "builder")
    with serving(tmp_path, keys=str(store.path)) as (http, _):
        def get(path: str, key: str | None) -> httpx.Response:
            return http.get(path, headers={"Authorization": f"Bearer {key}"} if key else {})

        checks = f"/v1/worlds/shop/scenarios/{SCENARIO}/checks"
        holdout = f"/v1/worlds/shop/scenarios/{HOLDOUT}/checks"
        assert get("/v1/worlds", None).status_code == 401
        assert get("/v1/worlds", "rk_nope_nope").status_code == 401
        assert get("/v1/worlds", evaluate).status_code == 200
        refused = get(checks, evaluate)
        assert refused.status_code == 403 and "build-and-evaluate" in refused.json()["detail"]
        served = get(checks, build).json()
        assert served["goal_checks"] and served["reference"]["calls"]
        for key in (evaluate, build):
            r = get(holdout, key)
            assert r.status_code == 403 and "never served" in r.json()["detail"]
        splits = {s["split"] for s in get("/v1/worlds/shop/scenarios", evaluate).json()}
        assert splits == {"train", "dev", "holdout"}
        assert {s["split"] for s in get("/v1/worlds/shop/scenarios?split=holdout", evaluate).json()} == {"holdout"}

        # holdout episodes are playable; no key is shown their check results
        auth_e, auth_b = {"Authorization": f"Bearer {evaluate}"}, {"Authorization": f"Bearer {build}"}
        own = http.post("/v1/episodes", json={"world": "shop", "scenario": SCENARIO}, headers=auth_e).json()
        give_up = json.dumps({"tool": "give_up", "args": {"reason": "test"}})
        done = http.post(f"/v1/episodes/{own['episode_id']}/step", json={"action": give_up, "step_index": 0},
                         headers=auth_e).json()
        assert done["verdict"]["outcome"] == "not_achieved" and "checks" not in done["verdict"]
        theirs = http.get(f"/v1/episodes/{own['episode_id']}", headers=auth_b).json()
        assert theirs["verdict"]["checks"]  # build-and-evaluate reads other keys' episodes with their checks
        mine = http.post("/v1/episodes", json={"world": "shop", "scenario": SCENARIO}, headers=auth_b).json()
        assert http.get(f"/v1/episodes/{mine['episode_id']}", headers=auth_e).status_code == 403
        assert http.delete(f"/v1/episodes/{mine['episode_id']}", headers=auth_e).status_code == 403
        held = http.post("/v1/episodes", json={"world": "shop", "scenario": HOLDOUT}, headers=auth_b).json()
        verdict = http.post(f"/v1/episodes/{held['episode_id']}/step", json={"action": give_up, "step_index": 0},
                            headers=auth_b).json()["verdict"]
        assert "checks" not in verdict
        assert "checks" not in http.get(f"/v1/episodes/{held['episode_id']}", headers=auth_b).json()["verdict"]


def test_without_keys_only_loopback_clients_are_accepted(tmp_path: Path) -> None:
    app = create_app(ServeConfig(worlds=("shop",)))
    # In process (no traffic leaves this machine): the app sees a request from a documentation address.
    remote, local = TestClient(app, client=("192.0.2.7", 4000)), TestClient(app, client=("127.0.0.1", 4000))
    refused = remote.get("/v1/worlds")
    assert refused.status_code == 403 and "127.0.0.1 only" in refused.json()["detail"]
    assert local.get("/v1/worlds").status_code == 200


def test_unknown_world_scenario_and_profile_say_what_is_known(tmp_path: Path) -> None:
    with serving(tmp_path) as (http, _):
        world = http.post("/v1/episodes", json={"world": "shopp", "scenario": SCENARIO})
        scenario = http.post("/v1/episodes", json={"world": "shop", "scenario": "refund-item-001"})
        profile = http.post("/v1/episodes", json={"world": "shop", "scenario": SCENARIO, "profile": "nope"})
    assert world.status_code == 404 and "serves: shop" in world.json()["detail"]
    assert scenario.status_code == 404 and "refund-item-0001" in scenario.json()["detail"]
    assert profile.status_code == 422 and "benchmark" in profile.json()["detail"]


def test_health_answers_while_postgres_databases_reset(tmp_path: Path, postgres_dsn: str) -> None:
    options = {"backend": "postgres", "backend_options": {"dsn": postgres_dsn}, "threads": 4}
    with serving(tmp_path, **options) as (http, _):
        spans: list[tuple[float, float]] = []

        def create() -> None:
            with httpx.Client(base_url=str(http.base_url), timeout=120) as own:
                began = time.monotonic()
                assert own.post("/v1/episodes", json={"world": "shop", "scenario": SCENARIO}).status_code == 201
                spans.append((began, time.monotonic()))

        threads = [threading.Thread(target=create) for _ in range(3)]
        for t in threads:
            t.start()
        answered: list[float] = []
        while any(t.is_alive() for t in threads):
            assert http.get("/health").status_code == 200
            answered.append(time.monotonic())
        for t in threads:
            t.join()
    first, last = min(s for s, _ in spans), max(e for _, e in spans)
    during = [a for a in answered if first < a < last]
    assert len(spans) == 3 and len(during) >= 2  # /health kept answering while databases were cloned and reset


def test_a_server_whose_database_cannot_be_reached_fails_at_start(tmp_path: Path) -> None:
    dsn = f"host={tmp_path} port=5999 dbname=none connect_timeout=2"  # a Unix socket that does not exist
    app = create_app(ServeConfig(worlds=("shop",), backend="postgres", backend_options={"dsn": dsn}))
    server = ServerThread(app)
    with pytest.raises(RuntimeError, match="failed to start"):
        server.start(timeout=300)  # loading the world takes seconds; a busy machine must not turn this into a timeout


def test_keys_cli_creates_lists_and_revokes_keys_stored_hashed(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    file = str(tmp_path / "keys.json")
    assert cli(["keys", "create", "--scope", "build-and-evaluate", "--name", "ci", "--file", file]) == 0
    key = capsys.readouterr().out.strip()
    assert key.startswith("rk_") and key not in Path(file).read_text()  # only its digest is stored
    assert cli(["keys", "list", "--file", file]) == 0
    key_id = key.split("_")[1]
    assert f"{key_id}  build-and-evaluate" in capsys.readouterr().out
    with serving(tmp_path, keys=file) as (http, _):
        auth = {"Authorization": f"Bearer {key}"}
        assert http.get("/v1/worlds", headers=auth).status_code == 200
        assert cli(["keys", "revoke", key_id, "--file", file]) == 0
        assert http.get("/v1/worlds", headers=auth).status_code == 401  # refused at its next request
    assert cli(["keys", "revoke", key_id, "--file", file]) == 2  # no such key: an error naming the ids
    assert "no key with id" in capsys.readouterr().err
