"""Readiness of run directories: their records judged, and a run whose seal or manifest fails makes it "Needs work".

A verdict rests on records nobody could have changed since the evaluation sealed them. So each
run directory is checked first (:func:`rehearsal_env.records.verify_run_dir`: the manifest against
the files both ways, one run id, a seal by a trusted key that still matches); its readable parts
are judged as usual, and every verdict of an agent version and key with an episode in a run with a
problem is "Needs work", naming the run and the problem, whatever its numbers say. A damaged run of
another key's episodes changes no verdict but that key's: readiness is per key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pyarrow as pa

from ..records import EpisodeRecord, PublicKey, part_files, read_part, verify_run_dir
from ._rules import Readiness, assess


@dataclass(frozen=True)
class RunRecords:
    """One run directory as readiness reads it."""

    path: Path
    """The run directory."""
    records: tuple[EpisodeRecord, ...]
    """The records of its readable parts."""
    problems: tuple[str, ...]
    """Why its records cannot be trusted (empty: sealed by a trusted key, and whole)."""


def read_run(run_dir: str | Path, trusted: Mapping[str, PublicKey] | None = None) -> RunRecords:
    """The readable records of a run directory and every problem of its manifest and seal.

    Raises:
        FileNotFoundError: the directory holds no records at all.
    """
    problems = verify_run_dir(run_dir, trusted)
    records: list[EpisodeRecord] = []
    for path in part_files(run_dir):
        try:
            records.extend(read_part(path))
        except (pa.ArrowException, OSError, ValueError, KeyError, TypeError):
            continue  # a damaged part: verify_run_dir names it
    return RunRecords(Path(run_dir), tuple(records), tuple(problems))


def _why(run: RunRecords) -> str:
    more = f" (and {len(run.problems) - 1} more problem(s); `rehearsal eval verify {run.path}` lists them)" \
        if len(run.problems) > 1 else ""
    return f"the records of {run.path} cannot be trusted: {run.problems[0]}{more}"


def assess_runs(run_dirs: Sequence[str | Path], *, trusted: Mapping[str, PublicKey] | None = None,
                **options: Any) -> list[Readiness]:
    """:func:`assess` over the records of ``run_dirs``; the verdict of an agent version and API key with records
    (forks and restores included) in a run that is unsealed, sealed by a key not in ``trusted`` (default: the state
    home's trusted keys), or changed since it was sealed says "Needs work" with the reason. ``options`` go to
    :func:`assess`."""
    runs = [read_run(d, trusted) for d in run_dirs]
    verdicts = assess([r for run in runs for r in run.records], **options)
    out = []
    for verdict in verdicts:
        key = (verdict.agent, verdict.agent_version, verdict.world, verdict.world_version, verdict.key_id)
        reasons = [_why(run) for run in runs if run.problems and any(
            (r.agent, r.agent_version, r.world, r.world_version, r.key_id) == key for r in run.records)]
        out.append(replace(verdict, ready=False, reasons=(*reasons, *verdict.reasons)) if reasons else verdict)
    return out
