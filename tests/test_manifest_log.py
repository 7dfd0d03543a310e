"""The append-only manifest: each part written appends one line; older directories (``_manifest.json``) still
read and verify; a crash mid-append loses only its part; a manifest edited after sealing is refused; a served
directory's flushes (incremental summary and seal) give the summary and the seal a full reading gives."""

from __future__ import annotations

import json
import shutil
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from rehearsal_env.episodes import Recorder
from rehearsal_env.provenance import provenance_of
from rehearsal_env.records import (
    EPISODES_DIR,
    LEGACY_MANIFEST,
    MANIFEST,
    SEAL_FILE,
    RecordsDamaged,
    RunNotSealed,
    manifest_problems,
    manifest_state,
    read_part,
    read_records,
    seal_run,
    verify_run_dir,
    verify_seal,
    write_part,
)
from rehearsal_env.runner import RunConfig, run, summary_of
from rehearsal_env.worlds import World, register_world


@pytest.fixture(scope="module")
def finished(tiny_world: World, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished, sealed run of the tiny world, one part per episode."""
    register_world("tiny", lambda: tiny_world)
    out = tmp_path_factory.mktemp("manifest") / "run"
    run(RunConfig(world="tiny", agent="null", batch_size=1), out)
    return out


def _copy(run_dir: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(run_dir, tmp_path / "copy"))


def _as_older_release(run_dir: Path) -> dict[str, dict[str, object]]:
    """Rewrite the run as an older release left it: a version 1 ``_manifest.json`` and a seal listing the parts."""
    directory = run_dir / EPISODES_DIR
    state = manifest_state(directory)
    assert state is not None and state.version == 2
    (directory / LEGACY_MANIFEST).write_text(json.dumps({"version": 1, "parts": dict(sorted(state.parts.items()))}))
    (directory / MANIFEST).unlink()
    seal_run(run_dir)
    return state.parts


def test_each_part_appends_one_line_and_the_seal_signs_the_manifest_file(finished: Path) -> None:
    directory = finished / EPISODES_DIR
    lines = (directory / MANIFEST).read_bytes().splitlines()
    parts = sorted(p.name for p in directory.glob("part-*.parquet"))
    assert json.loads(lines[0]) == {"version": 2} and [json.loads(x)["part"] for x in lines[1:]] == parts
    payload = json.loads((finished / SEAL_FILE).read_text())["payload"]
    assert payload["format"] == "rehearsal-seal/2" and "parts" not in payload
    assert payload["manifest"]["bytes"] == (directory / MANIFEST).stat().st_size
    assert verify_seal(finished).episodes == len(read_records(finished))


def test_a_directory_of_an_older_release_reads_and_moves_to_the_new_manifest_when_written(
        finished: Path, tmp_path: Path) -> None:
    run_dir = _copy(finished, tmp_path)
    before = _as_older_release(run_dir)
    payload = json.loads((run_dir / SEAL_FILE).read_text())["payload"]
    assert payload["format"] == "rehearsal-seal/1" and payload["parts"] == dict(sorted(before.items()))
    assert read_records(run_dir) == read_records(finished) and verify_run_dir(run_dir) == []
    first = sorted((run_dir / EPISODES_DIR).glob("part-*.parquet"))[0]
    write_part(run_dir, read_part(first), 0)  # a resumed run writing into it: the same records again
    directory = run_dir / EPISODES_DIR
    assert not (directory / LEGACY_MANIFEST).exists()
    state = manifest_state(directory)
    assert state is not None and state.version == 2 and set(state.parts) == set(before)
    seal_run(run_dir)
    assert json.loads((run_dir / SEAL_FILE).read_text())["payload"]["format"] == "rehearsal-seal/2"
    assert read_records(run_dir) == read_records(finished)


def test_a_crash_mid_append_loses_only_its_part_and_the_next_append_cuts_it_off(
        finished: Path, tmp_path: Path) -> None:
    run_dir = _copy(finished, tmp_path)
    directory = run_dir / EPISODES_DIR
    first = sorted(directory.glob("part-*.parquet"))[0]
    (directory / "part-00099.parquet").write_bytes(first.read_bytes())
    with (directory / MANIFEST).open("ab") as fh:
        fh.write(b'{"bytes":1,"part":"part-00099.parq')  # the process died here
    problems = manifest_problems(directory)
    assert list(problems) == [directory / "part-00099.parquet"]
    assert "is not in the manifest" in problems[directory / "part-00099.parquet"]
    write_part(run_dir, read_part(first), 100)
    assert (directory / MANIFEST).read_bytes().count(b"part-00099") == 0
    (directory / "part-00099.parquet").unlink()
    assert manifest_problems(directory) == {}


def test_a_manifest_edited_after_sealing_is_refused(finished: Path, tmp_path: Path) -> None:
    run_dir = _copy(finished, tmp_path)
    path = run_dir / EPISODES_DIR / MANIFEST
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join([lines[0], *lines[2:], lines[1]]))  # the same entries in another order
    with pytest.raises(RunNotSealed, match="differs from the manifest the run sealed"):
        verify_seal(run_dir)


def test_a_manifest_that_is_not_one_is_refused_naming_what_was_expected(finished: Path, tmp_path: Path) -> None:
    run_dir = _copy(finished, tmp_path)
    (run_dir / EPISODES_DIR / MANIFEST).write_text('{"version": 9}\n')
    with pytest.raises(RecordsDamaged, match='expected the first line {"version": 2}'):
        read_records(run_dir)


def test_served_flushes_sum_and_seal_what_a_full_reading_does(finished: Path, tmp_path: Path,
                                                              tiny_world: World) -> None:
    """Two recorders (two server processes) share a directory; each flush's summary counts both one's parts."""
    template = read_records(finished)[0]
    first = Recorder(tmp_path / "serve", backend="sqlite", stress=False, flush_every=10**9)
    second = Recorder(tmp_path / "serve", backend="sqlite", stress=False, flush_every=10**9)
    rd = first.run_dir("tiny", provenance_of(tiny_world, None))
    rd2 = second.run_dir("tiny", provenance_of(tiny_world, None))
    assert rd2.path == rd.path
    outcomes = ["verified", "not_achieved", "rule_violated"]
    for n in range(7):
        recorder, where = (first, rd) if n % 3 else (second, rd2)
        for k in range(n % 3 + 1):
            recorder.add(where, replace(template, run_id=rd.run_id, episode_id=uuid.uuid4().hex,
                                        outcome=outcomes[k], reward=float(k)))
        recorder.flush()
        summary = json.loads((rd.path / "summary.json").read_text())
        records = read_records(rd.path)
        assert {k: v for k, v in summary.items() if k != "config"} == summary_of(records)
        assert verify_seal(rd.path).episodes == len(records)
