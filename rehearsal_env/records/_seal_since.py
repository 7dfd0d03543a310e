"""The checks before a seal, made once per part by a writer that seals the same directory again and again.

``rehearsal serve`` seals its run directory after every part it writes. Checking every part against the
manifest before each seal (:func:`._manifest.verify_directory`) made a flush cost more with every part the
directory held (33 ms at 10 parts, 148 ms at 1,000). :func:`checked_since` makes the same checks, but only
for what this process has not checked before: the manifest's new lines (read from where this process
stopped, :func:`._manifest_log.manifest_state_since`), each part they enter (its bytes, SHA-256, rows and
run id against its entry), and the directory's listing (a part missing from disk, a file the manifest does
not list). A part checked before is not read again; the seal signs the manifest's bytes, not the parts, so
a part changed on disk after its check is still caught by every reader (its bytes no longer match the
entry the seal covers).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._facts import part_facts
from ._manifest import RecordsDamaged, check_one_run, problem_of, verify_directory
from ._manifest_log import ManifestState, manifest_state


@dataclass
class _Checked:
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Each part checked, with the manifest entry it matched."""
    runs: dict[str, str | None] = field(default_factory=dict)
    """Each checked part's run id (None: no rows)."""


_checked: dict[str, _Checked] = {}
_lock = threading.Lock()


def checked_since(directory: Path, read: Callable[[Path], ManifestState | None]) -> tuple[ManifestState, str | None]:
    """The manifest (read by ``read``) and the one run id of the directory's parts, each new part checked.

    Raises:
        RecordsDamaged: a problem :func:`._manifest.manifest_problems` would report (the first one found).
        MixedRuns: the parts carry more than one run id.
    """
    state = read(directory)
    if state is None or state.sha256 is None:  # no manifest, or one of an older release: the whole check
        verify_directory(directory)
        state = manifest_state(directory) or ManifestState({}, 2)
        return state, check_one_run([directory / name for name in sorted(state.parts)])
    with _lock:
        memo = _checked.setdefault(str(directory), _Checked())
        on_disk = {n for n in os.listdir(directory) if not n.startswith((".", "_"))}
        for name in sorted(set(state.parts) - on_disk):
            raise RecordsDamaged(directory / name, "is listed in the manifest but missing from disk (deleted or moved)")
        for name in sorted(on_disk - set(state.parts)):
            raise RecordsDamaged(directory / name, problem_of(directory / name, None, True) or "is not listed")
        for name in [n for n in memo.entries if n not in state.parts]:
            memo.entries.pop(name)
            memo.runs.pop(name, None)
        for name, entry in sorted(state.parts.items()):
            if memo.entries.get(name) == entry:
                continue
            path = directory / name
            problem = problem_of(path, entry, True) if path.is_file() else "is not a regular file"
            if problem is not None:
                raise RecordsDamaged(path, problem)
            ids = part_facts(path).run_ids or ()
            if len(ids) > 1:
                check_one_run([path])  # raises MixedRuns, naming the runs
            memo.entries[name] = dict(entry)
            memo.runs[name] = ids[0] if ids else None
        ids_seen = {i for i in memo.runs.values() if i is not None}
        if len(ids_seen) > 1:
            check_one_run([directory / name for name in sorted(state.parts)])  # raises MixedRuns, naming the parts
        return state, next(iter(ids_seen), None)
