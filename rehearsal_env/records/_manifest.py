"""The manifest of a run's parts, and the checks every reader makes before it trusts them.

``episodes.parquet/_manifest.jsonl`` lists each part written (its SHA-256, bytes and
rows), one line appended as each part is written (under a file lock, so the writer threads
of a Ray run do not lose each other's entries; the file's format, and the version 1
``_manifest.json`` of older releases that still reads, are :mod:`._manifest_log`'s). The
leading ``_`` keeps the file out of ``pyarrow.dataset`` and of ``*.parquet`` globs.

Before reading, :func:`manifest_problems` compares the manifest with the files in
both directions: a part the manifest lists that is missing from disk, a file in the
directory the manifest does not list, a part truncated, with bytes flipped, with
another row count, or not Parquet at all; a directory without a manifest is refused
(every run this release writes has one). :func:`verify_parts` raises
:class:`RecordsDamaged` for the first problem, naming the file, the problem and the
remedy; :func:`check_one_run` refuses a directory whose parts carry more than one
run id. ``rehearsal eval verify RUN_DIR`` runs every check, the seal's included
(:mod:`._seal`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from filelock import FileLock

from ._facts import part_facts, remember_written
from ._manifest_log import LEGACY_MANIFEST, MANIFEST, ManifestUnreadable, append_lines, manifest_state

EPISODES_DIR = "episodes.parquet"
"""The records' directory inside a run directory."""
REMEDY = ("`rehearsal run --resume RUN_DIR` plays that part's episodes again and rewrites it; "
          "`rehearsal eval verify RUN_DIR` checks the whole directory")


class RecordsDamaged(ValueError):
    """A part of a run's records that cannot be trusted: the message names the file, the problem, the remedy."""

    def __init__(self, path: Path, problem: str, remedy: str = REMEDY) -> None:
        super().__init__(f"{path}: {problem}; {remedy}")
        self.path = path
        """The damaged part."""
        self.problem = problem
        """What is wrong with it."""


class MixedRuns(ValueError):
    """A directory whose parts carry more than one run id (two runs wrote into it)."""


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _lock(directory: Path) -> FileLock:
    return FileLock(str(directory / ".manifest.lock"))


def read_manifest(directory: Path) -> dict[str, dict[str, Any]] | None:
    """``{part name: {"sha256", "bytes", "rows"}}``, or None when the directory has no manifest."""
    try:
        state = manifest_state(directory)
    except (OSError, ValueError) as exc:
        name = MANIFEST if (directory / MANIFEST).exists() else LEGACY_MANIFEST
        problem = str(exc) if isinstance(exc, ManifestUnreadable) else f"the manifest cannot be read ({exc})"
        raise RecordsDamaged(directory / name, problem) from None
    return None if state is None else state.parts


def note_part(path: Path, data: bytes) -> None:
    """Add (or replace) a written part's entry in its directory's manifest (one line appended)."""
    facts = remember_written(path, data)
    if facts.rows is None:
        raise ValueError(f"{path}: expected the bytes of a Parquet part, got {len(data)} bytes that are not one "
                         f"({facts.parquet_error})")
    with _lock(path.parent):
        append_lines(path.parent, [{"part": path.name, "sha256": facts.sha256, "bytes": len(data), "rows": facts.rows}])


def forget_parts(directory: Path, names: Sequence[str]) -> None:
    """Drop parts' entries from the manifest (the parts themselves are removed by the caller)."""
    with _lock(directory):
        if read_manifest(directory) is None:
            return
        append_lines(directory, [{"forget": name} for name in names])


def problem_of(path: Path, entry: dict[str, Any] | None, listed: bool) -> str | None:
    """What is wrong with one part (None: nothing)."""
    try:
        facts = part_facts(path)
    except OSError as exc:
        return f"cannot be read ({exc})"
    if listed:
        if entry is None:
            return "is not in the manifest (written by another program, or the run stopped while writing it)"
        if facts.size != entry["bytes"]:
            return f"has {facts.size} bytes, the manifest says {entry['bytes']} (truncated or overwritten)"
        if facts.sha256 != entry["sha256"]:
            return "does not match its SHA-256 in the manifest (its bytes changed after it was written)"
    if facts.parquet_error is not None:
        return f"is not a readable Parquet file ({facts.parquet_error})"
    if listed and entry is not None and facts.rows != entry["rows"]:
        return f"holds {facts.rows} rows, the manifest says {entry['rows']}"
    return None


def damaged_parts(parts: Sequence[Path]) -> dict[Path, str]:
    """Each damaged part among ``parts`` (all of one directory) with its problem."""
    if not parts:
        return {}
    manifest = read_manifest(parts[0].parent)
    out = {}
    for path in parts:
        entry = None if manifest is None else manifest.get(path.name)
        problem = problem_of(path, entry, manifest is not None)
        if problem is not None:
            out[path] = problem
    return out


def manifest_problems(directory: Path) -> dict[Path, str]:
    """Every problem between ``directory``'s manifest and its files, in both directions (empty: none).

    A missing manifest, a listed part missing from disk, a visible file the manifest does not list
    (readers such as ``pyarrow.dataset`` would read it), and each listed part's bytes, SHA-256 and rows.
    Hidden (``.``) and ``_`` files are not records: no reader reads them.
    """
    manifest = read_manifest(directory)
    if manifest is None:
        return {directory / MANIFEST: "the run has no manifest, so its parts cannot be checked (deleted, or "
                                      "not written by `rehearsal run`)"}
    on_disk = {p.name: p for p in directory.iterdir() if not p.name.startswith((".", "_"))} \
        if directory.is_dir() else {}
    out: dict[Path, str] = {}
    for name in sorted(set(manifest) - set(on_disk)):
        out[directory / name] = "is listed in the manifest but missing from disk (deleted or moved)"
    for name, path in sorted(on_disk.items()):
        entry = manifest.get(name)
        problem = problem_of(path, entry, True) if path.is_file() else "is not a regular file"
        if problem is not None:
            out[path] = problem
    return out


def verify_parts(parts: Sequence[Path]) -> None:
    """Raise :class:`RecordsDamaged` for the first damaged part (see the module docstring)."""
    for path, problem in damaged_parts(parts).items():
        raise RecordsDamaged(path, problem)


def verify_directory(directory: Path) -> None:
    """Raise :class:`RecordsDamaged` for the first of :func:`manifest_problems` (none: the manifest holds)."""
    for path, problem in manifest_problems(directory).items():
        raise RecordsDamaged(path, problem)


def check_one_run(parts: Sequence[Path]) -> str | None:
    """The one run id the parts carry (None for no rows); :class:`MixedRuns` when they carry more."""
    ids: dict[str, list[str]] = {}
    for path in parts:
        facts = part_facts(path)
        if facts.parquet_error is not None:
            raise RecordsDamaged(path, f"is not a readable Parquet file ({facts.parquet_error})")
        for run_id in facts.run_ids or ():  # None: a table that is not of our records names no run
            ids.setdefault(run_id, []).append(path.name)
    if len(ids) > 1:
        named = "; ".join(f"{run_id} ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''})"
                          for run_id, names in sorted(ids.items()))
        directory = parts[0].parent
        raise MixedRuns(f"{directory} holds records of {len(ids)} runs: {named}. The directory mixes runs "
                        "(two runs wrote into the same --out); read each run from its own directory")
    return next(iter(ids), None)
