"""`rehearsal eval rescore`: re-grading stored runs from their records alone, and rechecking end states."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
from published import publish_content

from rehearsal_env.agents import Policy, make_agent
from rehearsal_env.cli import main
from rehearsal_env.records import EpisodeRecord, read_records, seal_run, write_part
from rehearsal_env.rescore import rescore_run
from rehearsal_env.runner import RunConfig, run
from rehearsal_env.scenarios import Scenario
from rehearsal_env.versions import NotPublished
from rehearsal_env.worlds import World, load_world, register_world

SPLIT = "dev"


def mixed(scenario: Scenario) -> Policy:
    """Per scenario, the reference, a careless solution or the null agent, so every outcome shows up."""
    names = ["reference", *(w.name for w in scenario.wrong), "null"]
    return make_agent(names[sum(map(ord, scenario.id)) % len(names)], scenario)


def shop_run(out: Path, profile: str | None) -> Path:
    run(RunConfig(world="shop", split=SPLIT, agent="mixed", reward_profile=profile, repeats=2), out,
        agent_factory=mixed)
    return out


@pytest.fixture(scope="module")
def versions(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("versions")
    publish_content(load_world("shop"), root)
    return root


@pytest.fixture(scope="module")
def benchmark_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shop_run(tmp_path_factory.mktemp("benchmark"), "benchmark")


@pytest.fixture(scope="module")
def rl_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shop_run(tmp_path_factory.mktemp("rl"), "rl")


def rewards(records: list[EpisodeRecord]) -> dict[tuple[str, int], float | None]:
    return {(r.scenario, r.repeat): r.reward for r in records}


def test_the_mixed_run_has_every_outcome_and_profiles_that_disagree(benchmark_run: Path, rl_run: Path) -> None:
    records = read_records(benchmark_run)
    assert {r.outcome for r in records} == {"verified", "not_achieved", "rule_violated"}
    assert rewards(records) != rewards(read_records(rl_run))


def test_rescoring_under_the_runs_own_profile_reproduces_every_reward(benchmark_run: Path, tmp_path: Path) -> None:
    report = rescore_run(benchmark_run, "benchmark", tmp_path / "same")
    assert report.same_contract and report.ok
    assert report.identical == report.episodes == len(read_records(benchmark_run)) and report.changed == ()
    assert rewards(read_records(tmp_path / "same")) == rewards(read_records(benchmark_run))


def test_rescoring_under_the_other_profile_equals_scoring_live_with_it(benchmark_run: Path, rl_run: Path,
                                                                       tmp_path: Path) -> None:
    report = rescore_run(benchmark_run, "rl", tmp_path / "rl")
    assert not report.same_contract and report.ok and report.changed
    rescored, live = read_records(tmp_path / "rl"), read_records(rl_run)
    assert rewards(rescored) == rewards(live)
    assert {r.provenance.to_dict()["reward_profile"] for r in rescored} == {"rl"}
    blob = json.loads((tmp_path / "rl" / "provenance.json").read_text())
    assert blob == json.loads((rl_run / "provenance.json").read_text())
    assert json.loads((tmp_path / "rl" / "summary.json").read_text())["mean_reward"] == report.mean_reward_after
    outcome = rescore_run(rl_run, "outcome", tmp_path / "outcome")
    assert rewards(read_records(tmp_path / "outcome")) == {(r.scenario, r.repeat): r.outcome_reward for r in live}
    assert outcome.ok


def test_rescore_touches_no_database_application_or_agent(benchmark_run: Path, tmp_path: Path, versions: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    import rehearsal_env.agents as agents
    import rehearsal_env.backends as backends
    import rehearsal_env.backends.sqlite as sqlite
    import rehearsal_env.env as env
    import rehearsal_env.rescore._rebuild as rescore_rebuild
    import rehearsal_env.runner._play as serial
    import rehearsal_env.runner._resolved as resolved
    import rehearsal_env.tools as tools

    def unavailable(*args: object, **kwargs: object) -> None:
        raise AssertionError("rescoring must not touch a database, the application or an agent")

    # The recheck rebuilds each end state in a private in-memory SQLite database from the world's
    # snapshot and the stored changes (rescore.end_state); the run's own database is never opened.
    rebuilt: list[object] = []
    monkeypatch.setattr(rescore_rebuild, "SQLiteDatabase", lambda world: rebuilt.append(world) or real(world))
    real = sqlite.SQLiteDatabase
    targets: list[tuple[object, str]] = [
        (backends, "open_database"), (serial, "open_database"), (resolved, "make_agent"), (agents, "make_agent"),
        (env.RehearsalEnv, "__init__"), (env.Episode, "__init__"), (tools.ToolContext, "__init__")]
    try:
        targets.append((importlib.import_module("rehearsal_env.backends.postgres").PostgresDatabase, "__init__"))
    except ImportError:  # a build without the PostgreSQL backend has nothing more to forbid
        pass
    for target, name in targets:
        monkeypatch.setattr(target, name, unavailable)
    report = rescore_run(benchmark_run, "rl", tmp_path / "offline", recheck_checks=True, versions_root=versions)
    assert report.ok and report.rechecked == report.recheck_agree == report.episodes > 0
    assert len(rebuilt) == report.episodes
    assert main(["eval", "rescore", str(benchmark_run), "--profile", "benchmark", "--out", str(tmp_path / "cli"),
                 "--recheck", "--versions", str(versions)]) == 0


def test_recheck_rebuilds_every_end_state_and_gets_the_stored_verdict(rl_run: Path, versions: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "rescore", str(rl_run), "--profile", "rl", "--recheck", "--json",
                 "--versions", str(versions)]) == 0
    report = json.loads(capsys.readouterr().out)
    n = len(read_records(rl_run))
    assert report["rechecked"] == report["recheck_agree"] == report["identical"] == report["episodes"] == n
    assert report["out"] == str(rl_run / "rescore-rl") and report["ok"] is True


def _tampered(run_dir: Path, out: Path, change: str) -> Path:
    """A copy of the run whose first verified write episode lost its row changes of the given kind."""
    records = read_records(run_dir)
    victim = next(r for r in records if r.outcome == "verified" and any(c.change == change for c in r.changes))
    kept = tuple(c for c in victim.changes if c.change != change)
    edited = [dataclasses.replace(r, changes=kept) if r is victim else r for r in records]
    out.mkdir()
    shutil.copy(run_dir / "provenance.json", out / "provenance.json")
    write_part(out, edited, 0)
    seal_run(out)  # sealed by a trusted key: the recheck, not the seal, must find it
    return out


def test_recheck_catches_a_record_whose_changes_do_not_give_its_verdict(rl_run: Path, tmp_path: Path, versions: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    bad = _tampered(rl_run, tmp_path / "bad", "updated")
    report = rescore_run(bad, "rl", recheck_checks=True, versions_root=versions)
    assert not report.ok and report.recheck_agree == report.rechecked - 1
    assert any("outcome: stored verified, re-run" in d for d in report.recheck_differences)
    assert report.identical == report.episodes  # the rewards come from the stored components either way
    assert main(["eval", "rescore", str(bad), "--profile", "rl", "--recheck", "--versions", str(versions)]) == 1
    n = report.episodes
    assert f"{n - 1}/{n} verdicts equal the stored ones" in capsys.readouterr().out


def test_same_contract_with_other_rewards_is_an_error(benchmark_run: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from rehearsal_env.rewards import profiles_dir

    edited = tmp_path / "profiles"
    shutil.copytree(profiles_dir(), edited)
    text = (edited / "benchmark.toml").read_text().replace("correctness = 0.50", "correctness = 0.90")
    (edited / "benchmark.toml").write_text(text)  # the weights moved, the reward_version did not
    monkeypatch.setenv("REHEARSAL_PROFILES_DIR", str(edited))
    report = rescore_run(benchmark_run, "benchmark", tmp_path / "drift")
    assert report.same_contract and report.changed and not report.ok
    assert main(["eval", "rescore", str(benchmark_run), "--profile", "benchmark", "--out",
                 str(tmp_path / "drift2")]) == 1
    assert "same contract, different rewards" in capsys.readouterr().out


def test_rescore_refuses_what_it_cannot_do(benchmark_run: Path, tmp_path: Path, tiny_world: World,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="never overwrites the stored records"):
        rescore_run(benchmark_run, "rl", benchmark_run)
    assert main(["eval", "rescore", str(benchmark_run), "--profile", "nope"]) == 2
    assert "known profiles" in capsys.readouterr().err
    records = read_records(benchmark_run)
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(benchmark_run / "provenance.json", bare / "provenance.json")
    write_part(bare, [dataclasses.replace(r, reward_components=()) for r in records], 0)
    seal_run(bare)
    with pytest.raises(ValueError, match="no stored reward components"):
        rescore_run(bare, "rl")
    assert rescore_run(bare, "outcome").ok
    register_world("tiny", lambda: tiny_world)
    run(RunConfig(world="tiny"), tmp_path / "tiny")
    mixed_dir = tmp_path / "mixed"
    mixed_dir.mkdir()
    shutil.copy(benchmark_run / "provenance.json", mixed_dir / "provenance.json")
    write_part(mixed_dir, [*records, *read_records(tmp_path / "tiny")], 0)
    with pytest.raises(ValueError, match="holds records of 2 runs"):
        seal_run(mixed_dir)  # a directory mixing runs is never sealed, so never read
    with pytest.raises(ValueError, match="holds records of 2 runs"):
        rescore_run(mixed_dir, "rl")


def test_records_of_a_postgres_run_rebuild_on_sqlite_to_the_same_verdicts(postgres_dsn: str, tmp_path: Path,
                                                                          versions: Path) -> None:
    chosen = tuple(s.id for s in load_world("shop").scenarios(SPLIT))[::5]
    for backend, options in (("postgres", {"dsn": postgres_dsn}), ("sqlite", {})):
        run(RunConfig(world="shop", scenarios=chosen, agent="mixed", backend=backend, backend_options=options),
            tmp_path / backend, agent_factory=mixed)
    pg, lite = read_records(tmp_path / "postgres"), read_records(tmp_path / "sqlite")
    assert len(pg) == len(chosen) and any(r.changes for r in pg)
    assert [(r.outcome, r.changes, r.reward_components) for r in pg] == [
        (r.outcome, r.changes, r.reward_components) for r in lite]
    report = rescore_run(tmp_path / "postgres", "rl", recheck_checks=True, versions_root=versions)
    assert report.ok and report.rechecked == report.recheck_agree == len(chosen)


@pytest.mark.parametrize("world_name", ["shop", "analytics"])
def test_a_records_components_and_reward_equal_the_live_ones(world_name: str) -> None:
    from rehearsal_env.env import RehearsalEnv
    from rehearsal_env.provenance import provenance_of
    from rehearsal_env.records import record_episode
    from rehearsal_env.rewards import components_of
    from rehearsal_env.runner import run_episode

    world = load_world(world_name)
    provenance = provenance_of(world, "rl")
    for scenario in world.scenarios(SPLIT):
        env = RehearsalEnv(scenario, world, reward_profile="rl")
        result = run_episode(env, mixed(scenario))
        record = record_episode(env.episode, run_id="r", agent="mixed", agent_version="1", repeat=0, seed=0,
                                backend="sqlite", stress=True, provenance=provenance)
        live = components_of(env.episode, result.verdict).values()
        assert {c.name: c.value for c in record.reward_components} == live, scenario.id
        assert (record.reward or 0.0) == result.reward, scenario.id
        env.close()


def test_recheck_takes_the_checks_from_the_published_version_never_from_the_record(
        rl_run: Path, tmp_path: Path, versions: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each failed check's stored SQL replaced by ``SELECT ?`` with the wanted value, the outcome rewritten to
    verified and the run sealed again by a trusted key: every reader accepts it, the recheck does not."""
    records = read_records(rl_run)
    forged = []
    for r in records:
        if r.outcome in ("not_achieved", "rule_violated") and r.checks:
            checks = tuple(c if c.passed else dataclasses.replace(c, sql="SELECT ?", params=f"[{c.want}]",
                                                                  held=c.want, passed=True) for c in r.checks)
            r = dataclasses.replace(r, checks=checks, outcome="verified")
        forged.append(r)
    assert sum(a.outcome != b.outcome for a, b in zip(records, forged, strict=True)) > 0
    out = tmp_path / "forged"
    out.mkdir()
    shutil.copy(rl_run / "provenance.json", out / "provenance.json")
    write_part(out, forged, 0)
    seal_run(out)
    report = rescore_run(out, "rl", recheck_checks=True, versions_root=versions)
    lied = sum(a.outcome != b.outcome for a, b in zip(records, forged, strict=True))
    assert not report.ok and report.recheck_agree == report.rechecked - lied
    assert any("re-run with the published check" in d for d in report.recheck_differences)
    assert any("outcome: stored verified, re-run" in d for d in report.recheck_differences)
    assert main(["eval", "rescore", str(out), "--reward-profile", "rl", "--recheck", "--versions", str(versions)]) == 1


def test_recheck_refuses_a_world_version_not_published_here(rl_run: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(NotPublished, match="is not published under"):
        rescore_run(rl_run, "rl", tmp_path / "out", recheck_checks=True, versions_root=tmp_path / "none")
    assert not (tmp_path / "out").exists()
    assert main(["eval", "rescore", str(rl_run), "--reward-profile", "rl", "--recheck", "--versions",
                 str(tmp_path / "none"), "--out", str(tmp_path / "cli")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rehearsal: error: ") and "is not published" in err and err.count("\n") == 1


def test_the_rescored_run_is_sealed_and_measured(benchmark_run: Path, tmp_path: Path) -> None:
    from rehearsal_env.measure import load_run
    from rehearsal_env.records import verify_seal

    rescore_run(benchmark_run, "rl", tmp_path / "rl")
    assert verify_seal(tmp_path / "rl").episodes == len(read_records(benchmark_run))
    assert load_run(tmp_path / "rl")
