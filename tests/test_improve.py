"""The improvement step: version 2 from a run's failures, with lineage; no holdout row can ever reach it."""

from __future__ import annotations

import ast
import json
import shutil
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from published import publish_content

from rehearsal_env.agents import AgentProfile, Endpoint, ProfileStore
from rehearsal_env.agents.testing import ModelServer, Reply
from rehearsal_env.cli import main
from rehearsal_env.improve import (
    HEADING,
    HoldoutRefused,
    LearningRecords,
    ModelWriter,
    RuleWriter,
    improve,
    is_improved,
    lineage_of,
    with_lessons,
)
from rehearsal_env.readiness import assess
from rehearsal_env.records import EpisodeRecord, read_records, seal_run, write_part
from rehearsal_env.runner import RunConfig, run
from rehearsal_env.worlds import load_world

IMPROVE_DIR = Path(__file__).resolve().parent.parent / "rehearsal_env" / "improve"
PROFILE = "support-bot"
TRAIN_DEV = ("refund-item-0001", "refund-item-0002", "cancel-order-0001", "refund-item-0004", "cancel-order-0004")
HOLDOUT = ("refund-item-0006", "cancel-order-0006")
CANARY = "HOLDOUT-CANARY"


def _as_profile(records: list[EpisodeRecord], version: str) -> list[EpisodeRecord]:
    """The records of a scripted run relabelled as episodes of ``support-bot`` ``version``; every holdout
    record's check names carry the canary, so any holdout text that reaches an output is found."""
    out = []
    for r in records:
        r = replace(r, agent=PROFILE, agent_version=version)
        if r.split == "holdout":
            r = replace(r, checks=tuple(replace(c, name=f"{CANARY} {c.name}") for c in r.checks))
        out.append(r)
    return out


def _write(out: Path, records: list[EpisodeRecord], like: Path) -> Path:
    """``records`` as a sealed run directory with the provenance of run ``like`` (sealed by this home's key,
    which is trusted: the improvement step must refuse what follows on its own)."""
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy(like / "provenance.json", out / "provenance.json")
    write_part(out, records, 0)
    seal_run(out)
    return out


def _run(tmp: Path, name: str, agent: str, version: str = "v1") -> Path:
    played = tmp / f"{name}-played"
    run(RunConfig(world="shop", agent=agent, scenarios=TRAIN_DEV + HOLDOUT), played, progress=False)
    return _write(tmp / name, _as_profile(read_records(played), version), played)


@pytest.fixture(scope="module", autouse=True)
def versions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """shop's version published where the improvement step looks (it decides holdout from it)."""
    root = tmp_path_factory.mktemp("versions")
    publish_content(load_world("shop"), root)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("REHEARSAL_WORLD_VERSIONS", str(root))
        yield root


@pytest.fixture(scope="module")
def runs(versions: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("improve")
    return _run(tmp, "wrong-order", "wrong:wrong-order"), _run(tmp, "claim", "wrong:do-nothing-but-claim")


@pytest.fixture()
def store(tmp_path: Path) -> ProfileStore:
    s = ProfileStore(tmp_path / "profiles")
    s.register(AgentProfile(name=PROFILE, agent="openai", model="m", instructions="Be careful."))
    return s


def _holdout_free(text: str) -> None:
    assert CANARY not in text
    for scenario in HOLDOUT:
        assert scenario not in text


def test_the_reader_cannot_be_asked_for_holdout() -> None:
    for splits in (("holdout",), ("train", "holdout"), ("test",)):
        with pytest.raises(HoldoutRefused, match="never"):
            LearningRecords(splits)  # type: ignore[arg-type]
    assert LearningRecords().splits == ("train", "dev")


def test_the_reader_returns_failed_train_and_dev_episodes_only(runs: tuple[Path, Path]) -> None:
    every = [r for run_dir in runs for r in read_records(run_dir)]
    assert {r.split for r in every} == {"train", "dev", "holdout"}
    assert sum(r.split == "holdout" and r.outcome != "verified" for r in every) >= 4  # there is holdout to leak
    failures = [f for run_dir in runs for f in LearningRecords().failures(run_dir)]
    expected = [r for r in every if r.split != "holdout" and r.outcome in ("not_achieved", "rule_violated")]
    assert sorted(f.key for f in failures) == sorted(f"{r.run_id}/{r.scenario}#{r.repeat}" for r in expected)
    assert {f.split for f in failures} <= {"train", "dev"}
    _holdout_free(json.dumps([f.__dict__ for f in failures], default=str))
    assert LearningRecords(("dev",)).count(runs[0]) == 2
    assert LearningRecords(agent=("someone-else",)).count(runs[0]) == 0


def _calls(tree: ast.AST) -> list[ast.Call]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)]


def test_no_code_path_of_the_improvement_step_can_read_a_record_but_through_the_filtered_scan() -> None:
    """Static: the step's modules import no other reader of records (read_records, read_table, from_row,
    pyarrow.parquet, pandas, duckdb), only _reader.py touches pyarrow, and every scan it makes carries the
    split filter."""
    modules = sorted(IMPROVE_DIR.glob("*.py")) + [IMPROVE_DIR.parent / "cli" / "_improve.py"]
    forbidden = {"read_records", "read_table", "from_row", "read_parquet", "ParquetFile", "to_row",
                 "pyarrow.parquet", "pandas", "duckdb", "polars", "inputs_from_record"}
    for path in modules:
        tree = ast.parse(path.read_text())
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        names |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        imported = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                imported |= {f"{node.module}"} | {a.name for a in node.names}
            elif isinstance(node, ast.Import):
                imported |= {a.name for a in node.names}
        reached = (names | imported) & forbidden
        assert not reached, f"{path.name} reaches a record reader: {reached}"
        if path.name != "_reader.py":
            assert not any(m and m.startswith("pyarrow") for m in imported), f"{path.name} imports pyarrow"
            modules_from = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
            assert not any(m.split(".")[-1] == "records" for m in modules_from), f"{path.name} imports records"
    reader = ast.parse((IMPROVE_DIR / "_reader.py").read_text())
    from_records = [n for n in ast.walk(reader) if isinstance(n, ast.ImportFrom) and n.module
                    and n.module.split(".")[0] == "records"]
    assert {a.name for n in from_records for a in n.names} == {"SCHEMA", "PublicKey", "checked_parts", "verify_seal",
                                                              "ROOT_EPISODE", "episode_kind"}
    scans = [c for c in _calls(reader) if isinstance(c.func, ast.Attribute) and c.func.attr in
             ("to_table", "count_rows", "to_batches", "scanner", "head", "take", "to_reader")]
    assert len(scans) == 6  # four counts that match the records with the published version (the fourth: scenarios
    # holdout by identity in another version), then the two reads
    for call in scans:
        assert any(k.arg == "filter" for k in call.keywords), f"a scan without filter= at line {call.lineno}"


def test_improve_writes_version_2_with_lineage_and_nothing_of_holdout(runs: tuple[Path, Path],
                                                                      store: ProfileStore) -> None:
    result = improve(list(runs), PROFILE, store=store)
    assert result.profile is not None and result.lineage is not None
    assert result.profile.ref == f"{PROFILE}@v2" and store.get(PROFILE).version == 2
    lineage = result.lineage
    assert lineage == lineage_of(PROFILE, "v2", store.root)
    assert (lineage.version, lineage.parent_version, lineage.writer) == (2, 1, "rules")
    run_ids = {r.run_id for run_dir in runs for r in read_records(run_dir)}
    assert set(lineage.runs) == run_ids and lineage.splits == ("train", "dev")
    assert set(lineage.episodes) == {f.key for f in result.failures} and len(lineage.episodes) == 10
    text = result.profile.instructions
    assert text.startswith("Be careful.") and HEADING in text
    assert 'Hard rule "no refund on any order but #N" was broken in' in text
    assert "Refund at most once per request" in text  # the policy the broken rule enforces
    assert "You said the work was done while it was not" in text  # the false completions of the claim run
    _holdout_free(text + lineage.to_json() + (store.root / PROFILE / "v2.toml").read_text())
    assert is_improved(PROFILE, "v2", store.root) and not is_improved(PROFILE, "v1", store.root)
    again = improve(list(runs), f"{PROFILE}@v1", store=store)  # the same failures again: v2 exists already
    assert again.profile is None and "exists already" in (again.reason or "")
    with pytest.raises(ValueError, match="no train or dev episode of support-bot@v2"):
        improve(list(runs), PROFILE, store=store)  # the latest, v2, has not been run yet


def test_the_rule_based_writer_is_deterministic(runs: tuple[Path, Path], tmp_path: Path) -> None:
    texts = []
    for n in range(2):
        s = ProfileStore(tmp_path / f"store{n}")
        s.register(AgentProfile(name=PROFILE, agent="openai", model="m", instructions="Be careful."))
        result = improve(list(runs), f"{PROFILE}@v1", writer=RuleWriter(), store=s)
        assert result.profile is not None
        texts.append(result.profile.instructions)
    assert texts[0] == texts[1]


def test_with_a_model_the_model_writes_the_lessons_and_reads_no_holdout(runs: tuple[Path, Path],
                                                                       store: ProfileStore) -> None:
    with ModelServer() as server:
        server.script("lesson-writer", Reply.text("Here are the lessons:\n- Refund only the order the customer "
                                                  "named.\n- Confirm the change with a read before finish."))
        result = improve(list(runs), PROFILE, store=store,
                         writer=ModelWriter("lesson-writer", Endpoint(base_url=server.base_url)))
        requests = json.dumps(server.requests)
    assert result.lineage is not None and result.lineage.writer == "model:lesson-writer"
    assert result.lineage.lessons == ("Refund only the order the customer named.",
                                      "Confirm the change with a read before finish.")
    assert result.profile is not None and "- Refund only the order the customer named." in result.profile.instructions
    assert "no refund on any order but #N" in requests and "Be careful." in requests
    _holdout_free(requests)


def test_a_model_that_writes_no_lesson_writes_no_version(runs: tuple[Path, Path], store: ProfileStore) -> None:
    with ModelServer() as server:
        server.script("quiet", Reply.text("I would not change anything."))
        with pytest.raises(ValueError, match="answered no lesson"):
            improve(list(runs), PROFILE, store=store, writer=ModelWriter("quiet", Endpoint(base_url=server.base_url)))
    assert store.get(PROFILE).version == 1


def _holdout_only(tmp: Path, runs: tuple[Path, Path]) -> Path:
    return _write(tmp / "holdout-only", [r for r in read_records(runs[0]) if r.split == "holdout"], runs[0])


def test_a_run_of_holdout_failures_only_teaches_nothing(runs: tuple[Path, Path], store: ProfileStore,
                                                       tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no train or dev episode of support-bot@v1"):
        improve([_holdout_only(tmp_path, runs)], PROFILE, store=store)
    assert store.get(PROFILE).version == 1


def test_records_that_call_a_holdout_scenario_train_are_refused(runs: tuple[Path, Path], store: ProfileStore,
                                                               tmp_path: Path) -> None:
    relabelled = [replace(r, split="train") if r.split == "holdout" else r for r in read_records(runs[0])]
    out = _write(tmp_path / "relabelled", relabelled, runs[0])
    with pytest.raises(HoldoutRefused, match="2 record\\(s\\) labelled 'train' .* places in another split"):
        improve([out], PROFILE, store=store)
    assert store.get(PROFILE).version == 1


def test_a_built_in_agent_profile_is_not_improved(runs: tuple[Path, Path], tmp_path: Path) -> None:
    s = ProfileStore(tmp_path / "p")
    s.register(AgentProfile(name="scripted", agent="null"))
    with pytest.raises(ValueError, match="reads no instructions"):
        improve(list(runs), "scripted", store=s)


def test_the_cli_writes_version_2(runs: tuple[Path, Path], store: ProfileStore,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["improve", str(runs[0]), str(runs[1]), "--profile", PROFILE, "--profiles", str(store.root)])
    out = capsys.readouterr().out
    assert code == 0 and f"wrote {PROFILE}@v2 from {PROFILE}@v1: 10 failed train/dev episode(s) of 10" in out
    assert main(["improve", str(runs[0]), "--profile", "nobody", "--profiles", str(store.root)]) == 2
    assert "no agent profile 'nobody'" in capsys.readouterr().err


def test_readiness_counts_only_holdout_for_the_improved_version(runs: tuple[Path, Path], store: ProfileStore,
                                                                 tmp_path: Path) -> None:
    result = improve(list(runs), PROFILE, store=store)
    assert result.profile is not None and result.profile.version == 2
    v1 = read_records(_run(tmp_path, "reference-v1", "reference", "v1"))
    v2 = read_records(_run(tmp_path, "reference-v2", "reference", "v2"))
    verdicts = {r.agent_version: r for r in assess(v1 + v2, profiles_root=store.root)}
    assert not verdicts["v1"].improved and verdicts["v1"].counted == len(TRAIN_DEV + HOLDOUT)
    assert verdicts["v2"].improved and verdicts["v2"].counted == len(HOLDOUT)
    assert ("learned from (not holdout)", len(TRAIN_DEV)) in verdicts["v2"].left_out


def _relabelled(r: EpisodeRecord, how: str) -> EpisodeRecord:
    if r.split != "holdout":
        return r
    if how == "re-cased world":
        return replace(r, world="Shop", split="dev")
    if how == "renamed world":
        return replace(r, world="shop-copy", split="dev")
    if how == "suffixed scenario":
        return replace(r, scenario=f"{r.scenario}-dev", split="dev")
    return replace(r, split="dev")


@pytest.mark.parametrize("how", ["re-cased world", "renamed world", "suffixed scenario", "plain relabel"])
def test_relabelled_holdout_records_are_refused_whatever_the_labels_say(
        runs: tuple[Path, Path], store: ProfileStore, tmp_path: Path, how: str) -> None:
    """The issue's probes: holdout records renamed so that the record's own labels no longer say holdout,
    sealed by a trusted key. Holdout is decided from the published version, so each is refused and the
    canary reaches no version."""
    out = _write(tmp_path / "relabelled", [_relabelled(r, how) for r in read_records(runs[0])], runs[0])
    expected = {"re-cased world": "name another world or world version",
                "renamed world": "name another world or world version",
                "suffixed scenario": "name scenarios that shop wv_.* does not publish",
                "plain relabel": "labelled 'dev' are of scenarios that the published shop wv_.* places in another"}
    with pytest.raises(HoldoutRefused, match=expected[how]) as refused:
        improve([out], PROFILE, store=store)
    assert CANARY not in str(refused.value)
    assert store.get(PROFILE).version == 1


def test_the_whole_run_renamed_consistently_is_not_published_so_refused(runs: tuple[Path, Path], store: ProfileStore,
                                                                      tmp_path: Path) -> None:
    """Records and provenance.json both say ``Shop``: no published version has that name."""
    out = tmp_path / "renamed"
    out.mkdir()
    blob = json.loads((runs[0] / "provenance.json").read_text())
    (out / "provenance.json").write_text(json.dumps({**blob, "world": "Shop"}))
    write_part(out, [replace(r, world="Shop", split="dev" if r.split == "holdout" else r.split)
                     for r in read_records(runs[0])], 0)
    seal_run(out)
    with pytest.raises(HoldoutRefused, match="world 'Shop' version wv_.* which is not published here"):
        improve([out], PROFILE, store=store)
    assert store.get(PROFILE).version == 1


def test_holdout_rows_mixed_into_a_dev_runs_directory_are_refused(runs: tuple[Path, Path], store: ProfileStore,
                                                                 tmp_path: Path) -> None:
    """A dev run's directory with another run's holdout rows added as a part, labelled dev, resealed."""
    mine = [r for r in read_records(runs[0]) if r.split != "holdout"]
    theirs = [replace(r, split="dev", run_id=mine[0].run_id) for r in read_records(runs[1]) if r.split == "holdout"]
    out = _write(tmp_path / "mixed", mine, runs[0])
    write_part(out, theirs, 1)
    with pytest.raises(ValueError, match="part-00001.parquet: is not among the parts the run sealed"):
        improve([out], PROFILE, store=store)  # unsealed since: refused before any row is read
    seal_run(out)
    with pytest.raises(HoldoutRefused, match="labelled 'dev' are of scenarios that the published"):
        improve([out], PROFILE, store=store)
    assert store.get(PROFILE).version == 1


def test_a_world_version_not_published_here_teaches_nothing(runs: tuple[Path, Path], store: ProfileStore,
                                                            tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REHEARSAL_WORLD_VERSIONS", str(tmp_path / "elsewhere"))
    with pytest.raises(HoldoutRefused, match="which is not published here"):
        improve(list(runs), PROFILE, store=store)
    assert store.get(PROFILE).version == 1


def test_repeated_lessons_are_written_once_and_an_unchanged_profile_is_refused(runs: tuple[Path, Path],
                                                                              store: ProfileStore) -> None:
    same = "- Read the order before any refund.\n" * 2 + "- read the order before any refund\n"
    with ModelServer() as server:
        server.script("parrot", Reply.text(same + "- Read the order  before any refund!"), Reply.text(same))
        writer = ModelWriter("parrot", Endpoint(base_url=server.base_url))
        first = improve(list(runs), PROFILE, store=store, writer=writer)
        again = improve(list(runs), f"{PROFILE}@v1", store=store, writer=writer)
    assert first.lineage is not None and first.lineage.lessons == ("Read the order before any refund.",)
    assert first.profile is not None and first.profile.instructions.count("efore any refund") == 1
    assert again.profile is None and again.reason is not None and "exists already" in again.reason
    assert store.get(PROFILE).version == 2
    held = with_lessons("Be careful.", ["Read the order before any refund."])
    assert with_lessons(held, ["read the order before any refund", " Read the order before any refund. "]) == held


def _forks_of(records: list[EpisodeRecord], run_id: str, kind: str = "fork") -> list[EpisodeRecord]:
    """``records`` as forks (or restores) of themselves in run ``run_id``, numbered after every repeat."""
    return [replace(r, run_id=run_id, repeat=r.repeat + 100 + i, parent_episode=f"{r.run_id}/{r.scenario}#{r.repeat}",
                    parent_turn=1, parent_kind=kind) for i, r in enumerate(records)]


def test_forks_and_restores_are_never_learned_from_and_are_counted_apart(runs: tuple[Path, Path],
                                                                          store: ProfileStore, tmp_path: Path) -> None:
    """Issue 31: a fork is a training and search tool, never more evidence about the agent; the improvement step
    learns from root episodes only (a fork's failure would be learned from as the agent's, under its parent's key)."""
    mine = read_records(runs[0])
    claims = [r for r in read_records(runs[1]) if r.split != "holdout"]
    assert {r.outcome for r in claims} == {"not_achieved"} and {r.outcome for r in mine} == {"rule_violated"}
    branches = _forks_of(claims[:4], mine[0].run_id) + _forks_of(claims[4:], mine[0].run_id, "restore")
    out = _write(tmp_path / "with-forks", mine + branches, runs[0])
    reader = LearningRecords()
    assert reader.count(out) == reader.count(runs[0]) == len(TRAIN_DEV)
    assert reader.failures(out) == reader.failures(runs[0])
    assert reader.not_root(out) == {"fork": 4, "restore": len(claims) - 4}
    result = improve([out], PROFILE, store=store)
    assert result.lineage is not None and result.episodes == len(TRAIN_DEV)
    assert set(result.lineage.episodes) == {f.key for f in LearningRecords().failures(runs[0])}
    assert result.not_root == (("fork", 4), ("restore", len(claims) - 4))
    assert {f.outcome for f in result.failures} == {"rule_violated"}  # nothing of the forked claims


def test_a_run_of_forks_only_teaches_nothing(runs: tuple[Path, Path], store: ProfileStore, tmp_path: Path) -> None:
    mine = read_records(runs[0])
    out = _write(tmp_path / "forks-only", _forks_of(mine, mine[0].run_id), runs[0])
    with pytest.raises(ValueError, match=r"no train or dev episode of support-bot@v1 .*5 fork\(s\) .*never evidence"):
        improve([out], PROFILE, store=store)
    assert store.get(PROFILE).version == 1


def test_the_lessons_name_the_main_failure_and_the_rejections_observed() -> None:
    """A model that never called a world tool is told so first; rejected attempts are described by the kinds the
    records observed, not by a generic list."""
    from rehearsal_env.improve import FailedEpisode, RuleWriter, findings

    def failed(n: int, calls: int, kinds: tuple[str, ...]) -> FailedEpisode:
        return FailedEpisode(run_id="r", world="shop", world_version="wv_x", scenario=f"s-{n}", split="dev",
                             category="c", agent="a", agent_version="v1", repeat=0, outcome="not_achieved",
                             ending="done", false_completion=False, duplicate_effects=0,
                             rejected_attempts=len(kinds), unnecessary_interruptions=0, failed_goals=("goal #7",),
                             broken_rules=(), world_tool_calls=calls, rejected_kinds=kinds)

    episodes = [failed(1, 0, ("cut_off_length", "cut_off_length")), failed(2, 0, ("malformed_json",)),
                failed(3, 4, ())]
    found = findings(episodes)
    assert (found[0].kind, found[0].episodes) == ("goal", 3) and found[1].kind == "no_world_tool"
    lessons = RuleWriter().lessons(episodes, "", [])
    assert lessons[1].startswith("No world tool was called in 2 failed episodes")
    rejected = next(x for x in lessons if x.startswith("Attempts were rejected"))
    assert "replies cut off at max_tokens (2x); call arguments that are not JSON (1x)" in rejected
    assert "tools not offered" not in rejected
