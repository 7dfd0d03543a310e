"""The Python client and RemoteEnv against a real `rehearsal serve` (uvicorn on 127.0.0.1, port 0)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from gymnasium.utils.env_checker import check_env

import rehearsal_env
from rehearsal_env.agents import make_agent
from rehearsal_env.client import AtCapacity, Client, RemoteEnv, StepConflict
from rehearsal_env.records import read_records, to_row
from rehearsal_env.runner import RecordStamp, run_episode
from rehearsal_env.serve import ServeConfig, ServerThread, create_app

SCENARIO = "shop/refund-item-0001"


@contextmanager
def serving(tmp_path: Path, **options: Any) -> Iterator[tuple[str, Path]]:
    out = tmp_path / "served"
    config = ServeConfig(**{"worlds": ("shop",), "out": str(out), **options})
    with ServerThread(create_app(config)) as server:
        yield server.url, out


def comparable(row: dict[str, Any]) -> dict[str, Any]:
    """A record without what differs between two plays of the same episode: run id, wall times, the key
    that played it over HTTP and the episode id (a served record carries the server's)."""
    out = {k: v for k, v in row.items() if k not in ("run_id", "key_id", "episode_id")}
    out["trace"] = [{k: v for k, v in t.items() if k != "latency_ms"} for t in row["trace"]]
    return out


def test_a_reference_episode_through_remote_env_matches_in_process(tmp_path: Path) -> None:
    scenario = rehearsal_env.load_world("shop").scenario("refund-item-0001")
    local = rehearsal_env.make(SCENARIO)
    first_local, _ = local.reset(seed=3)
    played = run_episode(local, make_agent("reference", scenario), seed=3)
    stamp = RecordStamp(run_id="local", agent="reference", agent_version="v1", backend="sqlite", stress=True,
                        provenance=local.provenance())  # what a run stamps on its records, as the server does
    expected = stamp.played(played.episode, repeat=0, seed=3)
    with serving(tmp_path) as (url, out):
        env = RemoteEnv(url, SCENARIO, agent="reference", agent_version="v1")
        agent = make_agent("reference", scenario)
        observation, info = env.reset(seed=3)
        observations = [observation]
        while True:
            observation, reward, terminated, truncated, info = env.step(agent(observation, info))
            observations.append(observation)
            if terminated or truncated:
                break
        env.close()
    assert observations[0] == first_local
    assert observations[1:] == [t.observation for t in played.episode.trace]
    assert info["verdict"] == {**played.verdict.to_dict(), "reward": played.reward}
    assert reward == played.reward == 1.0
    [served] = read_records(out / "shop-outcome")
    assert comparable(to_row(served)) == comparable(to_row(expected))
    assert (served.key_id, expected.key_id) == ("local", None)
    assert served.episode_id == env.episode_id  # the id the client played it by


def test_check_env_passes_on_remote_env(tmp_path: Path) -> None:
    with serving(tmp_path) as (url, _):
        env = RemoteEnv(url, SCENARIO)
        check_env(env, skip_render_check=True)
        env.close()


class LosesFirstResponses(httpx.BaseTransport):
    """The real transport, but the first ``n`` step responses are lost after the server answered them."""

    def __init__(self, n: int) -> None:
        self.inner, self.left, self.sent = httpx.HTTPTransport(), n, 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if request.url.path.endswith("/step"):
            self.sent += 1
            if self.left:
                self.left -= 1
                response.read()
                raise httpx.ReadTimeout("the response was lost", request=request)
        return response


def test_a_step_whose_response_was_lost_is_retried_and_applied_once(tmp_path: Path) -> None:
    scenario = rehearsal_env.load_world("shop").scenario("refund-item-0001")
    with serving(tmp_path) as (url, out):
        transport = LosesFirstResponses(3)
        client = Client(url, transport=transport)
        env = RemoteEnv(client, SCENARIO)
        agent = make_agent("reference", scenario)
        observation, info = env.reset(seed=0)
        terminated = truncated = False
        while not (terminated or truncated):
            observation, reward, terminated, truncated, info = env.step(agent(observation, info))
        sent = transport.sent
        with pytest.raises(StepConflict) as conflict:
            client.step(env.episode_id or "", "{}", 0)
        env.close()
    assert info["verdict"]["outcome"] == "verified" and info["verdict"]["metrics"]["duplicate_effects"] == 0
    assert sent == info["turn"] + 3  # three responses were lost and their steps sent again ...
    [record] = read_records(out / "shop-outcome")
    assert record.turns == info["turn"] == len(record.trace)  # ... and applied once
    assert conflict.value.expected is None and "has ended" in conflict.value.detail


def test_at_capacity_the_client_raises_with_retry_after(tmp_path: Path) -> None:
    with serving(tmp_path, max_sessions=1) as (url, _), Client(url) as client:
        first = client.start("shop", "refund-item-0001")
        with pytest.raises(AtCapacity) as full:
            client.start("shop", "refund-item-0001")
        client.end(first["episode_id"])
        second = client.start("shop", "refund-item-0001")
    assert full.value.status == 429 and full.value.retry_after >= 1
    assert second["episode_id"] != first["episode_id"]


KILLED_CLIENT = """
import sys, time
from rehearsal_env.client import Client
client = Client(sys.argv[1])
started = client.start("shop", "refund-item-0001")
client.step(started["episode_id"], '{"tool": "get_order", "args": {"order_id": 3294}}', 0)
print(started["episode_id"], flush=True)
time.sleep(600)
"""


def test_a_killed_clients_session_is_reaped_after_the_idle_timeout(tmp_path: Path) -> None:
    with serving(tmp_path, max_sessions=1, idle_timeout=0.5, flush_every=1) as (url, out), Client(url) as client:
        proc = subprocess.Popen([sys.executable, "-c", KILLED_CLIENT, url], stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None
            episode_id = proc.stdout.readline().strip()
            assert episode_id.startswith("ep_")
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        deadline = time.monotonic() + 20
        while client.health()["server"]["sessions"]["live"] and time.monotonic() < deadline:
            time.sleep(0.1)
        again = client.start("shop", "refund-item-0001")  # the capacity came back
        state = client.episode(episode_id)
        health = client.health()
        client.end(again["episode_id"])
    assert state["ended_by"] == "idle_timeout" and state["verdict"]["ending"] == "gave_up"
    assert health["server"]["sessions"]["reaped"] == 1
    [reaped, _] = sorted(read_records(out / "shop-outcome"), key=lambda r: r.turns, reverse=True)
    assert reaped.ending == "gave_up" and [t.tool for t in reaped.trace] == ["get_order", "give_up"]
    assert "sent no step for 0.5 s" in reaped.trace[-1].action


def test_remote_env_under_a_profile_reports_the_reward_detail(tmp_path: Path) -> None:
    scenario = rehearsal_env.load_world("shop").scenario("refund-item-0001")
    with serving(tmp_path) as (url, out):
        env = RemoteEnv(url, SCENARIO, profile="rl")
        agent = make_agent("reference", scenario)
        observation, info = env.reset(seed=0)
        terminated = truncated = False
        while not (terminated or truncated):
            observation, reward, terminated, truncated, info = env.step(agent(observation, info))
        env.close()
    assert reward == 1.0 and info["reward_detail"]["reward"] == 1.0
    assert info["caveats"] and (out / "shop-rl" / "provenance.json").exists()
