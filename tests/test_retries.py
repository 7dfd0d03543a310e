"""Not-scored episodes are retried, each retry recorded, and no endpoint gains by failing (issue 35).

The scripted OpenAI-protocol server (:mod:`rehearsal_env.agents.testing`) plays shop's dev scenarios for the real
``openai`` agent with the reference solution. It fails episodes in three ways: once, in the middle of an episode
(a transient 503: the retry replays the attempt and goes on, so it stands for it everywhere); always, on the
episodes it loses (the retries fail the same way: the episode stays not scored and the bounds hold); and after a
first move it never makes on the retry (the retry won another way: the headline counts it, the bounds do not).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from published import publish_content

from rehearsal_env.agents import AgentProfile, Endpoint, Policy, Sampling, make_agent
from rehearsal_env.agents.testing import ModelServer, Reply
from rehearsal_env.measure import compare, format_report, load_run, summarize
from rehearsal_env.readiness import NEEDS_WORK, READY, assess_runs
from rehearsal_env.readiness import NOT_DECIDED as READINESS_NOT_DECIDED
from rehearsal_env.records import read_records
from rehearsal_env.runner import RunConfig, run, run_on_ray
from rehearsal_env.scenarios import Scenario
from rehearsal_env.worlds import load_world

SHOP = load_world("shop")
SCENARIOS = tuple(sorted(s.id for s in SHOP.scenarios() if s.split == "dev"))[:5]
REPEATS = 2
Key = tuple[str, int]


class Endpoint_(ModelServer):
    """The scripted server, failing by plan: ``once`` fails the key's first episode at its second request; ``always``
    fails every episode of the key at once; ``detour`` makes the key's first episode's first move an
    unknown tool and then fails it, and plays the reference on later episodes; ``lose`` gives up."""

    def __init__(self, *, once: frozenset[Key] = frozenset(), always: frozenset[Key] = frozenset(),
                 detour: frozenset[Key] = frozenset(), lose: frozenset[Key] = frozenset()) -> None:
        super().__init__(world=SHOP)
        self.once, self.always, self.detour, self.lose = once, always, detour, lose
        self.starts: dict[Key, int] = {}
        self.guard = threading.Lock()

    def answer(self, body: dict[str, Any], authorization: str | None = None) -> Reply:
        messages = body.get("messages") or []
        scenario = self._scenario(messages)
        key = ("" if scenario is None else scenario.id, int(body.get("seed") or 0))
        first = not any(m.get("role") == "tool" for m in messages)
        with self.guard:
            if first:
                self.starts[key] = self.starts.get(key, 0) + 1
            episode = self.starts.get(key, 1)
        if key in self.always:  # from the first request: the agent would lose it
            return Reply.error(503, "overloaded")
        if key in self.lose:
            return Reply.call("give_up", reason="I cannot do this")
        if key in self.detour and episode == 1:
            return Reply.call("no_such_tool") if first else Reply.error(503, "overloaded")
        if not first and key in self.once and episode == 1:
            return Reply.error(503, "overloaded")
        return super().answer(body, authorization)


def _config(version: str, url: str, retries: int = 2) -> RunConfig:
    profile = AgentProfile(name="bot", model="m", sampling=Sampling(seed=0))  # the request's seed is the repeat
    return RunConfig(world="shop", agent="bot", agent_version=version, scenarios=SCENARIOS, repeats=REPEATS,
                     agent_profile=profile.to_toml(), retries=retries,
                     endpoint=Endpoint(base_url=url, timeout_s=2.0, max_retries=0, backoff_s=0.01))


def _play(out: Path, version: str, retries: int = 2, **plan: frozenset[Key]) -> Path:
    with Endpoint_(**plan) as server:
        run(_config(version, server.base_url, retries), out, progress=False)
    return out


@pytest.fixture(scope="module", autouse=True)
def versions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("versions")
    publish_content(SHOP, root)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("REHEARSAL_WORLD_VERSIONS", str(root))
        yield root


KEYS = tuple((s, k) for s in SCENARIOS for k in range(REPEATS))
LOST = frozenset(KEYS[1::2])  # half of the episodes the agent loses
FAILED = frozenset(sorted(LOST)[:2])  # of those, what a dishonest endpoint fails


@pytest.fixture(scope="module")
def honest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _play(tmp_path_factory.mktemp("honest") / "a", "a", lose=LOST)


def test_a_transient_failure_is_retried_recorded_and_the_retry_stands_for_it(honest: Path, tmp_path: Path) -> None:
    hit = frozenset(KEYS[0::2][:3])  # episodes it wins
    out = _play(tmp_path / "once", "a", lose=LOST, once=hit)
    records = read_records(out)
    first = {(r.scenario, r.repeat): r for r in records if not r.attempt}
    retries = [r for r in records if r.attempt]
    assert {k for k, r in first.items() if r.outcome == "not_scored"} == hit
    assert all(first[k].not_scored_cause == "provider" and first[k].turns >= 1 for k in hit)
    assert sorted((r.scenario, r.repeat) for r in retries) == sorted(hit)
    for r in retries:  # linked to the attempt it retries, same seed, replaying it to where it failed
        assert r.attempt == 1 and r.retry_of == f"{r.scenario}#{r.repeat}@0" and r.retry_replayed is True
        assert r.seed == first[(r.scenario, r.repeat)].seed and r.outcome != "not_scored"
    (a,), (h,) = load_run(out), load_run(honest)
    report, truth = summarize(a), summarize(h)
    assert report.retried == 3 and report.open_episodes == 0 and report.n_not_scored == 0
    assert report.verified.value == truth.verified.value and report.bounds("verified") == truth.bounds("verified")
    assert "3 retry(ies) of not-scored episodes played, each recorded" in format_report(report)
    assert [v.label for v in assess_runs([out])] == [v.label for v in assess_runs([honest])]


def test_without_retries_the_same_failure_leaves_the_episodes_not_scored(tmp_path: Path) -> None:
    out = _play(tmp_path / "none", "a", retries=0, lose=LOST, once=frozenset(KEYS[0::2][:3]))
    records = read_records(out)
    assert len(records) == len(KEYS) and not any(r.attempt for r in records)
    assert summarize(load_run(out)[0]).n_not_scored == 3


def test_an_endpoint_failing_what_it_loses_meets_the_same_loss_on_every_retry(honest: Path, tmp_path: Path) -> None:
    out = _play(tmp_path / "always", "a", lose=LOST, always=FAILED)
    records = read_records(out)
    assert sorted(r.attempt or 0 for r in records if (r.scenario, r.repeat) in FAILED) == [0, 0, 1, 1, 2, 2]
    assert all(r.outcome == "not_scored" for r in records if (r.scenario, r.repeat) in FAILED)
    (a,), (h,) = load_run(out), load_run(honest)
    report, truth = summarize(a), summarize(h)
    assert report.n_not_scored == len(FAILED) and report.retried == 2 * len(FAILED)
    low, high = report.bounds("verified")
    assert low <= truth.verified.value <= high and report.verified.value > truth.verified.value
    (v,) = assess_runs([out])
    (t,) = assess_runs([honest])
    assert t.label == NEEDS_WORK and v.label in (NEEDS_WORK, READINESS_NOT_DECIDED)


def test_a_retry_that_went_another_way_counts_in_the_headline_but_not_in_the_bounds(honest: Path,
                                                                                    tmp_path: Path) -> None:
    """The endpoint makes a first move it will not repeat, then fails: the retry is a new draw of the episode, so a
    provider that failed what it was losing and won the retry would gain; the bounds fill the episode instead."""
    out = _play(tmp_path / "detour", "a", lose=frozenset(), detour=FAILED)
    retries = [r for r in read_records(out) if r.attempt]
    assert len(retries) == len(FAILED) and all(r.retry_replayed is False and r.outcome == "verified" for r in retries)
    (a,) = load_run(out)
    report = summarize(a)
    assert report.verified.value == 1.0 and report.open_episodes == len(FAILED) and report.n_not_scored == 0
    low, high = report.bounds("verified")
    assert low == pytest.approx(1 - len(FAILED) / len(KEYS)) and high == 1.0
    ready = _play(tmp_path / "clean", "b")
    (v,), (clean,) = assess_runs([out]), assess_runs([ready])
    assert clean.label == READY and v.label == READINESS_NOT_DECIDED and v.bounds is not None
    assert "scored only by a retry that did not replay its attempt" in v.reasons[0]
    (b,) = load_run(ready)
    m = compare(a, b).metrics[0]
    assert m.extremes is not None and m.extremes.not_scored == len(FAILED)
    assert dict(m.extremes.causes) == {"provider (retried, not replayed)": len(FAILED)}


def test_the_retry_count_is_bounded_and_checked(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="an integer from 0 to 10; got 11"):
        _play(tmp_path / "many", "a", retries=11, always=FAILED)
    assert replace(_config("a", "http://127.0.0.1:1"), retries=1).retries == 1


@dataclass(frozen=True)
class KillsItsWorker:
    """An agent factory whose agent (the reference) first kills its worker process on ``scenario``, twice in all."""

    scenario: str
    """The scenario whose episode kills its worker."""
    marker: str
    """A file with a line per worker killed."""

    def __call__(self, scenario: Scenario) -> Policy:
        agent = make_agent("reference", scenario)
        marker = self.marker
        if scenario.id != self.scenario:
            return agent

        def dying(observation: str, info: dict[str, Any]) -> str:
            deaths = len(Path(marker).read_text().splitlines()) if os.path.exists(marker) else 0
            if deaths < 2:  # the pool plays a dead worker's episode once more (runner._pool): kill that one too
                with open(marker, "a") as fh:
                    fh.write(f"{os.getpid()}\n")
                os._exit(1)
            return agent(observation, info)

        return dying


def test_a_ray_run_retries_what_its_actors_could_not_score(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ray = pytest.importorskip("ray")
    victim = SCENARIOS[0]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    try:  # the actor dies on the victim, and its replacement too: not scored (worker); the driver retries it
        factory = KillsItsWorker(victim, str(tmp_path / "killed"))
        summary = run_on_ray(RunConfig(world="shop", scenarios=SCENARIOS[:2], batch_size=2), tmp_path / "run",
                             workers=1, agent_factory=factory)
    finally:
        ray.shutdown()
    records = read_records(tmp_path / "run")
    lost = [r for r in records if r.outcome == "not_scored"]
    retries = [r for r in records if r.attempt]
    assert [(r.scenario, r.not_scored_cause) for r in lost] == [(victim, "worker")]
    assert [(r.scenario, r.attempt, r.outcome, r.retry_replayed) for r in retries] == [(victim, 1, "verified", True)]
    assert summary["episodes"] == 2 and summary["verified"] == 2 and summary["not_scored"] == 0
