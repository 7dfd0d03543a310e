"""Sealed runs: a tampered, truncated, grafted or unsealed run is refused by every reader, naming the problem.

Each probe changes a copy of a finished (sealed) run the way the issue's outside probe did; each reader
(``records.read_records``, measure's ``load_run``, ``rehearsal eval verify``, ``rehearsal eval rescore``,
readiness and the improvement step's reader) must refuse it, or for readiness say "Needs work", with
the problem named.
"""

from __future__ import annotations

import base64
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
    PublicKey,
    SigningKeyError,
    create_signing_key,
    load_signing_key,
    parse_time,
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


# --- rotation and distrust (issue 32): a key that may have leaked is replaced, and readers refuse its seals ---


def _resealed(source: Path, target: Path, key: Ed25519PrivateKey | None = None) -> Path:
    """A copy of ``source`` sealed again, with ``key`` (default: the home's signing key)."""
    shutil.copytree(source, target)
    seal_run(target, key)
    return target


def _stolen_key(home_dir: Path, where: Path) -> Ed25519PrivateKey:
    """A copy of the home's current signing key taken off the machine (what a thief keeps after a rotation)."""
    shutil.copy(home_dir / "signing_key.pem", where)
    os.chmod(where, 0o600)
    key = load_signing_key(where)
    assert key is not None
    return key


def _verify(run_dir: Path, capsys: pytest.CaptureFixture[str], *trust: str) -> tuple[int, list[str]]:
    capsys.readouterr()
    code = main(["eval", "verify", str(run_dir), *(arg for key in trust for arg in ("--trust", key))])
    return code, capsys.readouterr().out.splitlines()


@pytest.fixture
def rotating_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Path:
    """A fresh state home with a signing key made by `rehearsal keys signing create`."""
    home_dir = tmp_path / "home"
    monkeypatch.setenv("REHEARSAL_HOME", str(home_dir))
    assert main(["keys", "signing", "create"]) == 0
    capsys.readouterr()
    return home_dir


def test_rotate_seals_with_a_new_key_and_refuses_the_old_keys_later_seals(
        sealed: tuple[Path, Path], rotating_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = _resealed(sealed[0], tmp_path / "before")  # sealed by the old key before the rotation
    old = _stolen_key(rotating_home, tmp_path / "stolen.pem")
    old_id = verify_seal(before).key.id
    assert json.loads((before / SEAL_FILE).read_text())["payload"]["key_id"] == old_id  # the run names its key

    assert main(["keys", "signing", "rotate", "--reason", "the laptop   that held it was lost"]) == 0
    out, err = capsys.readouterr()
    new_text = out.strip()
    assert new_text.startswith("ed25519:") and new_text != public_text(old.public_key())
    assert f"the old key {old_id} is kept in the trusted keys, distrusted since" in err
    assert f"`rehearsal keys distrust {old_id} --since 20" in err  # what readers elsewhere run
    assert stat.S_IMODE(signing_key_path().stat().st_mode) == 0o600
    signing = load_signing_key()
    assert signing is not None and public_text(signing.public_key()) == new_text

    after_rotation = _resealed(sealed[0], tmp_path / "new")  # the home's new key
    assert verify_seal(after_rotation).key.text == new_text
    code, lines = _verify(after_rotation, capsys)
    assert code == 0 and f"sealed by trusted key {verify_seal(after_rotation).key.id}" in lines[0]
    assert _verify(before, capsys)[0] == 0  # sealed before the rotation: still trusted

    forged = _resealed(sealed[0], tmp_path / "forged", old)  # the old key, used after the rotation
    since = trusted_keys()[old_id].distrusted_from
    assert since is not None
    code, lines = _verify(forged, capsys)
    expected = (f"{forged / SEAL_FILE}: sealed by key {old_id} which this home distrusts since "
                f"{since.isoformat()}: the laptop that held it was lost; the seal says it was made 20")
    assert code == 1 and lines[0].startswith(expected), lines
    assert len(lines) == 2 and "1 problem(s)" in lines[1]
    assert _verify(forged, capsys, public_text(old.public_key()))[0] == 1  # --trust does not lift a distrust
    with pytest.raises(ValueError, match=f"sealed by key {old_id} which this home distrusts since"):
        read_records(forged)
    with pytest.raises(RunError, match="the laptop that held it was lost"):
        load_run(forged)
    (verdict,) = assess_runs([forged])
    assert verdict.label == NEEDS_WORK and "which this home distrusts since" in verdict.reasons[0]


def test_distrust_old_all_refuses_even_the_runs_sealed_before(
        sealed: tuple[Path, Path], rotating_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = _resealed(sealed[0], tmp_path / "before")
    old_id = verify_seal(before).key.id
    assert main(["keys", "signing", "rotate", "--distrust-old", "all", "--reason", "the key was posted online"]) == 0
    assert "distrusted entirely: the key was posted online" in capsys.readouterr().err
    code, lines = _verify(before, capsys)
    assert code == 1
    assert lines[0] == f"{before / SEAL_FILE}: sealed by key {old_id} which this home distrusts entirely: the key " \
                       "was posted online"
    assert _verify(_resealed(sealed[0], tmp_path / "new"), capsys)[0] == 0


@pytest.mark.parametrize(("distrust_old", "accepted"), [
    ("never", True), ("2999-01-01", True), ("2000-01-01T00:00:00+02:00", False), ("now", False), ("all", False)])
def test_what_distrust_old_decides_for_a_seal_the_old_key_makes_after_the_rotation(
        distrust_old: str, accepted: bool, sealed: tuple[Path, Path], rotating_home: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    old = _stolen_key(rotating_home, tmp_path / "stolen.pem")
    assert main(["keys", "signing", "rotate", "--distrust-old", distrust_old]) == 0
    code, lines = _verify(_resealed(sealed[0], tmp_path / "late", old), capsys)
    assert (code == 0) is accepted, lines
    assert accepted or ("which this home distrusts" in lines[0] and len(lines) == 2)
    assert main(["keys", "signing", "list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    old_line = next(line for line in listed if line.startswith(key_id_of(old)))
    assert ("  trusted  " in old_line) is (distrust_old == "never"), old_line
    if distrust_old == "2000-01-01T00:00:00+02:00":
        assert "distrusted since 1999-12-31T22:00:00+00:00: no reason given" in old_line


def key_id_of(key: Ed25519PrivateKey) -> str:
    return PublicKey(public_text(key.public_key())).id


def test_a_seal_that_records_no_time_is_refused_by_a_dated_distrust(
        sealed: tuple[Path, Path], rotating_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A seal of an older release has no ``sealed_at``: it verifies while its key is trusted, and cannot show it
    was made before a distrust date (a thief could also drop the field)."""
    old = _stolen_key(rotating_home, tmp_path / "stolen.pem")
    legacy = _resealed(sealed[0], tmp_path / "legacy")
    body = json.loads((legacy / SEAL_FILE).read_text())
    for field in ("sealed_at", "key_id"):
        del body["payload"][field]
    canonical = json.dumps(body["payload"], sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()
    body["signature"] = base64.b64encode(old.sign(canonical)).decode()
    (legacy / SEAL_FILE).write_text(json.dumps(body))
    assert _verify(legacy, capsys)[0] == 0 and verify_seal(legacy).sealed_at is None
    assert main(["keys", "signing", "rotate", "--distrust-old", "2999-01-01", "--reason", "retired"]) == 0
    code, lines = _verify(legacy, capsys)
    assert code == 1 and lines[0].endswith("distrusts since 2999-01-01T00:00:00+00:00: retired; the seal says it "
                                           "was made at no recorded time"), lines


def test_a_reader_distrusts_a_key_it_trusted_and_an_old_trusted_keys_file_still_loads(
        sealed: tuple[Path, Path], rotating_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    theirs = Ed25519PrivateKey.generate()
    text = public_text(theirs.public_key())
    ident = key_id_of(theirs)
    # the format before rotation existed: only the key and its label
    (rotating_home / "trusted_keys.json").write_text(json.dumps({ident: {"key": text, "name": "lab B"}}))
    run_dir = _resealed(sealed[0], tmp_path / "theirs", theirs)
    assert trusted_keys()[ident] == PublicKey(text, "lab B")
    assert _verify(run_dir, capsys)[0] == 0

    assert main(["keys", "distrust", ident, "--since", "all", "--reason", "lab B lost its key"]) == 0
    assert capsys.readouterr().out.strip() == f"key {ident} is distrusted entirely: lab B lost its key"
    entry = json.loads((rotating_home / "trusted_keys.json").read_text())[ident]
    assert entry["key"] == text and entry["name"] == "lab B" and entry["created"] is None and entry["added"]
    assert entry["distrusted_from"] == "0001-01-01T00:00:00+00:00" and entry["reason"] == "lab B lost its key"
    code, lines = _verify(run_dir, capsys)
    assert code == 1 and "distrusts entirely: lab B lost its key" in lines[0]
    assert main(["keys", "trust", text]) == 2  # trusting again is explicit
    assert "--since never" in capsys.readouterr().err
    assert main(["keys", "distrust", ident, "--since", "never"]) == 0
    assert _verify(run_dir, capsys)[0] == 0
    assert main(["keys", "distrust", "0123456789abcdef"]) == 2
    own = verify_seal(_resealed(sealed[0], tmp_path / "own")).key.id
    assert main(["keys", "distrust", own]) == 2
    assert "signing rotate" in capsys.readouterr().err


def test_the_signing_key_is_written_0600_whatever_the_umask(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("REHEARSAL_HOME", str(tmp_path / "home"))
    umask = os.umask(0)
    try:
        assert main(["keys", "signing", "create"]) == 0
        assert stat.S_IMODE(signing_key_path().stat().st_mode) == 0o600
        assert main(["keys", "signing", "rotate"]) == 0
        assert stat.S_IMODE(signing_key_path().stat().st_mode) == 0o600
        create_signing_key(tmp_path / "direct.pem")
        assert stat.S_IMODE((tmp_path / "direct.pem").stat().st_mode) == 0o600
    finally:
        os.umask(umask)
    assert not [p.name for p in (tmp_path / "home").iterdir() if p.name.endswith((".tmp", ".pem.old"))]


def test_keys_signing_list_and_rotation_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("REHEARSAL_HOME", str(tmp_path / "home"))
    assert main(["keys", "signing", "rotate"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no signing key" in err and "keys signing create" in err
    assert main(["keys", "signing", "create"]) == 0
    first = capsys.readouterr().out.strip()
    assert main(["keys", "signing", "rotate", "--distrust-old", "last tuesday"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "expected now, all, never, or an ISO date" in err and "'last tuesday'" in err
    assert main(["keys", "signing", "rotate", "--reason", "routine"]) == 0
    second = capsys.readouterr().out.strip()
    assert main(["keys", "signing", "rotate", "--distrust-old", "never"]) == 0
    third = capsys.readouterr().out.strip()
    assert main(["keys", "signing", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    ids = [PublicKey(text).id for text in (first, second, third)]
    assert [line.split()[0] for line in lines] == [ids[2], ids[0], ids[1]]  # the signing key first
    assert lines[0].split()[2:4] == ["signing", "trusted"]
    assert "distrusted since" in lines[1] and lines[1].split(": ", 1)[1].startswith("routine")
    assert lines[2].split()[2:4] == ["-", "trusted"]  # rotated with --distrust-old never
    created = [line.split()[1] for line in lines]
    assert all(parse_time(c) for c in created)
