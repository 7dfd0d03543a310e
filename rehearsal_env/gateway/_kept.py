"""An ended episode's gateway calls, kept beside its records: ``RUN_DIR/gateway/<episode id>.jsonl``.

The lines are the ledger's lines of the calls the episode reported, unchanged. Beside them,
``<episode id>.turns.json`` says which step reported which calls (``{"calls_per_turn": [1, 1, 0, 2]}``: the
first step reported the first call, the second the next one, the third none, the fourth the next two), so a
trajectory can put each model call on the turn its reply led to (:mod:`rehearsal_env.trajectories`). Runs kept
before there was such a file read with ``calls_per_turn`` None.

A record names its episode (``episode_id``), which names the files. Both are read with size bounds: a run
directory is input, not trusted code.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._atomic import write_atomic

KEPT_FOLDER = "gateway"
"""The folder of a run directory holding each gateway episode's model calls (``<episode id>.jsonl``)."""
MAX_KEPT_BYTES = 256 << 20
"""Largest kept calls file read (256 MiB: token ids of a long episode's prompts, each call's whole prompt)."""
_MAX_TURNS_BYTES = 1 << 20


@dataclass(frozen=True)
class KeptCalls:
    """The gateway calls kept for one episode."""

    lines: tuple[dict[str, Any], ...]
    """The ledger's line of each call the episode reported, in the order the gateway logged them."""
    calls_per_turn: tuple[int, ...] | None
    """How many of those calls each step reported, in step order (None: not kept, a run from before it was)."""


def _names(run_dir: str | Path, episode_id: str) -> tuple[Path, Path]:
    if not isinstance(episode_id, str) or not episode_id or "/" in episode_id or episode_id.startswith("."):
        raise ValueError(f"expected an episode id (a file name), got {str(episode_id)[:80]!r}")
    folder = Path(run_dir) / KEPT_FOLDER
    return folder / f"{episode_id}.jsonl", folder / f"{episode_id}.turns.json"


def keep_calls(run_dir: str | Path, episode_id: str, lines: list[dict[str, Any]],
               calls_per_turn: list[int]) -> None:
    """Write an ended episode's calls and which step reported them (each file replaced whole, atomically)."""
    calls, turns = _names(run_dir, episode_id)
    calls.parent.mkdir(exist_ok=True)
    write_atomic(calls, "".join(json.dumps(c, sort_keys=True) + "\n" for c in lines).encode())
    write_atomic(turns, json.dumps({"calls_per_turn": list(calls_per_turn)}).encode())


def _bounded(path: Path, limit: int) -> str:
    size = path.stat().st_size
    if size > limit:
        raise ValueError(f"{path}: expected at most {limit} bytes of kept gateway calls, found {size}; the file is "
                         "not what `rehearsal mcp --ledger` keeps (remove it, or export without it)")
    return path.read_text(encoding="utf-8", errors="replace")


def _calls_per_turn(path: Path) -> tuple[int, ...] | None:
    if not path.is_file():
        return None
    try:
        data = json.loads(_bounded(path, _MAX_TURNS_BYTES))
    except ValueError:
        return None
    counts = data.get("calls_per_turn") if isinstance(data, dict) else None
    if not isinstance(counts, list) or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0
                                               for n in counts):
        return None
    return tuple(counts)


def read_kept(run_dir: str | Path, episode_id: str | None) -> KeptCalls | None:
    """The calls kept for ``episode_id`` in ``run_dir`` (None: the episode kept none: it was not played through
    the gateway, or its record names no episode). A line that is not a JSON object is left out.

    Raises:
        ValueError: the calls file is larger than :data:`MAX_KEPT_BYTES`.
    """
    if episode_id is None:
        return None
    try:
        calls, turns = _names(run_dir, episode_id)
    except ValueError:  # a record's id that names no file: no calls were kept under it
        return None
    if not calls.is_file():
        return None
    lines = []
    for text in _bounded(calls, MAX_KEPT_BYTES).splitlines():
        try:
            line = json.loads(text)
        except (ValueError, RecursionError):
            continue
        if isinstance(line, dict):
            lines.append(line)
    return KeptCalls(tuple(lines), _calls_per_turn(turns))
