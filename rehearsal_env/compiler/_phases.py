"""The nine phases' results as files: ``FOLDER/.compile/NN-phase.json`` and a manifest, so a killed compile resumes.

Each phase's result is canonical JSON (sorted keys, no wall-clock times, no temporary paths), so
the same inputs give the same bytes. The manifest records, per phase, the digest of what it was
run on (the previous phase's result and the options that phase reads) and the digest of its result.
A phase is skipped when its result file is there, unchanged since the manifest recorded it, and its
inputs' digest is the same; a person who edits a phase's result file changes its digest, so the
phases after it run again. Wall times go to ``timings.json`` beside them (diagnostic, never an input).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._atomic import write_atomic

PHASES = ("inspect", "plan", "materialize", "discover", "seed", "adapt", "author", "validate", "package")
"""The nine phases, in order."""
STATE_DIR = ".compile"


def canonical(value: Any) -> str:
    """Canonical JSON text (sorted keys, two-space indent, a final newline)."""
    return json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class PhaseRecord:
    """What the manifest says of one phase."""

    phase: str
    """The phase's name."""
    inputs: str
    """SHA-256 of what it ran on (the previous result and the options it reads)."""
    result: str
    """SHA-256 of its result file's text."""


class PhaseStore:
    """The phase files of one compile folder."""

    def __init__(self, out: Path) -> None:
        self.dir = out / STATE_DIR
        self.dir.mkdir(parents=True, exist_ok=True)
        self.manifest_path = self.dir / "manifest.json"
        self.timings_path = self.dir / "timings.json"

    def path(self, phase: str) -> Path:
        return self.dir / f"{PHASES.index(phase) + 1:02d}-{phase}.json"

    def _manifest(self) -> dict[str, dict[str, str]]:
        try:
            body = json.loads(self.manifest_path.read_text())
        except (OSError, ValueError):
            return {}
        return body if isinstance(body, dict) else {}

    def done(self, phase: str, inputs: str) -> dict[str, Any] | None:
        """The phase's result when it is done for these inputs (None: run it)."""
        entry = self._manifest().get(phase)
        path = self.path(phase)
        if not isinstance(entry, dict) or entry.get("inputs") != inputs or not path.is_file():
            return None
        text = path.read_text()
        if sha(text) != entry.get("result"):  # edited by hand: this phase's result stands, the next ones rerun
            entry["result"] = sha(text)
            self._write_manifest({**self._manifest(), phase: entry})
        try:
            result = json.loads(text)
        except ValueError:
            return None
        return result if isinstance(result, dict) else None

    def save(self, phase: str, inputs: str, result: dict[str, Any]) -> str:
        """Write the result and record it; returns the result's digest (the next phase's input)."""
        text = canonical(result)
        write_atomic(self.path(phase), text)
        manifest = self._manifest()
        manifest[phase] = {"inputs": inputs, "result": sha(text)}
        self._write_manifest(manifest)  # a later phase's recorded inputs name this result's digest: a new one reruns it
        return sha(text)

    def result_digest(self, phase: str) -> str:
        return sha(self.path(phase).read_text())

    def _write_manifest(self, manifest: dict[str, Any]) -> None:
        ordered = {p: manifest[p] for p in PHASES if p in manifest}
        write_atomic(self.manifest_path, canonical(ordered))

    def record_time(self, phase: str, seconds: float, skipped: bool) -> None:
        try:
            timings = json.loads(self.timings_path.read_text())
        except (OSError, ValueError):
            timings = {}
        timings[phase] = {"seconds": round(seconds, 3), "skipped": skipped}
        write_atomic(self.timings_path, canonical(timings))
