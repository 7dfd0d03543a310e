"""Seals: a run directory signed by whoever ran the evaluation, checked by every reader.

When a run finishes (``rehearsal run``, and after each part ``rehearsal serve`` writes),
:func:`seal_run` signs, with the evaluator's Ed25519 key (:mod:`._signing`), one canonical
JSON document, ``RUN_DIR/seal.json``'s ``payload``:

- the run id, the world and the world version (from ``provenance.json``) and the episode count;
- the id of the key that seals (``key_id``) and the time it sealed (``sealed_at``, ISO, UTC), taken
  before the key is read, so a seal made while the key is rotated is never dated after its key's retirement;
- the manifest of ``episodes.parquet/``: the SHA-256 and length of its append-only file
  (``_manifest.jsonl``, format ``rehearsal-seal/2``), whose lines give the SHA-256, bytes and rows of every
  part; a directory of an older release (``_manifest.json``) is sealed as before, its parts listed in the
  payload (``rehearsal-seal/1``), and both formats verify;
- the SHA-256 of the run's plan and stamps: ``run.json`` (or ``serve.json`` for a served run),
  ``provenance.json``, ``summary.json`` and ``sequential.json`` (the marker of a run that
  ``rehearsal compare`` stopped sequentially), or null for each one the run did not have.

:func:`verify_seal` refuses a run that has no seal, a seal whose signature does not match its
payload, a seal made with a key the reader does not trust or distrusts (entirely, or from a time at
or before the seal's ``sealed_at``; see :mod:`._signing`), and a run whose manifest or stamped
files differ from what was sealed (a part rewritten with its manifest entry recomputed, a part
grafted in from another run, a part removed, the plan or the world version edited). Together
with the manifest's own check of the files (:func:`._manifest.manifest_problems`), a reader
knows the records are the ones the key's holder sealed. What a seal cannot say is that the
key's holder ran the evaluation honestly: see ``docs/records-and-seals.md``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from .._atomic import write_atomic
from ._manifest import EPISODES_DIR, RecordsDamaged, check_one_run, read_manifest, verify_directory
from ._manifest_log import MANIFEST, ManifestState, manifest_state, manifest_state_since, parts_of
from ._seal_since import checked_since
from ._signing import (
    PublicKey,
    SigningKeyError,
    key_id,
    now,
    parse_time,
    public_text,
    show_time,
    signing_key_for_run,
)
from ._trust import trusted_keys

SEAL_FILE = "seal.json"
"""The seal's file name in a run directory."""
SEAL_FORMAT = "rehearsal-seal/2"
"""The format of the seals this release writes (the manifest sealed by its file's SHA-256)."""
LEGACY_SEAL_FORMAT = "rehearsal-seal/1"
"""The format of older releases' seals, and of a directory with a version 1 manifest (its parts listed)."""
SEALED_FILES = ("run.json", "serve.json", "provenance.json", "summary.json", "sequential.json")
"""The run directory's files a seal covers besides the records (null in the seal when absent)."""
RESEAL = ("rerun the evaluation (or `rehearsal run --resume RUN_DIR`, which seals what it finishes) "
          "with a key the reader trusts")
TAMPERED = ("the records are not the ones the run sealed: do not use them; rerun the evaluation, or get "
            "the sealed copy from whoever ran it")


class RunNotSealed(RecordsDamaged):
    """A run without a valid, trusted seal, or whose records differ from what was sealed."""


@dataclass(frozen=True)
class Seal:
    """A verified seal: who sealed which run."""

    key: PublicKey
    """The public key that made it (trusted by the reader)."""
    run_id: str | None
    """The run id on every record (None for a run without records)."""
    world: str | None
    """The world named by ``provenance.json``."""
    world_version: str | None
    """The world version named by ``provenance.json``."""
    episodes: int
    """Records in the sealed parts."""
    sealed_at: datetime | None = None
    """When the seal says it was made (UTC; written by the key's holder); None for a seal of a release
    that did not record it."""


def _canonical(payload: Mapping[str, Any]) -> bytes:
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def _file_hashes(run: Path) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in SEALED_FILES:
        try:
            out[name] = hashlib.sha256((run / name).read_bytes()).hexdigest()
        except FileNotFoundError:
            out[name] = None
    return out


def _provenance(run: Path) -> dict[str, Any]:
    try:
        blob = json.loads((run / "provenance.json").read_text())
    except (OSError, ValueError):
        return {}
    return blob if isinstance(blob, dict) else {}


def seal_run(run_dir: str | Path, key: Ed25519PrivateKey | None = None, *, incremental: bool = False) -> Seal:
    """Sign the run in ``run_dir`` (its manifest, plan, provenance and summary) and write ``seal.json``.

    ``key`` defaults to the state home's signing key, created on first use (see :mod:`._signing`).
    ``incremental``: for a writer that seals the same directory again and again (``rehearsal serve``, after
    every part): only what this process has not checked before is checked (:mod:`._seal_since`), so a seal
    costs the same at 10 parts as at 10,000.

    Raises:
        RecordsDamaged: the records do not match their manifest (a damaged run is never sealed).
    """
    run = Path(run_dir)
    directory = run / EPISODES_DIR
    if incremental:
        state, run_id = checked_since(directory, manifest_state_since)
    else:
        verify_directory(directory)
        state = manifest_state(directory) or ManifestState({}, 2)
        run_id = check_one_run([directory / name for name in sorted(state.parts)])
    sealed_at = now()  # before the key is read (see the module docstring)
    signer = key or signing_key_for_run()
    prov = _provenance(run)
    public = public_text(signer.public_key())
    listed: dict[str, Any] = {"parts": dict(sorted(state.parts.items()))} if state.sha256 is None else \
        {"manifest": {"sha256": state.sha256, "bytes": state.length}}
    form = LEGACY_SEAL_FORMAT if state.sha256 is None else SEAL_FORMAT
    payload: dict[str, Any] = {"format": form, "run_id": run_id, "world": prov.get("world"),
               "world_version": prov.get("world_version"),
               "episodes": sum(int(e["rows"]) for e in state.parts.values()),
               **listed, "files": _file_hashes(run), "key_id": key_id(public),
               "sealed_at": sealed_at.isoformat()}
    body = {"format": form, "key": public,
            "signature": base64.b64encode(signer.sign(_canonical(payload))).decode(), "payload": payload}
    write_atomic(run / SEAL_FILE, json.dumps(body, indent=1, sort_keys=True) + "\n")
    return Seal(PublicKey(public), run_id, payload["world"], payload["world_version"], payload["episodes"],
                sealed_at)


def _sealed_parts(run: Path, payload: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """The parts the seal covers, or None and why they cannot be known (the manifest changed in place)."""
    if "parts" in payload:
        return dict(payload["parts"]), None
    sealed = payload["manifest"]
    path = run / EPISODES_DIR / MANIFEST
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None, "was sealed with the run and is gone (deleted after sealing)"
    prefix = data[:int(sealed["bytes"])]
    if len(prefix) != int(sealed["bytes"]) or hashlib.sha256(prefix).hexdigest() != sealed["sha256"]:
        return None, ("differs from the manifest the run sealed in lines written before the seal (edited after "
                      "sealing; a manifest is only ever appended to)")
    return parts_of(prefix), None


def unseal(run_dir: str | Path) -> None:
    """Remove a run's seal (a run that writes again is unsealed until it finishes)."""
    (Path(run_dir) / SEAL_FILE).unlink(missing_ok=True)


def _findings(run: Path, trusted: Mapping[str, PublicKey]) -> Iterator[tuple[Path, str, str]]:
    """(file, problem, remedy) for what is wrong with the seal; the first one stops the checks that depend on it."""
    path = run / SEAL_FILE
    try:
        body = json.loads(path.read_text())
    except FileNotFoundError:
        yield (run, f"the run is not sealed (no {SEAL_FILE}): nothing says who wrote these records (a run "
                    "stopped before its end, written by another program, or its seal was deleted)", RESEAL)
        return
    except (OSError, ValueError) as exc:
        yield path, f"the seal cannot be read ({type(exc).__name__})", TAMPERED
        return
    payload = body.get("payload") if isinstance(body, dict) else None
    if not isinstance(body, dict) or not isinstance(payload, dict) or not _well_formed(body.get("format"), payload):
        yield path, f"expected a seal of format {SEAL_FORMAT} (or {LEGACY_SEAL_FORMAT}); the file is not one", TAMPERED
        return
    try:
        key = PublicKey(str(body.get("key")))
        key.key().verify(base64.b64decode(str(body.get("signature")), validate=True), _canonical(payload))
    except (SigningKeyError, InvalidSignature, binascii.Error, ValueError):
        yield path, "the seal's signature does not match its contents (the seal was edited after signing)", TAMPERED
        return
    if key.id not in trusted:
        yield (path, f"sealed by key {key.id} ({key.text}), which is not trusted here",
               f"if you trust whoever holds it, `rehearsal keys trust {key.text}` (or pass --trust to this "
               "command); otherwise rerun the evaluation yourself")
        return
    sealed_at = _sealed_at(payload)
    known = trusted[key.id]
    if known.distrusts(sealed_at):
        since = "entirely" if known.entirely_distrusted else f"since {show_time(known.distrusted_from)}"
        when = "" if known.entirely_distrusted else \
            f"; the seal says it was made {show_time(sealed_at) if sealed_at else 'at no recorded time'}"
        yield (path, f"sealed by key {key.id} which this home distrusts {since}: "
                     f"{known.reason or 'no reason recorded'}{when}",
               "rerun the evaluation, sealed with a key this home trusts (`rehearsal keys signing list` shows "
               "each key and its state)")
        return
    directory = run / EPISODES_DIR
    manifest = read_manifest(directory) or {}
    sealed, why = _sealed_parts(run, payload)
    if sealed is None:
        yield directory / MANIFEST, str(why), TAMPERED
        return
    for name in sorted(set(sealed) | set(manifest)):
        where = directory / name
        if name not in manifest:
            yield where, "was sealed with the run but is no longer in its manifest (removed after sealing)", TAMPERED
        elif name not in sealed:
            yield (where, "is not among the parts the run sealed (added after sealing: grafted from another run, "
                          "or written by another program)", TAMPERED)
        elif manifest[name] != sealed[name]:
            yield (where, "differs from the part the run sealed (its bytes were changed after sealing, and the "
                          "manifest rewritten to match)", TAMPERED)
    now = _file_hashes(run)
    for name, digest in sorted(payload["files"].items()):
        if now.get(name) != digest:
            state = "is missing" if now.get(name) is None else "was added" if digest is None else "was changed"
            yield run / name, f"{state} after the run was sealed", TAMPERED


def _well_formed(form: Any, payload: Mapping[str, Any]) -> bool:
    if not isinstance(payload.get("files"), dict):
        return False
    if form == LEGACY_SEAL_FORMAT:
        return isinstance(payload.get("parts"), dict)
    listed = payload.get("manifest")
    return form == SEAL_FORMAT and isinstance(listed, dict) and isinstance(listed.get("sha256"), str) \
        and isinstance(listed.get("bytes"), int) and listed["bytes"] >= 0


def _sealed_at(payload: Mapping[str, Any]) -> datetime | None:
    """The seal's recorded sealing time; None when absent or not a date-time (the seal is signed, so only the
    key's holder wrote it: a key distrusted from a date refuses such a seal)."""
    try:
        return parse_time(payload["sealed_at"]) if isinstance(payload.get("sealed_at"), str) else None
    except SigningKeyError:
        return None


def seal_problems(run_dir: str | Path, trusted: Mapping[str, PublicKey] | None = None) -> list[str]:
    """What is wrong with a run's seal, one line each (empty: sealed by a trusted key, and unchanged since)."""
    found = _findings(Path(run_dir), trusted_keys() if trusted is None else trusted)
    return [f"{path}: {problem}" for path, problem, _ in found]


def verify_seal(run_dir: str | Path, trusted: Mapping[str, PublicKey] | None = None) -> Seal:
    """The run's seal, checked against ``trusted`` (default: :func:`._signing.trusted_keys`).

    Raises:
        RunNotSealed: the first problem (see the module docstring), naming the file and what to do.
    """
    run = Path(run_dir)
    keys = trusted_keys() if trusted is None else trusted
    for path, problem, remedy in _findings(run, keys):
        raise RunNotSealed(path, problem, remedy)
    body = json.loads((run / SEAL_FILE).read_text())
    payload = body["payload"]
    return Seal(keys[PublicKey(body["key"]).id], payload.get("run_id"), payload.get("world"),
                payload.get("world_version"), int(payload.get("episodes") or 0), _sealed_at(payload))
