"""NeMo Gym: our resources server on 127.0.0.1, driven over HTTP the way NeMo Gym's simple agent drives one
(``responses_api_agents/simple_agent/app.py``: ``/seed_session`` with the row, ``/<tool>`` per function call with the
arguments as the body and the cookies the server set, ``/verify`` with the row and the Responses API ``response``),
against the Gymnasium env.

NeMo Gym itself (``nemo-gym`` on PyPI) needs Python 3.12 or later and cannot be installed here (Python 3.11), so
this is its published HTTP contract, played with httpx against a real server of ours. The server needs FastAPI and
uvicorn (the base install); nothing skips.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from trainer_parity import gym, scripted

from rehearsal_env.episodes import LOCAL, Principal, Scope, SessionTable
from rehearsal_env.integrations import STOPPED_REASON
from rehearsal_env.integrations._prompt import tool_text
from rehearsal_env.integrations.nemo_gym import COOKIE, dataset_rows, make_app
from rehearsal_env.records import read_records, verify_run_dir
from rehearsal_env.serve import ServerThread
from rehearsal_env.worlds import load_world

SCENARIO = "refund-item-0001"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("nemo-gym-runs")


@pytest.fixture(scope="module")
def server(runs: Path) -> Iterator[ServerThread]:
    with ServerThread(make_app("shop", profile="rl", out=str(runs), agent="nemo-rl", agent_version="step-2")) as s:
        yield s


def _row(scenario: str) -> dict[str, Any]:
    return next(r for r in dataset_rows("shop", None) if r["scenario"] == scenario)


def _rollout(url: str, row: dict[str, Any], actions: list[dict[str, Any]], final_text: str | None) -> tuple[
        list[str], dict[str, Any]]:
    """The simple agent's HTTP sequence: seed, one POST per function call, verify with the whole response."""
    with httpx.Client(base_url=url, timeout=60) as client:
        seeded = client.post("/seed_session", json=row)
        seeded.raise_for_status()
        outputs: list[dict[str, Any]] = []
        texts = []
        for n, action in enumerate(actions):
            call_id = f"call_{n}"
            answer = client.post(f"/{action['tool']}", json=action["args"])  # 200 even for a rejected call
            texts.append(answer.text)
            outputs += [{"type": "function_call", "call_id": call_id, "name": action["tool"],
                         "arguments": json.dumps(action["args"]), "id": f"fc_{n}", "status": "completed"},
                        {"type": "function_call_output", "call_id": call_id, "output": answer.text}]
        if final_text is not None:
            outputs.append({"type": "message", "role": "assistant", "id": "msg_0", "status": "completed",
                            "content": [{"type": "output_text", "text": final_text, "annotations": []}]})
        response = {"id": "resp_0", "object": "response", "created_at": 0, "model": "policy", "output": outputs,
                    "parallel_tool_calls": False, "tool_choice": "auto",
                    "tools": row["responses_create_params"]["tools"]}
        verified = client.post("/verify", json={**row, "response": response})
        verified.raise_for_status()
        return texts, verified.json()


@pytest.mark.parametrize("agent", ["reference", "wrong"])
def test_a_rollout_gives_the_gymnasium_verdict_and_reward(server: ServerThread, runs: Path, agent: str) -> None:
    scenario = SCENARIO
    if agent == "wrong":
        wrong = next(s for s in load_world("shop").scenarios("train") if s.wrong)
        scenario, agent = wrong.id, f"wrong:{wrong.wrong[0].name.removeprefix('wrong:')}"
    actions = scripted(f"shop/{scenario}", agent)
    expected = gym(f"shop/{scenario}", actions)
    texts, verified = _rollout(server.url, _row(scenario), actions, None)
    assert verified["reward"] == expected.rewards[-1] and verified["scored"] is True
    assert verified["verdict"]["outcome"] == expected.verdict.outcome.value
    assert verified["verdict"]["checks"] == [c.to_dict() for c in expected.verdict.checks]
    assert verified["responses_create_params"] == _row(scenario)["responses_create_params"]  # the body, echoed
    shown = [json.loads(t) for t in texts]
    assert shown[-1].pop("done") is True
    assert shown == [json.loads(tool_text(o)) for o in expected.observations]  # the served agent's tool messages
    _table(server).recorder.flush()  # written every 32 episodes, every 30 s and at shutdown: now, for the test
    records = [r for r in read_records(runs / "shop-rl") if r.episode_id == verified["episode_id"]]
    assert len(records) == 1 and (records[0].agent, records[0].agent_version) == ("nemo-rl", "step-2")
    assert verify_run_dir(runs / "shop-rl") == []


def test_a_rollout_that_ends_with_text_finishes_with_it_and_one_that_stops_gives_up(server: ServerThread) -> None:
    actions = [a for a in scripted(f"shop/{SCENARIO}") if a["tool"] not in ("finish", "give_up")]
    said = "Your refund is on its way."
    expected = gym(f"shop/{SCENARIO}", actions + [{"tool": "finish", "args": {"message": said}}])
    _, verified = _rollout(server.url, _row(SCENARIO), actions, said)
    assert verified["verdict"]["outcome"] == expected.verdict.outcome.value == "verified"
    assert verified["reward"] == expected.rewards[-1]
    cut = actions[:1]
    stopped = gym(f"shop/{SCENARIO}", cut + [{"tool": "give_up", "args": {"reason": STOPPED_REASON}}])
    _, verified = _rollout(server.url, _row(SCENARIO), cut, None)
    assert verified["verdict"]["ending"] == "gave_up"
    assert verified["verdict"]["outcome"] == stopped.verdict.outcome.value
    assert verified["reward"] == stopped.rewards[-1]


def test_what_the_model_sends_is_judged_by_the_env(server: ServerThread) -> None:
    with httpx.Client(base_url=server.url, timeout=60) as client:
        client.post("/seed_session", json=_row(SCENARIO)).raise_for_status()
        unknown = client.post("/no_such_tool", json={"x": 1})
        wrong = client.post("/find_customer", json={"email": 5, "extra": True})
        listed = client.post("/find_customer", json=["not", "an", "object"])
        assert [r.status_code for r in (unknown, wrong, listed)] == [200, 200, 200]
        assert {json.loads(r.text)["status"] for r in (unknown, wrong, listed)} == {"rejected"}
        verified = client.post("/verify", json={**_row(SCENARIO), "response": {"output": []}}).json()
        assert verified["verdict"]["metrics"]["rejected_attempts"] == 3
        after = client.post("/find_customer", json={"email": "a@b.c"})
        assert json.loads(after.text) == {"status": "not_run", "error": "the episode has ended; this call was not "
                                          "carried out", "done": True}


def test_requests_the_harness_got_wrong_are_4xx_saying_what_to_send(server: ServerThread) -> None:
    with httpx.Client(base_url=server.url, timeout=60) as client:
        no_cookie = client.post("/find_customer", json={})
        assert no_cookie.status_code == 400 and "/seed_session" in no_cookie.json()["detail"]
        no_scenario = client.post("/seed_session", json={"responses_create_params": {}})
        assert no_scenario.status_code == 400 and "dataset_rows" in no_scenario.json()["detail"]
        unknown = client.post("/seed_session", json={"scenario": "nope"})
        assert unknown.status_code == 400 and "no scenario" in unknown.json()["detail"]
    with httpx.Client(base_url=server.url, timeout=60, cookies={COOKIE: "ep_" + "0" * 32}) as client:
        forged = client.post("/find_customer", json={})
        assert forged.status_code == 404


def test_seeding_again_ends_the_open_episode_for_its_agent(server: ServerThread, runs: Path) -> None:
    with httpx.Client(base_url=server.url, timeout=60) as client:
        first = client.post("/seed_session", json=_row(SCENARIO)).json()["episode_id"]
        second = client.post("/seed_session", json=_row(SCENARIO)).json()["episode_id"]
        assert first != second and client.cookies[COOKIE] == second
    assert _table(server).get(Principal(LOCAL, Scope.BUILD_AND_EVALUATE), first).ended_by == "replaced"


def _table(server: ServerThread) -> SessionTable:
    return server.config.app.state.table  # type: ignore[no-any-return]


def test_dataset_rows_carry_the_served_agents_prompt_and_tools() -> None:
    world = load_world("shop")
    row = _row(SCENARIO)
    system, user = row["responses_create_params"]["input"]
    assert system["role"] == "system" and "You work in world shop" in system["content"]
    assert user == {"role": "user", "content": world.scenario(SCENARIO).request}
    tools = {t["name"]: t for t in row["responses_create_params"]["tools"]}
    role = world.scenario(SCENARIO)
    assert set(tools) == set(world.tools_for(role.role, offers_retry=role.offers_retry))
    assert all(t["type"] == "function" and t["parameters"]["type"] == "object" for t in tools.values())
