"""Readiness on crafted runs of the tiny world: each rule, alone, turns "Ready to pilot" into "Needs work".

Runs are real episodes played by per-scenario policies (reference, give up,
break the hard rule then give up, claim done at once) under one agent label.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import tinyworld

import rehearsal_env
from rehearsal_env import RehearsalEnv
from rehearsal_env.agents import NullAgent, Policy, ScriptedAgent
from rehearsal_env.cli import main
from rehearsal_env.readiness import (
    NEEDS_WORK,
    NOT_DECIDED,
    READY,
    Readiness,
    assess,
    assess_runs,
    format_readiness,
    readiness_of,
)
from rehearsal_env.records import EpisodeRecord, record_episode, seal_run, write_part
from rehearsal_env.runner import EpisodeSpec, RunConfig, run_batch
from rehearsal_env.scenarios import Scenario, Solution, ToolCall
from rehearsal_env.versions import build_and_publish, withdraw_by_hand
from rehearsal_env.worlds import World

GIVE_UP = ToolCall("give_up", {"reason": "I cannot do this"})
BREAK_RULE = Solution("break-rule", (ToolCall("pay_out", {"account_id": 2, "amount_cents": 500}), GIVE_UP))

POLICIES: dict[str, Callable[[Scenario], Policy]] = {
    "reference": lambda s: ScriptedAgent(s.reference),
    "give-up": lambda s: ScriptedAgent(Solution("give-up", (GIVE_UP,))),
    "break-rule": lambda s: ScriptedAgent(BREAK_RULE),
    "claim-done": lambda s: NullAgent(),
}
ALL = ("pay-ann", "pay-changed", "pay-unknown")  # dev, train, holdout


@pytest.fixture(scope="module")
def world() -> World:
    return tinyworld.build_world()


@pytest.fixture(scope="module")
def root(world: World, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("versions")
    assert build_and_publish(world, out).version.scenarios == ALL
    return out


def episodes(world: World, plan: Mapping[str, tuple[str, ...]],
             agent: str = "candidate") -> list[EpisodeRecord]:
    """Play ``{scenario: (policy per repeat, ...)}`` as one agent version."""
    records: list[EpisodeRecord] = []
    config = RunConfig(world="tiny", agent=agent, agent_version="v1")
    for scenario, kinds in plan.items():
        for repeat, kind in enumerate(kinds):
            spec = EpisodeSpec(scenario, repeat, repeat)
            records += run_batch(config, [spec], world=world, agent_factory=POLICIES[kind])
    return records


def verdict(world: World, root: Path, plan: Mapping[str, tuple[str, ...]], **kw: Any) -> Readiness:
    return readiness_of(episodes(world, plan), versions_root=root, **kw)


def test_ready_when_every_rule_holds(world: World, root: Path) -> None:
    r = verdict(world, root, {s: ("reference", "reference") for s in ALL})
    assert r.ready and r.label == READY and r.reasons == ()
    assert (r.counted, r.verified, r.rule_violations, r.false_completions) == (6, 6, (), ())


def test_fewer_than_three_scored_episodes(world: World, root: Path) -> None:
    r = verdict(world, root, {"pay-ann": ("reference", "reference")})
    assert r.label == NEEDS_WORK and len(r.reasons) == 1
    assert r.reasons[0].startswith("only 2 scored episode(s) on scenarios this version never learned from")


def test_eighty_percent_verified_is_the_line(world: World, root: Path) -> None:
    four_of_five = verdict(world, root, {"pay-ann": ("reference", "reference", "give-up"),
                                         "pay-unknown": ("reference", "reference")})
    assert four_of_five.ready and four_of_five.verified_share == 0.8
    three_of_four = verdict(world, root, {"pay-ann": ("reference", "give-up"),
                                          "pay-unknown": ("reference",) * 2})
    assert not three_of_four.ready
    assert three_of_four.reasons == (
        "75% verified (3 of 4 on scenarios it never learned from); needs 80% or more",)


def test_one_broken_hard_rule_is_enough(world: World, root: Path) -> None:
    r = verdict(world, root, {"pay-ann": ("reference",) * 3 + ("break-rule",),
                              "pay-unknown": ("reference",) * 2})
    assert r.verified_share is not None and r.verified_share > 0.8 and r.false_completions == ()
    assert r.rule_violations == ("pay-ann#3",)
    assert r.reasons == ("1 episode(s) broke a hard rule: pay-ann#3",)


def test_one_false_completion_is_enough(world: World, root: Path) -> None:
    r = verdict(world, root, {"pay-ann": ("reference",) * 3 + ("claim-done",),
                              "pay-unknown": ("reference",) * 2})
    assert r.rule_violations == () and r.false_completions == ("pay-ann#3",)
    assert r.reasons == ("1 episode(s) claimed to be done when they were not: pay-ann#3",)


def test_an_improved_version_counts_holdout_only(world: World, root: Path) -> None:
    plan = {"pay-ann": ("reference",) * 3, "pay-changed": ("reference",) * 3,
            "pay-unknown": ("reference",) * 2}
    improved = verdict(world, root, plan, improved=True)
    assert improved.counted == 2 and ("learned from (not holdout)", 6) in improved.left_out
    assert improved.reasons[0].startswith("only 2 scored episode(s) on holdout scenarios")
    assert readiness_of(episodes(world, plan), versions_root=root).ready  # nobody improved it: every scenario counts
    enough = verdict(world, root, {**plan, "pay-unknown": ("reference",) * 3}, improved=True)
    assert enough.ready and enough.counted == 3


def test_rules_four_and_five_also_watch_the_episodes_it_learned_from(world: World, root: Path) -> None:
    plan = {"pay-changed": ("break-rule",), "pay-unknown": ("reference",) * 3}
    r = verdict(world, root, plan, improved=True)
    assert r.counted == 3 and r.verified == 3 and r.rule_violations == ("pay-changed#0",) and not r.ready


def test_withdrawn_and_not_scored_episodes_do_not_count(world: World, root: Path, tmp_path: Path) -> None:
    own_root = tmp_path / "versions"
    build_and_publish(world, own_root)
    plan = {"pay-ann": ("give-up",) * 2, "pay-unknown": ("reference",) * 3}
    records = episodes(world, plan)
    assert not readiness_of(records, versions_root=own_root).ready  # 3 of 5 verified
    withdraw_by_hand(world, "pay-ann", "the request allowed paying from either account", own_root)
    r = readiness_of(records, versions_root=own_root)
    assert r.ready and r.counted == 3 and r.left_out == (("withdrawn scenario", 2),)
    failed = [not_scored(x, "sandbox") for x in records[2:]]
    kept = [*records[:2], *failed, *episodes(world, {"pay-changed": ("reference",) * 3})]
    r = readiness_of(kept, versions_root=own_root, max_not_scored_share=0.5)
    assert r.label == NOT_DECIDED and dict(r.left_out) == {"withdrawn scenario": 2, "not scored": 3}
    assert (r.counted, r.not_scored, r.not_scored_share, r.bounds) == (3, 3, 0.5, (0.5, 1.0))


def not_scored(r: EpisodeRecord, cause: str) -> EpisodeRecord:
    """``r`` as a not-scored episode, with its cause where records carry one (``unknown`` otherwise)."""
    has_cause = "not_scored_cause" in {f.name for f in dataclasses.fields(r)}
    extra: dict[str, Any] = {"not_scored_cause": cause} if has_cause else {}
    return dataclasses.replace(r, outcome="not_scored", reason=f"the {cause} failed", **extra)


def cause_of(cause: str) -> str:
    """What readiness reports for a record made by :func:`not_scored` with ``cause``."""
    return cause if "not_scored_cause" in {f.name for f in dataclasses.fields(EpisodeRecord)} else "unknown"


def test_more_than_five_percent_not_scored_needs_work(world: World, root: Path) -> None:
    records = episodes(world, {"pay-ann": ("reference",) * 10, "pay-unknown": ("reference",) * 10})
    one = readiness_of([not_scored(records[0], "provider"), *records[1:]], versions_root=root)
    # 5% is allowed by rule 6, but the one not-scored episode could have broken a hard rule: not decided
    assert one.label == NOT_DECIDED and (one.counted, one.not_scored, one.not_scored_share) == (19, 1, 0.05)
    assert one.reasons[0].startswith(f"not decided: 1 episode(s) not scored ({cause_of('provider')} 1): counted as "
                                     "the worst outcome for the agent it needs work (1 episode(s) broke a hard rule")
    two = [not_scored(records[0], "provider"), not_scored(records[11], "sandbox"), *records[1:11], *records[12:]]
    r = readiness_of(two, versions_root=root)
    assert r.label == NOT_DECIDED and r.verified_share == 1.0 and r.bounds == (0.9, 1.0)
    text = "provider 1, sandbox 1" if cause_of("provider") == "provider" else "unknown 2"
    assert r.reasons[-1] == (f"10.0% of the episodes it would count were not scored (2 of 20; causes: {text}); "
                             "at most 5% may be: fix the failing part and rerun those episodes")
    assert f"not scored 2 of 20 episode(s) it would count (10.0%; at most 5% may be); causes: {text}" in (
        format_readiness(r))
    assert "verified share with the not-scored episodes as failures 90%, as successes 100%" in format_readiness(r)
    limit = readiness_of(two, versions_root=root, max_not_scored_share=0.1)  # configurable, and stated
    assert limit.label == NOT_DECIDED and len(limit.reasons) == 1 and "at most 10% may be" in format_readiness(limit)
    # what no outcome of the not-scored episodes can save is decided: Needs work, with the reasons that hold either way
    lost = episodes(world, {"pay-ann": ("give-up",) * 10, "pay-unknown": ("reference",) * 10})
    bad = readiness_of([not_scored(lost[0], "provider"), *lost[1:]], versions_root=root)
    assert bad.label == NEEDS_WORK and bad.decided and bad.bounds == (0.5, 0.55)
    assert bad.reasons[0] == "55% verified (11 of 20 on scenarios it never learned from); needs 80% or more"
    with pytest.raises(ValueError, match=r"in \[0, 1\]; got 5"):
        readiness_of(two, versions_root=root, max_not_scored_share=5)


def test_an_improved_version_counts_not_scored_holdout_episodes_only(world: World, root: Path) -> None:
    records = episodes(world, {"pay-changed": ("reference",) * 4, "pay-unknown": ("reference",) * 4})
    train_failed = [not_scored(r, "worker") if r.scenario == "pay-changed" else r for r in records]
    r = readiness_of(train_failed, versions_root=root, improved=True)
    assert r.not_scored == 0 and dict(r.left_out)["not scored"] == 4
    assert r.label == NOT_DECIDED  # rules 4 and 5 watch learned-from episodes too: those 4 could have broken a rule
    holdout_failed = [not_scored(records[4], "worker"), *records[:4], *records[5:]]
    r = readiness_of(holdout_failed, versions_root=root, improved=True)
    assert not r.ready and (r.counted, r.not_scored) == (3, 1)
    assert r.reasons[-1].startswith(f"25.0% of the episodes it would count were not scored (1 of 4; causes: "
                                    f"{cause_of('worker')} 1)")


def test_an_unpublished_world_version_needs_work(world: World, tmp_path: Path) -> None:
    r = verdict(world, tmp_path, {s: ("reference",) * 2 for s in ALL})
    assert not r.ready and r.counted == 6
    assert r.reasons[0].startswith("the world version is not published, so it cannot be evaluated")
    assert "run `rehearsal world build tiny` first" in r.reasons[0]


def test_one_verdict_per_agent_version(world: World, root: Path) -> None:
    records = episodes(world, {s: ("reference",) for s in ALL})
    records += episodes(world, {"pay-ann": ("claim-done",)}, "other")
    verdicts = assess(records, versions_root=root)
    assert [(v.agent, v.label) for v in verdicts] == [("candidate", READY), ("other", NEEDS_WORK)]
    with pytest.raises(ValueError, match="mix"):
        readiness_of(records, versions_root=root)


def test_cli_prints_the_verdict_and_reasons(world: World, root: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    write_part(tmp_path / "a", episodes(world, {s: ("reference",) for s in ALL}), 0)
    write_part(tmp_path / "b", episodes(world, {"pay-ann": ("claim-done",)}), 0)
    seal_run(tmp_path / "a"), seal_run(tmp_path / "b")  # as a finished run is
    assert main(["readiness", str(tmp_path / "a"), "--versions", str(root)]) == 0
    assert capsys.readouterr().out.startswith("Ready to pilot: agent candidate (v1) on world tiny wv_")
    assert main(["readiness", str(tmp_path / "a"), str(tmp_path / "b"), "--versions", str(root),
                 "--improved"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Needs work: agent candidate (v1)")
    assert "only 1 scored episode(s) on holdout scenarios" in out
    assert "1 episode(s) claimed to be done when they were not: pay-ann#0" in out
    assert "not scored 0 of 1 episode(s) it would count (0.0%; at most 5% may be)" in out


def test_cli_takes_the_not_scored_limit(world: World, root: Path, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    records = episodes(world, {s: ("reference",) * 3 for s in ALL})
    write_part(tmp_path / "a", [not_scored(records[0], "database"), *records[1:]], 0)
    seal_run(tmp_path / "a")
    assert main(["readiness", str(tmp_path / "a"), "--versions", str(root)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Not decided") and f"causes: {cause_of('database')} 1" in out
    assert main(["readiness", str(tmp_path / "a"), "--versions", str(root), "--max-not-scored", "0.2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Not decided") and "at most 20% may be" in out


# --- forks and restores are never evidence; readiness is per key (issue 31) ----------------------


def forked_finishes(world: World, scenario: str, forks: int, *, restores: int = 0,
                    agent: str = "candidate", repeat: int = 0) -> list[EpisodeRecord]:
    """Play the reference of ``scenario`` up to its ``finish``, then fork it ``forks`` times (and restore its
    checkpoint ``restores`` times) and finish every fork and restore: the records of those forks and restores,
    real episodes whose records name their parent."""
    scenario_ = world.scenario(scenario)
    env = RehearsalEnv(scenario_, world)
    observation, info = env.reset(seed=repeat)
    agent_ = ScriptedAgent(scenario_.reference)
    while True:
        action = agent_(observation, info)
        if json.loads(action)["tool"] == "finish":
            break
        observation, _, _, _, info = env.step(action)
    branches = [env.fork() for _ in range(forks)]
    branches += [rehearsal_env.restore(env.checkpoint(), world=world) for _ in range(restores)]
    out = []
    for i, branch in enumerate(branches):
        branch.step(action)
        out.append(record_episode(branch.episode, run_id="run_forks", agent=agent, agent_version="v1",
                                  repeat=100 + 10 * repeat + i, seed=repeat, backend="sqlite", stress=True,
                                  provenance=branch.provenance()))
        branch.close()
    env.close()
    return out


def served(records: list[EpisodeRecord], key: str) -> list[EpisodeRecord]:
    """``records`` as episodes a key played over ``rehearsal serve`` (records carry the key's id)."""
    return [dataclasses.replace(r, key_id=key) for r in records]


def test_forks_of_passing_episodes_never_turn_needs_work_into_ready(world: World, root: Path) -> None:
    """The break: a key forks its passing episodes just before ``finish`` and finishes the forks; a 50% agent
    ("Needs work") read as 15 of 18, 83%, "Ready to pilot"."""
    roots = episodes(world, {s: ("reference", "give-up") for s in ALL})
    forks = [f for s in ALL for f in forked_finishes(world, s, 4)]
    assert len(forks) == 12 and {(f.outcome, f.parent_kind) for f in forks} == {("verified", "fork")}
    before = readiness_of(served(roots, "k_a"), versions_root=root)
    assert (before.label, before.counted, before.verified) == (NEEDS_WORK, 6, 3)
    after = readiness_of(served(roots + forks, "k_a"), versions_root=root)
    assert (after.label, after.counted, after.verified) == (NEEDS_WORK, 6, 3)
    assert after.reasons == before.reasons and dict(after.left_out)["fork (not evidence)"] == 12
    assert "12 fork (not evidence)" in format_readiness(after)
    [via_assess] = assess(served(roots + forks, "k_a"), versions_root=root)
    assert via_assess == after


def test_restores_are_never_evidence_and_forks_alone_count_nothing(world: World, root: Path) -> None:
    branches = [b for s in ALL for b in forked_finishes(world, s, 1, restores=1)]
    assert sorted(b.parent_kind or "" for b in branches) == ["fork"] * 3 + ["restore"] * 3
    assert all(b.outcome == "verified" for b in branches)
    r = readiness_of(branches, versions_root=root)
    assert not r.ready and (r.counted, r.verified) == (0, 0)
    assert r.left_out == (("fork (not evidence)", 3), ("restore (not evidence)", 3))
    assert r.reasons[0].startswith("only 0 scored episode(s)")
    # a fork that broke a hard rule or claimed done is no evidence either way: the root episodes decide
    roots = episodes(world, {s: ("reference",) for s in ALL})
    bad = [dataclasses.replace(b, outcome="rule_violated", false_completion=True) for b in branches]
    assert readiness_of(roots + bad, versions_root=root).ready


def test_another_keys_episodes_never_change_a_verdict(world: World, root: Path) -> None:
    """The break: with unbound keys, one bare ``finish`` played by another key under the rival's agent name
    turned the rival's 12/12 "Ready to pilot" into "Needs work"."""
    rival = served(episodes(world, {s: ("reference",) * 4 for s in ALL}), "k_rival")
    alone = readiness_of(rival, versions_root=root)
    assert alone.ready and (alone.counted, alone.verified) == (12, 12)
    spoiler = served(episodes(world, {"pay-ann": ("claim-done",)}), "k_spoiler")
    verdicts = {v.key_id: v for v in assess(rival + spoiler, versions_root=root)}
    assert set(verdicts) == {"k_rival", "k_spoiler"}
    assert verdicts["k_rival"].ready and verdicts["k_rival"].reasons == ()
    assert (verdicts["k_rival"].counted, verdicts["k_rival"].verified) == (12, 12)
    assert not verdicts["k_spoiler"].ready and verdicts["k_spoiler"].counted == 1
    # the other key is named as information only
    assert verdicts["k_rival"].other_keys == ("k_spoiler",)
    assert "(played by key k_rival)" in format_readiness(verdicts["k_rival"])
    assert format_readiness(verdicts["k_rival"]).startswith(READY)
    assert "also played under this agent version by key(s) k_spoiler" in format_readiness(verdicts["k_rival"])
    # episodes not played over serve (no key) are a verdict of their own, and change neither
    local = episodes(world, {"pay-ann": ("give-up",) * 3})
    mixed = {v.key_id: v for v in assess(rival + spoiler + local, versions_root=root)}
    assert mixed["k_rival"].ready and not mixed[None].ready and mixed[None].counted == 3


def test_another_keys_damaged_run_never_changes_a_verdict(world: World, root: Path, tmp_path: Path) -> None:
    write_part(tmp_path / "rival", served(episodes(world, {s: ("reference",) * 2 for s in ALL}), "k_rival"), 0)
    seal_run(tmp_path / "rival")
    write_part(tmp_path / "spoiler", served(episodes(world, {"pay-ann": ("reference",)}), "k_spoiler"), 0)
    # the spoiler's run is never sealed: its records cannot be trusted, but they are not the rival's
    verdicts = {v.key_id: v for v in assess_runs([tmp_path / "rival", tmp_path / "spoiler"], versions_root=root)}
    assert verdicts["k_rival"].ready and verdicts["k_rival"].reasons == ()
    assert not verdicts["k_spoiler"].ready and "cannot be trusted" in verdicts["k_spoiler"].reasons[0]
