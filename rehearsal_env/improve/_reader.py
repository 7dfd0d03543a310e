"""The only way the improvement step reads episodes: failed train and dev episodes, never holdout.

Holdout scenarios give the one honest score of an agent, so nothing that changes an
agent may read them (the seeds: the improvement step "reads failed episodes of train
and dev jobs. It never reads holdout jobs"). That is made structural here, not a
check at the door:

- :class:`LearningRecords` takes the splits it reads as :data:`LearnableSplit`, a type
  that has no ``holdout`` (and refuses one at run time too, :class:`HoldoutRefused`);
- the split is a predicate of the Parquet scan itself (``pyarrow.dataset`` with
  ``filter=``), so a holdout row is dropped inside the scan and never becomes a Python
  value, a record or a row of a table this module returns;
- every row that does come out is checked again (:class:`HoldoutLeak`), and the
  rows are narrowed to :class:`FailedEpisode`, whose ``split`` is a
  :data:`LearnableSplit`: the scenario, its failed checks and the run metrics, never
  the trace, the observations or the database changes.

The parts are verified against the run's manifest first (``records.checked_parts``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

import pyarrow.compute as pc
import pyarrow.dataset as ds

from ..records import SCHEMA, checked_parts

LearnableSplit = Literal["train", "dev"]
"""The splits an improvement may learn from (holdout is not one of them, by type)."""
LEARNABLE_SPLITS: tuple[LearnableSplit, ...] = get_args(LearnableSplit)
FAILED_OUTCOMES = ("not_achieved", "rule_violated")
"""The outcomes read: the agent failed. Not-scored episodes are the environment's failure, not a lesson."""
COLUMNS = ("run_id", "world", "world_version", "scenario", "split", "category", "agent", "agent_version", "repeat",
           "outcome", "ending", "false_completion", "duplicate_effects", "rejected_attempts",
           "unnecessary_interruptions", "checks")
"""The only columns the scan reads."""


class HoldoutRefused(ValueError):
    """A reader was asked for a split it may never read."""


class HoldoutLeak(RuntimeError):
    """A row outside the learnable splits came out of the scan (a bug: the scan filter failed)."""


@dataclass(frozen=True)
class FailedEpisode:
    """One failed train or dev episode, as much of it as an improvement reads."""

    run_id: str
    """The run it belongs to."""
    world: str
    """The world's name."""
    world_version: str
    """The world version it ran on."""
    scenario: str
    """The scenario id."""
    split: LearnableSplit
    """``train`` or ``dev``; never holdout."""
    category: str
    """What kind of work the scenario is."""
    agent: str
    """The agent's name in the record."""
    agent_version: str
    """The agent's version in the record (``vN`` for a registered profile)."""
    repeat: int
    """Which repeat of the scenario."""
    outcome: str
    """``not_achieved`` or ``rule_violated``."""
    ending: str
    """How the episode stopped."""
    false_completion: bool
    """It said it was done while a goal check failed."""
    duplicate_effects: int
    """Requests repeated to an outside service."""
    rejected_attempts: int
    """Actions not carried out."""
    unnecessary_interruptions: int
    """Customer contacts beyond what the scenario allows."""
    failed_goals: tuple[str, ...]
    """Names of the goal checks that failed."""
    broken_rules: tuple[str, ...]
    """Names of the hard rules that failed."""

    @property
    def key(self) -> str:
        """``RUN_ID/SCENARIO#REPEAT``: the episode, as lineage names it."""
        return f"{self.run_id}/{self.scenario}#{self.repeat}"


def _learnable(splits: Sequence[str]) -> tuple[LearnableSplit, ...]:
    chosen = tuple(splits)
    bad = sorted(set(chosen) - set(LEARNABLE_SPLITS))
    if bad:
        raise HoldoutRefused(f"the improvement step reads only {', '.join(LEARNABLE_SPLITS)} episodes, never "
                             f"{', '.join(bad)}: holdout scenarios stay unseen so that their score stays honest")
    if not chosen:
        raise ValueError(f"expected at least one split of {', '.join(LEARNABLE_SPLITS)}")
    return chosen  # type: ignore[return-value]


class LearningRecords:
    """Reads the failed episodes of the learnable splits of runs (see the module doc).

    Args:
        splits: Which of ``train`` and ``dev`` to read (default both).
        agent: Only episodes of this agent name (None: any).
        agent_version: Only episodes of this agent version (None: any).
    """

    def __init__(self, splits: Sequence[LearnableSplit] = LEARNABLE_SPLITS, *, agent: Sequence[str] | None = None,
                 agent_version: str | None = None) -> None:
        self.splits = _learnable(splits)
        self.agent = tuple(agent) if agent is not None else None
        self.agent_version = agent_version

    def _filter(self, outcomes: Sequence[str] | None) -> Any:
        expr = pc.field("split").isin(list(self.splits))
        if outcomes is not None:
            expr = expr & pc.field("outcome").isin(list(outcomes))
        if self.agent is not None:
            expr = expr & pc.field("agent").isin(list(self.agent))
        if self.agent_version is not None:
            expr = expr & (pc.field("agent_version") == self.agent_version)
        return expr

    def _dataset(self, run_dir: str | Path) -> ds.Dataset:
        return ds.dataset([str(p) for p in checked_parts(run_dir)], schema=SCHEMA, format="parquet")

    def count(self, run_dir: str | Path) -> int:
        """How many episodes of the learnable splits (failed or not) the run holds for the agent."""
        return int(self._dataset(run_dir).count_rows(filter=self._filter(None)))

    def failures(self, run_dir: str | Path) -> list[FailedEpisode]:
        """The run's failed episodes of the learnable splits, ordered by (scenario, repeat)."""
        table = self._dataset(run_dir).to_table(columns=list(COLUMNS), filter=self._filter(FAILED_OUTCOMES))
        out = []
        for row in table.to_pylist():
            if row["split"] not in self.splits:
                raise HoldoutLeak(f"a {row['split']!r} row came out of a scan filtered to {self.splits}; "
                                  "this is a bug of rehearsal_env.improve")
            checks = row["checks"] or []
            out.append(FailedEpisode(
                run_id=row["run_id"], world=row["world"], world_version=row["world_version"],
                scenario=row["scenario"], split=row["split"], category=row["category"], agent=row["agent"],
                agent_version=row["agent_version"], repeat=row["repeat"], outcome=row["outcome"],
                ending=row["ending"], false_completion=bool(row["false_completion"]),
                duplicate_effects=int(row["duplicate_effects"] or 0),
                rejected_attempts=int(row["rejected_attempts"] or 0),
                unnecessary_interruptions=int(row["unnecessary_interruptions"] or 0),
                failed_goals=tuple(c["name"] for c in checks if c["kind"] == "goal" and not c["passed"]),
                broken_rules=tuple(c["name"] for c in checks if c["kind"] == "hard_rule" and not c["passed"])))
        return sorted(out, key=lambda f: (f.scenario, f.repeat))
