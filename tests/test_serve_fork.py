"""Forks and checkpoints over the API (issue 23): a real `rehearsal serve` on 127.0.0.1, the real client."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import rehearsal_env
from rehearsal_env.agents import make_agent
from rehearsal_env.client import Client, RemoteEnv
from rehearsal_env.client._client import ApiError
from rehearsal_env.serve import ServeConfig, ServerThread, create_app

SCENARIO = "shop/refund-item-0001"


@contextmanager
def serving(tmp_path: Path, **options: Any) -> Iterator[str]:
    config = ServeConfig(**{"worlds": ("shop",), "out": str(tmp_path / "served"), **options})
    with ServerThread(create_app(config)) as server:
        yield server.url


def test_a_forked_remote_episode_continues_as_the_original_and_a_checkpoint_restores_anywhere(tmp_path: Path) -> None:
    scenario = rehearsal_env.load_world("shop").scenario("refund-item-0001")
    with serving(tmp_path) as url:
        env = RemoteEnv(url, SCENARIO)
        agent = make_agent("reference", scenario)
        observation, info = env.reset(seed=3)
        for _ in range(2):
            observation, _, _, _, info = env.step(agent(observation, info))
        branch = env.fork()
        data = env.checkpoint()
        assert branch.episode_id != env.episode_id
        local = rehearsal_env.restore(data)  # the server's checkpoint, restored in this process
        again = env.restore(data)  # and on the server
        rest = []
        while True:
            action = agent(observation, info)
            rest.append(action)
            observation, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
        for other in (branch, again):
            seen = [other.step(a)[0] for a in rest]
            assert seen[-1] == observation
        assert [local.step(a)[0] for a in rest][-1] == observation
        assert branch.episode_id is not None and env.client.episode(branch.episode_id)["state"] == "ended"
        with pytest.raises(RuntimeError, match="no episode is going on"):
            env.fork()


def test_fork_and_restore_refuse_what_they_cannot_do(tmp_path: Path) -> None:
    with serving(tmp_path) as url, Client(url) as client:
        started = client.start("shop", "refund-item-0001")
        client.end(started["episode_id"])
        with pytest.raises(ApiError) as ended:
            client.fork(started["episode_id"])
        assert ended.value.status == 409 and "has ended" in str(ended.value)
        with pytest.raises(ApiError) as bad:
            client.restore(b"not a checkpoint")
        assert bad.value.status == 422 and "checkpoint this server handed out" in str(bad.value)


def test_a_fork_starts_from_its_parent_state_not_from_what_another_episode_left_in_the_pool(tmp_path: Path) -> None:
    """The server's spare databases are in the snapshot state whoever used them last: a fork at turn 0, after two
    other episodes did the scenario's writes and gave their databases back, is still an untouched episode."""
    scenario = rehearsal_env.load_world("shop").scenario("refund-item-0001")
    with serving(tmp_path) as url:
        writers = [RemoteEnv(url, SCENARIO) for _ in range(2)]
        actions: list[str] = []
        opened = [writer.reset(seed=0) for writer in writers]  # both open at once: two databases written and given back
        for writer, (observation, info) in zip(writers, opened, strict=True):
            agent = make_agent("reference", scenario)
            while True:
                action = agent(observation, info)
                actions.append(action)
                observation, _, terminated, truncated, info = writer.step(action)
                if terminated or truncated:
                    break
            assert info["verdict"]["outcome"] == "verified"
        finish = actions[-1]
        assert '"finish"' in finish
        honest = RemoteEnv(url, SCENARIO)
        honest.reset(seed=0)
        branch = honest.fork()
        *_, info = branch.step(finish)
        assert info["verdict"]["outcome"] == "not_achieved"
