"""A model endpoint that fails exactly the episodes its agent is losing gains nothing (issue 35).

The party under test often serves the model, and a provider failure must be recorded ``not_scored (provider)``.
Here the scripted OpenAI-protocol server (:mod:`rehearsal_env.agents.testing`) plays shop's dev scenarios for the
real ``openai`` agent: the reference solution on the episodes its agent wins, ``give_up`` on the ones it loses.
Told to, it answers exactly a share of the losing episodes (1% to 50% of all episodes) with an HTTP 503, a reply
slower than the client's timeout, or a dropped connection, in turn. Every decision of measure.py, ``rehearsal
compare`` (sequential) and readiness on the attacked run is the honest run's, or says it is not decided; the
bounds are printed.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import random
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from published import publish_content

import measure
from rehearsal_env.agents import AgentProfile, Endpoint, Sampling
from rehearsal_env.agents.testing import ModelServer, Reply
from rehearsal_env.cli import main as rehearsal
from rehearsal_env.measure import (
    A_HIGHER,
    B_HIGHER,
    BUDGET,
    NOT_DECIDED,
    compare,
    compare_sequentially,
    format_comparison,
    format_report,
    load_run,
    summarize,
)
from rehearsal_env.readiness import NEEDS_WORK, READY, assess_runs
from rehearsal_env.readiness import NOT_DECIDED as READINESS_NOT_DECIDED
from rehearsal_env.records import read_records
from rehearsal_env.runner import RunConfig, run
from rehearsal_env.worlds import load_world

SHOP = load_world("shop")
REPEATS = 3
TIMEOUT_S = 0.25
MODES = ("503", "timeout", "drop")
SHARES = (0.01, 0.05, 0.1, 0.2, 0.35, 0.5)
Key = tuple[str, int]  # (scenario, the request's seed: the reset seed, i.e. the repeat)


class Provider(ModelServer):
    """The scripted server as a dishonest endpoint: it loses ``lose`` (gives up) and fails ``fail`` instead."""

    def __init__(self, lose: frozenset[Key], fail: dict[Key, str] | None = None, model: str | None = None) -> None:
        super().__init__(world=SHOP)
        self.lose, self.fail, self.model = lose, fail or {}, model
        self.dark = False
        """While an episode failed by a timeout plays, the endpoint answers nothing at all (a live endpoint that is
        merely slow is the agent's own cut-off, never a provider failure)."""

    def start(self) -> Provider:
        super().start()
        assert self._httpd is not None
        self._httpd.handle_error = lambda request, address: None  # type: ignore[method-assign,assignment]  # drops are the point
        provider, base = self, self._httpd.RequestHandlerClass

        class Dark(base):  # type: ignore[valid-type,misc]
            def do_GET(self) -> None:  # the agent's liveness probe: no answer while the endpoint is dark
                if provider.dark:  # hang up unanswered
                    self.close_connection = True
                    return
                super().do_GET()

        self._httpd.RequestHandlerClass = Dark
        return self

    def answer(self, body: dict[str, Any], authorization: str | None = None) -> Reply:
        if self.model is not None and body.get("model") != self.model:
            self.dark = False
            return super().answer(body, authorization)  # another model on this endpoint: played honestly
        scenario = self._scenario(body.get("messages") or [])
        key = ("" if scenario is None else scenario.id, int(body.get("seed") or 0))
        mode = self.fail.get(key)
        self.dark = mode == "timeout"
        if mode == "503":
            return Reply.error(503, "overloaded")
        if mode == "timeout":
            time.sleep(TIMEOUT_S * 4)
            raise ConnectionResetError("the endpoint never answered")
        if mode == "drop":
            raise ConnectionResetError("the endpoint drops the connection")  # the handler closes it unanswered
        if key in self.lose:
            return Reply.call("give_up", reason="I cannot do this")
        return super().answer(body, authorization)


@functools.cache
def _scenarios() -> tuple[str, ...]:
    """Shop's dev scenarios the server's solver verifies when it loses nothing (so every loss is the agent's)."""
    with tempfile.TemporaryDirectory() as tmp, Provider(frozenset()) as server:
        dev = tuple(sorted(s.id for s in SHOP.scenarios() if s.split == "dev"))
        config = replace(_config("probe", server.base_url, dev), repeats=1)
        run(config, Path(tmp) / "probe", progress=False)
        return tuple(r.scenario for r in read_records(Path(tmp) / "probe") if r.outcome == "verified")


def _losing(share: float, seed: int) -> frozenset[Key]:
    rng = random.Random(seed)
    return frozenset((s, k) for s in _scenarios() for k in range(REPEATS) if rng.random() < share)


def _config(version: str, url: str, scenarios: tuple[str, ...] | None = None) -> RunConfig:
    profile = AgentProfile(name="bot", model="m", sampling=Sampling(seed=0))  # the request's seed is the repeat
    return RunConfig(world="shop", agent="bot", agent_version=version, scenarios=scenarios or _scenarios(),
                     repeats=REPEATS,
                     agent_profile=profile.to_toml(),
                     endpoint=Endpoint(base_url=url, timeout_s=TIMEOUT_S, max_retries=0, backoff_s=0.01))


def _play(out: Path, version: str, lose: frozenset[Key], fail: dict[Key, str] | None = None) -> Path:
    with Provider(lose, fail) as server:
        run(_config(version, server.base_url), out, progress=False)
    return out


def _attack(honest: Path, share: float) -> dict[Key, str]:
    """A share of all the honest run's episodes, each one it lost, failed in turn by 503, timeout, dropped line."""
    records = read_records(honest)
    lost = sorted((r.scenario, r.repeat) for r in records if r.outcome != "verified")
    k = max(1, round(share * len(records)))
    assert k <= len(lost), f"the honest run lost {len(lost)} episodes, fewer than {k}"
    chosen = random.Random(int(share * 1000)).sample(lost, k)
    return {key: MODES[i % len(MODES)] for i, key in enumerate(sorted(chosen))}


@dataclass(frozen=True)
class Runs:
    """The honest runs and the attacked ones."""

    a: Path
    """A: loses about 55% of its episodes."""
    b: Path
    """B: loses about 10%."""
    c: Path
    """C: loses about 55%, other episodes than A."""
    attacked: dict[float, Path]
    """Share -> A's run with that share of all episodes failed, each one A lost."""
    fails: dict[float, dict[Key, str]]
    """Share -> the failed episodes and how."""


@pytest.fixture(scope="module", autouse=True)
def versions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("versions")
    publish_content(SHOP, root)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("REHEARSAL_WORLD_VERSIONS", str(root))
        yield root


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    tmp = tmp_path_factory.mktemp("provider")
    a = _play(tmp / "a", "a", _losing(0.55, 1))
    b = _play(tmp / "b", "b", _losing(0.1, 2))
    c = _play(tmp / "c", "c", _losing(0.55, 3))
    fails = {share: _attack(a, share) for share in SHARES}
    attacked = {share: _play(tmp / f"a-{share}", "a", _losing(0.55, 1), fails[share]) for share in SHARES}
    return Runs(a, b, c, attacked, fails)


def test_the_endpoint_fails_exactly_the_chosen_losing_episodes_as_provider_failures(runs: Runs) -> None:
    honest = {(r.scenario, r.repeat): r for r in read_records(runs.a)}
    for share, path in runs.attacked.items():
        records = {(r.scenario, r.repeat): r for r in read_records(path)}
        gone = {k for k, r in records.items() if r.outcome == "not_scored"}
        assert gone == set(runs.fails[share]), share
        assert all(records[k].not_scored_cause == "provider" for k in gone)
        assert all(honest[k].outcome != "verified" for k in gone)  # exactly losing episodes
        assert all(records[k].outcome == honest[k].outcome for k in records if k not in gone)
    reasons = {runs.fails[0.5][k]: r.reason or "" for k, r in
               ((k, r) for r in read_records(runs.attacked[0.5]) for k in [(r.scenario, r.repeat)])
               if k in runs.fails[0.5]}
    assert "503" in reasons["503"] and "timed out" in reasons["timeout"] and "connection" in reasons["drop"]


def _decisions(a: Path, b: Path) -> dict[str, str]:
    """Each metric's decision, and each category's (``category:NAME``: ``A higher``, ``B higher`` or ``none``)."""
    (ra,), (rb,) = load_run(a), load_run(b)
    c = compare(ra, rb)
    categories = {f"category:{g.category}": (A_HIGHER if g.difference > 0 else B_HIGHER) if g.significant else
                  NOT_DECIDED if g.not_decided else "none" for g in c.categories}
    return {**{m.metric: m.decision for m in c.metrics}, **categories}


@pytest.mark.parametrize("other", ["b", "c"])
@pytest.mark.parametrize("order", ["attacked first", "attacked second"])
def test_no_measure_decision_differs_from_the_honest_runs_or_it_says_not_decided(
        runs: Runs, other: str, order: str) -> None:
    partner = getattr(runs, other)
    pair = (lambda x: (x, partner)) if order == "attacked first" else (lambda x: (partner, x))
    honest = _decisions(*pair(runs.a))
    assert any(k.startswith("category:") for k in honest)  # the per-category decisions are held to it too
    undecided = 0
    for share, path in runs.attacked.items():
        attacked = _decisions(*pair(path))
        for metric, decision in attacked.items():
            assert decision in (honest[metric], NOT_DECIDED), (share, metric, honest, attacked)
            undecided += decision == NOT_DECIDED
    assert undecided  # the attack did move the scored-only numbers far enough to matter somewhere


def test_against_b_the_honest_difference_is_never_reversed_and_the_bounds_are_printed(runs: Runs) -> None:
    assert _decisions(runs.a, runs.b)["verified"] == B_HIGHER
    (ra,), (rb,) = load_run(runs.attacked[0.5]), load_run(runs.b)
    m = compare(ra, rb).metrics[0]
    assert m.high > 0  # scored episodes only, B no longer looks better than A (honestly it is) ...
    assert m.decision == NOT_DECIDED and not m.significant  # ... which no decision follows
    assert m.extremes is not None and m.extremes.worst_for_a.decision == B_HIGHER
    assert m.extremes.best_for_a.decision != B_HIGHER
    n = len(runs.fails[0.5])
    assert m.result.startswith(f"The verified rate is not decided: {n} episodes not scored (provider {n}); ")
    text = format_comparison(compare(ra, rb))
    assert "not scored as failures of A, successes of B: B higher, A - B = " in text
    assert "not scored as successes of A, failures of B: " in text and "decision: not decided" in text


def test_the_one_run_headline_keeps_its_meaning_and_prints_the_bounds(runs: Runs, capsys: Any) -> None:
    honest = summarize(load_run(runs.a)[0])
    attacked = summarize(load_run(runs.attacked[0.5])[0])
    assert attacked.verified.value > 0.8 > 0.5 > honest.verified.value  # scored episodes only, as the seeds say
    low, high = attacked.bounds("verified")
    assert low == pytest.approx(honest.verified.value)  # the honest value is the worst bound
    episodes = len(_scenarios()) * REPEATS
    assert high == pytest.approx(honest.verified.value + len(runs.fails[0.5]) / episodes)  # every failed one won
    assert honest.bounds("verified") == (honest.verified.value, honest.verified.value)
    assert f"not-scored bounds [{low:.3f}, {high:.3f}]" in format_report(attacked)
    assert measure.main([str(runs.attacked[0.5])]) == 0
    assert f"not-scored bounds [{low:.3f}, {high:.3f}]" in capsys.readouterr().out


def test_no_readiness_verdict_differs_from_the_honest_runs_or_it_says_not_decided(runs: Runs) -> None:
    honest = {v.agent_version: v for v in assess_runs([runs.a, runs.b])}
    assert honest["a"].label == NEEDS_WORK and honest["b"].label == READY
    labels = set()
    for share, path in runs.attacked.items():
        (v,) = assess_runs([path])
        assert v.label in (NEEDS_WORK, READINESS_NOT_DECIDED), share
        labels.add(v.label)
        if v.label == READINESS_NOT_DECIDED:
            assert v.bounds is not None and v.bounds[0] == pytest.approx(honest["a"].verified_share)
            assert v.reasons[0].startswith(f"not decided: {len(runs.fails[share])} episode(s) not scored (provider")
    assert READINESS_NOT_DECIDED in labels  # above 80% verified on scored episodes, it would have said Ready


def test_a_ready_agents_losses_hidden_leave_it_not_decided_never_needs_work(runs: Runs, tmp_path: Path) -> None:
    (honest,) = assess_runs([runs.b])
    fail = _attack(runs.b, 0.05)
    (v,) = assess_runs([_play(tmp_path / "b", "b", _losing(0.1, 2), fail)])
    assert honest.label == READY and v.label == READINESS_NOT_DECIDED
    assert v.verified_share is not None and honest.verified_share is not None
    assert v.verified_share > honest.verified_share and v.bounds is not None
    assert v.bounds[0] == pytest.approx(honest.verified_share)


@pytest.mark.parametrize("share", [0.1, 0.5])
def test_rehearsal_compare_never_decides_what_the_honest_comparison_did_not(tmp_path: Path, share: float,
                                                                            runs: Runs) -> None:
    def sequential(out: Path, fail: dict[Key, str] | None) -> str:
        with Provider(_losing(0.55, 1), fail) as a, Provider(_losing(0.1, 2)) as b:
            result = compare_sequentially(_config("a", a.base_url), _config("b", b.base_url), out, max_episodes=60,
                                          batch_pairs=10)
        return result.decision

    honest = sequential(tmp_path / "honest", None)
    fail = {(s, k): mode for (s, k), mode in _attack(runs.a, share).items() if k < 2}  # compare plays 2 rounds
    decision = sequential(tmp_path / "attacked", fail)
    assert decision in (honest, NOT_DECIDED, BUDGET)
    marker = json.loads((tmp_path / "attacked" / "A" / "sequential.json").read_text())
    records = read_records(tmp_path / "attacked" / "A")
    gone = len({(r.scenario, r.repeat) for r in records if r.outcome == "not_scored"})
    assert gone and marker["left_out_pairs"] == gone
    assert sum(bool(r.attempt) for r in records) == 2 * gone  # each retried twice, failed the same way, recorded
    last = marker["looks"][-1]
    assert last["not_scored_pairs"] == gone and last["worst"] is not None and last["best"] is not None


def test_the_cli_compare_says_not_decided_with_both_extremes(tmp_path: Path) -> None:
    """``rehearsal compare openai:a openai:b`` on one endpoint that loses about half of a's scenarios and then
    fails exactly those: each look prints both extremes, and the end says not decided, never "A higher"."""
    scenarios = _scenarios()
    lose = frozenset((s, 0) for i, s in enumerate(scenarios) if i % 2)  # no sampling seed: the request's is none
    args = ["compare", "openai:a", "openai:b", "--world", "shop", "--split", "dev", "--max-episodes", "60",
            "--model-timeout", str(TIMEOUT_S), "--model-retries", "0"]
    out = io.StringIO()
    with Provider(lose, {key: MODES[i % 3] for i, key in enumerate(sorted(lose))}, model="a") as server, \
            contextlib.redirect_stdout(out):
        assert rehearsal([*args, "--base-url", server.base_url, "--out", str(tmp_path / "cmp")]) == 0
    text = out.getvalue()
    assert "pair(s) with a not-scored episode: as failures of A" in text
    assert "A's verified rate is higher" not in text
    assert "not decided: " in text or "B's verified rate is higher" in text, text
