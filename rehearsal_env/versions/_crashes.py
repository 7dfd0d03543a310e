"""Tool crashes seen in runs of a published world version, for its world page.

A *tool crash* is an exception a world's tool raised while handling an agent's call (see
:mod:`rehearsal_env.env`): the agent read it as ``status: error`` and its episode went on, so the
defect is the world's. Every run that saw some appends its counts per tool to the version's
``tool_crashes.jsonl`` (keyed by the run directory, so a resumed run replaces its own line); the world
page sums the latest line of each run. Like live attempts, this file is not part of the version's
content and never changes its id.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

CRASH_FILE = "tool_crashes.jsonl"
"""The append-only file of tool-crash counts in a version's folder."""


def note_tool_crashes(folder: Path, run: str, counts: Mapping[str, int]) -> bool:
    """Append ``run``'s crash counts per tool to the version folder ``folder``; False when no such version is
    published there (nothing is written)."""
    if not counts or not folder.is_dir():
        return False
    line = {"run": run, "counts": {str(k): int(v) for k, v in sorted(counts.items())},
            "recorded_at": datetime.now(UTC).isoformat(timespec="seconds")}
    with open(folder / CRASH_FILE, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(line, sort_keys=True) + "\n")
    return True


def tool_crash_counts(folder: Path | None) -> dict[str, tuple[int, int]]:
    """Per tool: (crashes, runs that saw any), from the latest line of each run; empty when none. A line that
    cannot be read is skipped (the file is evidence for people, never part of a verdict)."""
    latest: dict[str, Mapping[str, int]] = {}
    path = None if folder is None else folder / CRASH_FILE
    if path is None or not path.is_file():
        return {}
    for text in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            entry = json.loads(text)
            latest[str(entry["run"])] = {str(k): int(v) for k, v in dict(entry["counts"]).items()}
        except (ValueError, KeyError, TypeError):
            continue
    out: dict[str, tuple[int, int]] = {}
    for counts in latest.values():
        for tool, n in counts.items():
            crashes, runs = out.get(tool, (0, 0))
            out[tool] = (crashes + n, runs + (1 if n else 0))
    return dict(sorted(out.items()))
