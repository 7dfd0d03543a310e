"""The live attempt of a world build: a model agent tries every scenario; the page shows it; it withdraws nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tinyworld import build_world

from rehearsal_env.agents import Endpoint, OpenAIAgent, model_profile
from rehearsal_env.agents.testing import ModelServer, Reply
from rehearsal_env.cli import main
from rehearsal_env.env import RehearsalEnv
from rehearsal_env.runner import run_episode
from rehearsal_env.versions import (
    attempt_version,
    build_and_publish,
    load_attempts,
    load_manifest,
    missing_facts,
    recheck,
    reference_keys,
    render_html,
    render_markdown,
)
from rehearsal_env.worlds import World, load_world, register_world


@pytest.fixture()
def server(tiny_world: World) -> Iterator[ModelServer]:
    with ModelServer(world=tiny_world) as s:
        yield s


def test_attempts_are_recorded_shown_and_withdraw_nothing(tiny_world: World, server: ModelServer,
                                                         tmp_path: Path) -> None:
    built = build_and_publish(tiny_world, tmp_path)
    in_use = list(built.version.scenarios)
    endpoint = Endpoint(base_url=server.base_url)
    good = attempt_version(tiny_world, built.path, in_use, model_profile("scripted"), endpoint)
    assert [a.scenario for a in good] == in_use
    assert all(a.outcome == "verified" and a.agent == "openai:scripted" and not a.missing_facts for a in good)
    server.script("weak", *[Reply.call("give_up", reason="I cannot do this")] * len(in_use))
    weak = attempt_version(tiny_world, built.path, in_use, model_profile("weak"), endpoint)
    assert {a.outcome for a in weak} == {"not_achieved"}
    assert load_attempts(built.path) == (*good, *weak)  # appended, never rewritten
    manifest = load_manifest(tiny_world, root=tmp_path)
    assert manifest.version == built.version  # the version itself did not change
    page = render_markdown(manifest)
    assert "Live attempt" in page and "openai:weak: not_achieved (gave_up" in page
    assert "openai:weak" in render_html(manifest)
    again = recheck(tiny_world, tmp_path)
    assert again.withdrawn == ()  # a weak model failing is never a reason to withdraw


def test_the_facts_a_live_agent_could_not_find() -> None:
    shop = load_world("shop")
    scenario = shop.scenario("refund-item-0001")
    keys = dict(reference_keys(scenario))
    assert {"email", "order_id"} <= set(keys)
    with ModelServer() as s:
        s.script("quitter", Reply.call("give_up", reason="no"))
        agent = OpenAIAgent(model_profile("quitter"), Endpoint(base_url=s.base_url))
        env = RehearsalEnv(scenario, shop)
        result = run_episode(env, agent)
        env.close()
    seen = [scenario.request, *(t.observation for t in result.episode.trace)]
    missing = missing_facts(scenario, seen)
    assert missing and all("order_id=3294" != m for m in missing)  # the request shows the order, not the rest
    assert missing_facts(scenario, [*seen, *(f"{k} {v}" for k, v in keys.items())]) == ()


def test_world_build_with_a_live_agent(server: ModelServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    register_world("tiny-live", build_world)
    assert main(["world", "build", "tiny-live", "--out", str(tmp_path), "--live-agent", "openai:scripted",
                 "--base-url", server.base_url]) == 0
    out = capsys.readouterr().out
    assert "live attempts by openai:scripted: 3 verified" in out
    assert main(["world", "recheck", "tiny-live", "--out", str(tmp_path), "--live-agent", "openai:scripted",
                 "--base-url", server.base_url]) == 0
    manifest = load_manifest("tiny-live", root=tmp_path)
    assert manifest.path is not None and len(load_attempts(manifest.path)) == 6
    assert main(["world", "build", "tiny-live", "--out", str(tmp_path), "--live-agent", "reference"]) == 2
    assert "a live agent is a model" in capsys.readouterr().err
