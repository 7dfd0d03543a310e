"""``import_tau2``: pin a tau2-bench folder, build its worlds once to check them, and record them."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ...worlds import World, record_imported
from ._source import DOMAINS, SourceError, SourceFile, manifest_hash, pin
from ._world import build_tau2_world

FACTORY = "rehearsal_env.importers.tau2:world_from_record"


@dataclass(frozen=True)
class Imported:
    """One world an import produced."""

    name: str
    """``tau2-<domain>``."""
    domain: str
    """``airline`` or ``retail``."""
    files: tuple[SourceFile, ...]
    """The source files, pinned."""
    manifest_hash: str
    """SHA-256 over the files' hashes (the world's ``suite_version`` carries it)."""
    tasks: int
    """tau2 tasks imported."""
    scenarios: int
    """Scenarios made (the tasks, and our fault variants of the write tasks)."""
    seconds: float
    """Wall-clock seconds to read, derive and check the world."""
    state_file: Path
    """Where the world was recorded."""


def world_from_record(name: str, record: dict[str, Any]) -> World:
    """Rebuild an imported world from its record (the factory ``rehearsal_env.worlds`` calls)."""
    expected = tuple(SourceFile(**f) for f in record["files"])
    return build_tau2_world(name, record["source"], record["domain"], expected)


def import_tau2(source: str | Path, domains: Sequence[str] = DOMAINS) -> list[Imported]:
    """Import ``domains`` of the tau2-bench folder ``source`` as worlds ``tau2-<domain>``.

    Raises:
        SourceError: the folder is not a tau2-bench checkout, or a domain is unknown.
    """
    folder = Path(source).expanduser().resolve()
    unknown = sorted(set(domains) - set(DOMAINS))
    if unknown:
        raise SourceError(f"unknown tau2 domain(s) {unknown}; this importer reads {', '.join(DOMAINS)}")
    out = []
    for domain in domains:
        started = time.perf_counter()
        files = pin(folder, domain)
        name = f"tau2-{domain}"
        world = build_tau2_world(name, folder, domain, files)
        scenarios = world.scenarios()
        record = {"factory": FACTORY, "importer": "tau2", "source": str(folder), "domain": domain,
                  "files": [f.to_dict() for f in files], "manifest_hash": manifest_hash(files),
                  "imported_at": datetime.now(UTC).isoformat(timespec="seconds")}
        path = record_imported(name, record)
        tasks = sum(1 for s in scenarios if s.id.startswith("task-"))
        out.append(Imported(name, domain, files, manifest_hash(files), tasks, len(scenarios),
                            time.perf_counter() - started, path))
    return out
