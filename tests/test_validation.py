"""Scenario validation: unfair scenarios are kept out with the right reason; versions are immutable;
recheck withdraws a scenario that broke, and runs stop using it."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import unfairworld

from rehearsal_env import worlds
from rehearsal_env.cli import main
from rehearsal_env.runner import RunConfig, plan
from rehearsal_env.versions import (
    Fact,
    Manifest,
    VersionConflict,
    WorldVersion,
    build_and_publish,
    build_version,
    load_manifest,
    publish,
    recheck,
    scenarios_not_in_use,
    withdraw_by_hand,
    world_content,
)
from rehearsal_env.worlds import World


@pytest.fixture(scope="module")
def world() -> World:
    return unfairworld.build_world()


@pytest.fixture(scope="module")
def version(world: World) -> WorldVersion:
    return build_version(world)


@pytest.fixture()
def service_up() -> Iterator[None]:
    unfairworld.SERVICE["up"] = True
    yield
    unfairworld.SERVICE["up"] = True


def test_fair_scenarios_are_in_and_unfair_ones_kept_out_with_the_reason(version: WorldVersion) -> None:
    assert version.scenarios == ("fair", "gated")
    kept = {v.scenario: v for v in version.kept_out}
    assert set(kept) == set(unfairworld.EXPECTED_KEPT_OUT)
    for sid, head in unfairworld.EXPECTED_KEPT_OUT.items():
        assert len(kept[sid].reasons) == 1, (sid, kept[sid].reasons)
        assert kept[sid].reasons[0].startswith(head + ": "), (sid, kept[sid].reasons)


def test_reasons_say_what_was_found(version: WorldVersion) -> None:
    reason = {v.scenario: v.reasons[0] for v in version.kept_out}
    assert "'an account for zed' wanted eq 1, held 0" in reason["impossible-check"]
    assert "pay_out(account_id=3)" in reason["hidden-id"] and "before it" in reason["hidden-id"]
    assert "the null agent: verified" in reason["passes-by-itself"]
    assert "wrong:pays-fifty: verified" in reason["wrong-not-caught"]
    assert "the database ended in a different state" in reason["nondeterministic"]


def test_fair_scenario_findings(version: WorldVersion) -> None:
    fair = version.validation_of("fair")
    assert fair.fair and fair.end_digest and len(fair.end_digest) == 64
    assert fair.reference_passes.detail == "verified in 4 turn(s), ending done"  # the stress layer's retry
    assert fair.wrong_fail.detail == "wrong:other-account -> not_achieved"
    assert fair.facts_reachable.detail == ("3 id(s) used by the reference, each shown before use "
                                           "(3 from the request)")
    assert fair.replay_same.detail.startswith("the same 4 actions after a reset with seed 1: verified")


def test_reset_and_isolation_facts_are_measured(version: WorldVersion) -> None:
    facts = {f.name: f for f in version.isolation}
    assert facts["reset"].holds is True and "reset() reached digest" in facts["reset"].detail
    assert facts["clock"].holds is True and version.clock in facts["clock"].detail
    assert facts["network"] == Fact("network", None,
                                    "not applicable: embedded database, no application network")


def test_two_builds_write_the_same_version(world: World, version: WorldVersion) -> None:
    again = build_version(world)
    assert again.to_dict() == version.to_dict()
    assert WorldVersion.from_dict(json.loads(json.dumps(version.to_dict()))) == version


def test_published_versions_are_immutable(world: World, version: WorldVersion, tmp_path: Path) -> None:
    content = world_content(world)
    folder, new = publish(version, content, tmp_path)
    assert new and folder == tmp_path / "unfair" / version.id
    assert json.loads((folder / "version.json").read_text())["id"] == version.id
    assert publish(version, content, tmp_path) == (folder, False)
    tampered = dataclasses.replace(version, validation=version.validation[:-1])
    with pytest.raises(VersionConflict, match="published versions are immutable"):
        publish(tampered, content, tmp_path)
    with pytest.raises(ValueError, match="publish the content the version was built from"):
        publish(version, {**content, "roles": []}, tmp_path)
    assert WorldVersion.from_dict(json.loads((folder / "version.json").read_text())) == version


def test_recheck_withdraws_a_scenario_that_broke_and_runs_stop_using_it(
        world: World, tmp_path: Path, service_up: None) -> None:
    built = build_and_publish(world, tmp_path)
    assert built.published and built.version.scenarios == ("fair", "gated")
    first = recheck(world, tmp_path)
    assert first.rechecked == ("fair", "gated") and first.withdrawn == ()
    unfairworld.SERVICE["up"] = False  # the payout service behind the `gated` scenario now refuses
    second = recheck(world, tmp_path)
    assert [w.scenario for w in second.withdrawn] == ["gated"]
    withdrawal = second.withdrawn[0]
    assert withdrawal.reason.startswith("the reference solution does not pass")
    assert withdrawal.world_clock == world.now and withdrawal.by == "recheck"
    assert withdrawal.recorded_at != withdrawal.world_clock  # the recheck's own time, recorded as such
    manifest = load_manifest(world, root=tmp_path)
    assert manifest.in_use == ("fair",) and manifest.withdrawn_ids == {"gated"}
    assert "gated" in [v.scenario for v in manifest.version.validation]  # it stays in the record
    assert recheck(world, tmp_path).rechecked == ("fair",)  # withdrawn scenarios are not replayed again
    # the version itself did not change
    assert WorldVersion.from_dict(json.loads((built.path / "version.json").read_text())) == built.version


def test_runner_leaves_out_kept_out_and_withdrawn_scenarios(
        world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = RunConfig(world="unfair", agent="reference")
    assert len(plan(config, world)) == 7  # unpublished: every scenario
    monkeypatch.setenv("REHEARSAL_WORLD_VERSIONS", str(tmp_path))
    build_and_publish(world)
    assert [s.scenario for s in plan(config, world)] == ["fair", "gated"]
    manifest = withdraw_by_hand(world, "fair", "the check wants one exact record; the request allowed two")
    assert manifest.withdrawn[0].by == "manual"
    assert [s.scenario for s in plan(config, world)] == ["gated"]
    unused = scenarios_not_in_use(world)
    assert unused["fair"].startswith("withdrawn from wv_")
    assert unused["hidden-id"].startswith("kept out of wv_")
    with pytest.raises(ValueError, match="'hidden-id' is not in use: kept out"):
        plan(dataclasses.replace(config, scenarios=("hidden-id",)), world)
    with pytest.raises(KeyError, match="not in use"):
        withdraw_by_hand(world, "fair", "again")


def test_unpublished_version_says_how_to_build(world: World, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="run `rehearsal world build unfair` first"):
        load_manifest(world, root=tmp_path)
    assert isinstance(Manifest, type)


def test_recheck_and_withdraw_from_the_command_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        service_up: None) -> None:
    monkeypatch.setitem(worlds._REGISTRY, "unfair", unfairworld.build_world)
    monkeypatch.setattr(worlds, "_LOADED", dict(worlds._LOADED))
    out = ["--out", str(tmp_path)]
    assert main(["world", "build", "unfair", *out]) == 0
    printed = capsys.readouterr().out
    assert "7 scenarios validated, 2 in the version, 5 kept out" in printed
    assert "kept out hidden-id: a needed fact is not reachable: turn 1 calls pay_out(account_id=3)" in printed
    assert main(["world", "build", "unfair", *out]) == 0
    assert "already published (identical; nothing written)" in capsys.readouterr().out
    unfairworld.SERVICE["up"] = False
    assert main(["world", "recheck", "unfair", *out]) == 0
    printed = capsys.readouterr().out
    assert "rechecked 2 scenarios, withdrew 1" in printed
    assert "withdrawn gated: the reference solution" in printed
    assert main(["world", "withdraw", "unfair", "fair", "--reason", "the request allowed two", *out]) == 0
    assert "0 in use" in capsys.readouterr().out
    assert main(["world", "withdraw", "unfair", "fair", "--reason", "again", *out]) == 2
    assert "cannot withdraw 'fair'" in capsys.readouterr().err
    assert main(["world", "show", "unfair", "--versions", str(tmp_path), "--markdown", "-"]) == 0
    page = capsys.readouterr().out
    assert "| gated | dev | payout | pass | pass | pass | pass | pass | withdrawn |" in page
    assert "- **gated** (recheck), world date 2026-01-15, recorded at " in page
    assert "- **hidden-id**: a needed fact is not reachable" in page
