"""Sealed runs: a tampered, truncated, grafted or unsealed run is refused by every reader, naming the problem.

Each probe changes a copy of a finished (sealed) run the way the issue's outside probe did; each reader
(``records.read_records``, measure's ``load_run``, ``rehearsal eval verify``, ``rehearsal eval rescore``,
readiness and the improvement step's reader) must refuse it, or for readiness say "Needs work", with
the problem named.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from rehearsal_env.cli import main
from rehearsal_env.improve import LearningRecords
from rehearsal_env.measure import RunError, load_run
from rehearsal_env.readiness import NEEDS_WORK, assess_runs
from rehearsal_env.records import (
    EPISODES_DIR,
    MANIFEST,
    SEAL_FILE,
    SigningKeyError,
    create_signing_key,
    load_signing_key,
    public_text,
    read_part,
    read_records,
    seal_run,
    signing_key_path,
    trusted_keys,
    verify_run_dir,
    verify_seal,
    write_part,
    write_part_bytes,
)
from rehearsal_env.rescore import rescore_run
from rehearsal_env.runner import RunConfig, run
from rehearsal_env.worlds import World, register_world


@pytest.fixture(scope="module")
def sealed(tiny_world: World, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two finished runs of the tiny world, one part per episode: the run probed, and another run."""
    register_world("tiny", lambda: tiny_world)
    base = tmp_path_factory.mktemp("seals")
    run(RunConfig(world="tiny", agent="null", batch_size=1), base / "run")
    run(RunConfig(world="tiny", agent="null", batch_size=1, repeats=2), base / "other")
    return base / "run", base / "other"


def _parts(run_dir: Path) -> list[Path]:
    return sorted((run_dir / EPISODES_DIR).glob("part-*.parquet"))


def tampered(run_dir: Path, other: Path) -> None:
    """Outcomes rewritten to verified, the part and its manifest entry written again (SHA-256 recomputed)."""
    part = _parts(run_dir)[0]
    write_part(run_dir, [replace(r, outcome="verified", reward=1.0) for r in read_part(part)], 0)


def truncated(run_dir: Path, other: Path) -> None:
    part = _parts(run_dir)[1]
    part.write_bytes(part.read_bytes()[:-200])


def grafted(run_dir: Path, other: Path) -> None:
    """Another run's part put in place of one of this run's, the manifest updated to match."""
    write_part_bytes(run_dir, _parts(other)[0].read_bytes(), 0)


def grafted_as_ours(run_dir: Path, other: Path) -> None:
    """Another run's episodes, their run id rewritten to this run's, written as a new part."""
    ours = read_part(_parts(run_dir)[0])[0].run_id
    write_part(run_dir, [replace(r, run_id=ours) for r in read_part(_parts(other)[3])], 7)


def unsealed(run_dir: Path, other: Path) -> None:
    (run_dir / SEAL_FILE).unlink()


def manifest_deleted(run_dir: Path, other: Path) -> None:
    (run_dir / EPISODES_DIR / MANIFEST).unlink()


def part_deleted(run_dir: Path, other: Path) -> None:
    _parts(run_dir)[2].unlink()


def stray_file(run_dir: Path, other: Path) -> None:
    shutil.copy(_parts(other)[0], run_dir / EPISODES_DIR / "extra.parquet")


def untrusted_key(run_dir: Path, other: Path) -> None:
    seal_run(run_dir, Ed25519PrivateKey.generate())


def seal_edited(run_dir: Path, other: Path) -> None:
    body = json.loads((run_dir / SEAL_FILE).read_text())
    body["payload"]["episodes"] += 1
    (run_dir / SEAL_FILE).write_text(json.dumps(body))


def provenance_edited(run_dir: Path, other: Path) -> None:
    blob = json.loads((run_dir / "provenance.json").read_text())
    (run_dir / "provenance.json").write_text(json.dumps({**blob, "world_version": "wv_0000000000000000"}))


def plan_deleted(run_dir: Path, other: Path) -> None:
    (run_dir / "run.json").unlink()


PROBES: dict[str, tuple[Callable[[Path, Path], None], str]] = {
    "tampered": (tampered, "part-00000.parquet: differs from the part the run sealed"),
    "truncated": (truncated, "part-00001.parquet: has \\d+ bytes, the manifest says \\d+ \\(truncated"),
    "grafted": (grafted, "holds records of 2 runs"),
    "grafted, run id rewritten": (grafted_as_ours, "part-00007.parquet: is not among the parts the run sealed"),
    "unsealed": (unsealed, "the run is not sealed \\(no seal.json\\)"),
    "manifest deleted": (manifest_deleted, "the run has no manifest"),
    "part deleted": (part_deleted, "part-00002.parquet: is listed in the manifest but missing from disk"),
    "file not in the manifest": (stray_file, "extra.parquet: is not in the manifest"),
    "untrusted key": (untrusted_key, "sealed by key [0-9a-f]{16} \\(ed25519:.*\\), which is not trusted here"),
    "seal edited": (seal_edited, "the seal's signature does not match its contents"),
    "provenance edited": (provenance_edited, "provenance.json: was changed after the run was sealed"),
    "plan deleted": (plan_deleted, "run.json: is missing after the run was sealed"),
}


@pytest.fixture(params=sorted(PROBES))
def probed(request: pytest.FixtureRequest, sealed: tuple[Path, Path], tmp_path: Path) -> tuple[Path, str]:
    change, problem = PROBES[request.param]
    copy = tmp_path / "run"
    shutil.copytree(sealed[0], copy)
    change(copy, sealed[1])
    return copy, problem


def test_the_intact_run_is_read_by_every_reader(sealed: tuple[Path, Path], tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = sealed[0]
    assert len(read_records(run_dir)) == 3 and load_run(run_dir)
    assert verify_run_dir(run_dir) == [] and verify_seal(run_dir).episodes == 3
    assert main(["eval", "verify", str(run_dir)]) == 0
    assert "sealed by trusted key" in capsys.readouterr().out
    assert rescore_run(run_dir, "outcome", tmp_path / "rescored").ok
    (verdict,) = assess_runs([run_dir])
    assert not any("cannot be trusted" in reason for reason in verdict.reasons)


def test_read_records_refuses(probed: tuple[Path, str]) -> None:
    run_dir, problem = probed
    with pytest.raises(ValueError, match=problem):
        read_records(run_dir)


def test_measure_refuses(probed: tuple[Path, str]) -> None:
    run_dir, problem = probed
    with pytest.raises(RunError, match=problem):
        load_run(run_dir)


def test_eval_verify_refuses(probed: tuple[Path, str], capsys: pytest.CaptureFixture[str]) -> None:
    run_dir, problem = probed
    assert main(["eval", "verify", str(run_dir)]) == 1
    out = capsys.readouterr().out
    assert any(__import__("re").search(problem, line) for line in out.splitlines()), out
    assert "these records cannot be trusted" in out


def test_rescore_refuses_in_one_line(probed: tuple[Path, str], tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    run_dir, problem = probed
    with pytest.raises(ValueError, match=problem):
        rescore_run(run_dir, "outcome", tmp_path / "out")
    assert main(["eval", "rescore", str(run_dir), "--reward-profile", "outcome", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("rehearsal: error: ") and __import__("re").search(problem, err)


def test_readiness_says_needs_work_and_why(probed: tuple[Path, str]) -> None:
    run_dir, problem = probed
    verdicts = assess_runs([run_dir])
    assert verdicts and all(v.label == NEEDS_WORK for v in verdicts)
    assert all(__import__("re").search(f"cannot be trusted: .*{problem}", v.reasons[0]) for v in verdicts)


def test_the_improvement_step_refuses(probed: tuple[Path, str]) -> None:
    run_dir, problem = probed
    with pytest.raises(ValueError, match=problem):
        LearningRecords().count(run_dir)


def test_a_run_sealed_by_another_evaluator_is_read_once_its_key_is_trusted(
        sealed: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    theirs = Ed25519PrivateKey.generate()
    copy = tmp_path / "theirs"
    shutil.copytree(sealed[0], copy)
    seal_run(copy, theirs)
    key = public_text(theirs.public_key())
    assert main(["eval", "verify", str(copy)]) == 1
    assert main(["eval", "verify", str(copy), "--trust", key]) == 0
    assert len(read_records(copy, trusted_keys([key]))) == 3
    assert load_run(copy, trusted=trusted_keys([key]))


def test_keys_cli_makes_shows_and_trusts_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("REHEARSAL_HOME", str(tmp_path / "home"))
    assert main(["keys", "signing", "show"]) == 2
    assert "no signing key" in capsys.readouterr().err
    assert main(["keys", "signing", "create"]) == 0
    public = capsys.readouterr().out.strip()
    assert public.startswith("ed25519:") and stat.S_IMODE(signing_key_path().stat().st_mode) == 0o600
    assert main(["keys", "signing", "create"]) == 2  # never replaced: runs sealed with it would stop verifying
    assert main(["keys", "signing", "show"]) == 0 and capsys.readouterr().out.strip() == public
    other = public_text(Ed25519PrivateKey.generate().public_key())
    assert main(["keys", "trust", other, "--name", "lab B"]) == 0
    assert main(["keys", "trusted"]) == 0
    listed = capsys.readouterr().out
    assert public in listed and other in listed and "lab B" in listed
    ident = trusted_keys()[next(i for i, k in trusted_keys().items() if k.text == other)].id
    assert main(["keys", "untrust", ident]) == 0 and other not in {k.text for k in trusted_keys().values()}
    assert main(["keys", "trust", "ed25519:bm90IGEga2V5"]) == 2
    assert "has 9" in capsys.readouterr().err


def test_the_first_run_creates_the_signing_key_and_says_so(tiny_world: World, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("REHEARSAL_HOME", str(tmp_path / "home"))
    register_world("tiny", lambda: tiny_world)
    run(RunConfig(world="tiny", agent="null", scenarios=("pay-ann",)), tmp_path / "run")
    err = capsys.readouterr().err
    assert "created the signing key" in err and "mode 0600" in err
    key = load_signing_key()
    assert key is not None and verify_seal(tmp_path / "run").key.text == public_text(key.public_key())
    run(RunConfig(world="tiny", agent="null", scenarios=("pay-ann",)), tmp_path / "again")
    assert "created the signing key" not in capsys.readouterr().err  # made once, then used


def test_a_signing_key_readable_by_others_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "signing_key.pem"
    create_signing_key(path)
    os.chmod(path, 0o644)
    with pytest.raises(SigningKeyError, match="readable by others .*chmod 600"):
        load_signing_key(path)
    path.write_text("not a key")
    os.chmod(path, 0o600)
    with pytest.raises(SigningKeyError, match="not one"):
        load_signing_key(path)


def test_a_damaged_run_is_never_sealed(sealed: tuple[Path, Path], tmp_path: Path) -> None:
    copy = tmp_path / "run"
    shutil.copytree(sealed[0], copy)
    truncated(copy, sealed[1])
    with pytest.raises(ValueError, match="truncated"):
        seal_run(copy)


def test_a_part_changed_after_it_was_checked_is_checked_again(sealed: tuple[Path, Path], tmp_path: Path) -> None:
    """Checked parts are remembered by path, size, times and inode (so a server's seal reads only its new part);
    a byte flipped in place, with the old size and modification time put back, is still found."""
    copy = tmp_path / "run"
    shutil.copytree(sealed[0], copy)
    assert read_records(copy)  # every part checked, and remembered
    part = _parts(copy)[0]
    before = part.stat()
    data = bytearray(part.read_bytes())
    data[len(data) // 2] ^= 0xFF
    with part.open("r+b") as fh:  # in place: the same inode
        fh.write(data)
    os.utime(part, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (part.stat().st_size, part.stat().st_mtime_ns, part.stat().st_ino) == \
        (before.st_size, before.st_mtime_ns, before.st_ino)
    with pytest.raises(ValueError, match="does not match its SHA-256"):
        read_records(copy)
    with pytest.raises(ValueError, match="does not match its SHA-256"):
        seal_run(copy)
