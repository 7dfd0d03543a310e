"""What measure says about runs that ``rehearsal compare`` stopped sequentially.

A run directory with ``sequential.json`` is one side of a sequential comparison (:mod:`._seqrun`). Its own
report says that the number of episodes was not fixed in advance. Two partner runs compared with each other
also get the anytime-valid interval, recomputed here from the records (not copied from the marker): the
pairs in the order of the plan in ``run.json``, each (scenario, repeat) scored in both runs, through the same
kernel as ``rehearsal compare`` (:func:`._sequential.looks`). It is shown beside the fixed-sample interval,
which assumes a fixed number of episodes and so, after a sequential stop, is not a 95% statement.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ._load import AgentRun, RunError
from ._sequential import ALPHA, Look, looks

SEQUENTIAL_FILE = "sequential.json"
"""The marker of a sequentially stopped run, beside ``run.json``."""


@dataclass(frozen=True)
class SequentialCheck:
    """The anytime-valid interval of two partner runs, recomputed from their records."""

    decision: str
    """What ``rehearsal compare`` decided: ``difference``, ``within the floor`` or ``budget``."""
    look: Look
    """The interval recomputed from the records (pairs in play order)."""
    recorded: Look | None
    """The last look the marker recorded (None when it recorded none)."""
    agrees: bool
    """Whether the recomputed interval equals the recorded one (to 1e-9)."""
    note: str
    """How to read the two intervals."""


def read_marker(run_dir: str | Path) -> dict[str, Any] | None:
    """The ``sequential.json`` of a run directory; None when the run was not stopped sequentially."""
    path = Path(run_dir) / SEQUENTIAL_FILE
    if not path.is_file():
        return None
    try:
        body = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise RunError(f"{path}: expected a JSON object; it does not parse ({e})") from e
    if not isinstance(body, dict) or body.get("sequential") is not True:
        raise RunError(f"{path}: expected the marker rehearsal compare writes ({{\"sequential\": true, ...}})")
    return body


def describe(marker: Mapping[str, Any]) -> str:
    """One sentence: this run's stopping was sequential, and what was decided."""
    return (f"stopping was sequential (rehearsal compare, {marker.get('method', '?')}): run {marker.get('role')} "
            f"against {marker.get('partner')}, decided '{marker.get('decision')}' after {marker.get('episodes')} "
            f"of a budget of {marker.get('budget_episodes')} episodes; the number of episodes was not fixed in "
            "advance, so fixed-sample intervals and p-values of a comparison are not 95% statements")


def _plan(run_dir: Path) -> list[tuple[str, int]]:
    path = run_dir / "run.json"
    try:
        body = json.loads(path.read_text())
        return [(str(s), int(k)) for s, k, _ in body["episodes"]]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise RunError(f"{path}: expected the run's plan (run.json with 'episodes'); cannot read it ({e})") from e


def sequential_check(a: AgentRun, b: AgentRun) -> SequentialCheck | None:
    """The anytime-valid interval of A - B when A and B are the two runs of one sequential comparison."""
    ma, mb = read_marker(a.run), read_marker(b.run)
    if ma is None or mb is None or ma.get("partner") != Path(b.run).name or ma.get("role") != "A":
        return None
    va = {(s.scenario, int(r)): float(v) for s in a.scenarios
          for r, v in zip(s.repeats, s.values["verified"], strict=True)}
    vb = {(s.scenario, int(r)): float(v) for s in b.scenarios
          for r, v in zip(s.repeats, s.values["verified"], strict=True)}
    d = np.array([va[key] - vb[key] for key in _plan(Path(a.run)) if key in va and key in vb])
    if not len(d):
        return None
    floor = ma.get("floor_given")
    look = looks(d, [len(d)], float(ma["design_pairs"]), None if floor is None else float(floor),
                 float(ma.get("alpha", ALPHA)))[0]
    last = (ma.get("looks") or [None])[-1]
    recorded = Look(**last) if isinstance(last, dict) else None
    agrees = recorded is not None and recorded.pairs == look.pairs and all(
        abs(getattr(recorded, f) - getattr(look, f)) < 1e-9 for f in ("low", "high", "estimate"))
    note = ("the anytime-valid interval keeps its 95% however the stopping depended on the data; the fixed-sample "
            "interval and p-value above assume the episodes were fixed in advance, so after a sequential stop they "
            "overstate the evidence")
    if not agrees:
        note += ("; the interval recomputed from the records differs from the one rehearsal compare recorded (the "
                 "run was resumed or changed since), so the recorded decision no longer describes it")
    return SequentialCheck(decision=str(ma.get("decision")), look=look, recorded=recorded, agrees=agrees, note=note)
