"""Lineage: where an improved agent version came from.

Stored beside the profile store (``ROOT/.lineage/NAME/vN.json``; a profile name cannot start
with a dot, so the folder never reads as a profile), written once, after the version it
describes is registered. A version with lineage is *improved*: readiness counts only its
holdout episodes, the scenarios it never learned from.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .._atomic import write_atomic
from ..agents import ProfileStore

LINEAGE_DIR = ".lineage"


@dataclass(frozen=True)
class Lineage:
    """How one agent version was made by the improvement step."""

    profile: str
    """The profile's name."""
    version: int
    """The version made."""
    parent_version: int
    """The version it was improved from."""
    runs: tuple[str, ...]
    """The run ids whose episodes were read."""
    episodes: tuple[str, ...]
    """Every episode read, as ``RUN_ID/SCENARIO#REPEAT`` (failed train and dev episodes only)."""
    splits: tuple[str, ...]
    """The splits read (``train``, ``dev``; never holdout)."""
    writer: str
    """Who wrote the lessons: ``rules`` or ``model:NAME``."""
    lessons: tuple[str, ...]
    """The lessons added to the instructions."""

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"


def _root(root: str | Path | None) -> Path:
    """The profile store's root: ``root``, else ``$REHEARSAL_AGENT_PROFILES``, else ``./agent_profiles``."""
    return ProfileStore(root).root


def lineage_path(profile: str, version: int, root: str | Path | None = None) -> Path:
    """Where the lineage of ``profile`` version ``version`` is stored."""
    return _root(root) / LINEAGE_DIR / profile.replace(":", "_") / f"v{version}.json"


def write_lineage(lineage: Lineage, root: str | Path | None = None) -> Path:
    """Store ``lineage`` (atomically); return its path."""
    path = lineage_path(lineage.profile, lineage.version, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, lineage.to_json())
    return path


def lineage_of(profile: str, version: str | int, root: str | Path | None = None) -> Lineage | None:
    """The lineage of ``profile`` at ``version`` (``3`` or a record's ``v3``); None: not made by an improvement."""
    text = str(version)
    if not text.removeprefix("v").isdigit():
        return None  # a built-in, unregistered or unversioned agent: nobody improved it
    path = lineage_path(profile, int(text.removeprefix("v")), root)
    if not path.is_file():
        return None
    data: dict[str, Any] = json.loads(path.read_text())
    fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
    return Lineage(**fields)


def is_improved(agent: str, agent_version: str, root: str | Path | None = None) -> bool:
    """Whether the agent version of a record was made by the improvement step (it has lineage)."""
    return lineage_of(agent, agent_version, root) is not None
