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

A scenario is holdout by its identity, not its label (:mod:`._holdout`): once any published version placed it in
holdout, by id or by content (request, checks, reference), a run on a version that gives it another split is
refused too (a copy under another id, reworded, or in a world rebuilt from the same folder).

Which scenarios are holdout is decided by the *published* world version each record names
(its ``world`` and ``world_version``, matched exactly: ``versions.load_content``, re-hashed to
its id), never by the record's own ``split`` label. Before any row is read, every record of the
run must match that version: a world version not published here, a world name renamed or
re-cased, a scenario id the version does not have (a suffixed holdout id), or a scenario under
another split than the version gives it (holdout rows relabelled and mixed into a dev run) is
refused (:class:`HoldoutRefused`). Those checks are counts of the scan (``count_rows`` with a
filter), so no holdout row becomes a value either; the learnable scan then keeps only rows
whose scenario the published version places in a learnable split.

The parts are verified first: the manifest both ways and the run's seal by a trusted key
(``records.checked_parts`` and ``records.verify_seal``).

Only root episodes (begun at ``reset``) are learned from and counted. A fork or restore is a training and search
tool whose actions after the cut may be anyone's, never evidence about the agent (the rule readiness, ``measure.py``
and compare use: ``records._record.episode_kind``); :meth:`LearningRecords.not_root` counts those left out.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from ..records import SCHEMA, PublicKey, checked_parts, verify_seal
from ..records._record import ROOT_EPISODE, episode_kind
from ..versions import NotPublished, load_content
from ._holdout import held_out

LearnableSplit = Literal["train", "dev"]
"""The splits an improvement may learn from (holdout is not one of them, by type)."""
LEARNABLE_SPLITS: tuple[LearnableSplit, ...] = get_args(LearnableSplit)
FAILED_OUTCOMES = ("not_achieved", "rule_violated")
"""The outcomes read: the agent failed. Not-scored episodes are the environment's failure, not a lesson."""
COLUMNS = ("run_id", "world", "world_version", "scenario", "split", "category", "agent", "agent_version", "repeat",
           "outcome", "ending", "false_completion", "duplicate_effects", "rejected_attempts",
           "unnecessary_interruptions", "checks", "parent_episode", "parent_kind", "world_tool_calls", "trace")
"""The only columns the scan reads."""
LINEAGE = ("parent_episode", "parent_kind")
"""The columns that say whether an episode is a root episode (:func:`~rehearsal_env.records._record.episode_kind`)."""


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
    world_tool_calls: int | None = None
    """Calls of the world's tools the agent made (None: a record that does not say)."""
    rejected_kinds: tuple[str, ...] = ()
    """Why each of a model agent's rejected attempts was rejected (``cut_off_length``, ``malformed_json``, ...)."""

    @property
    def key(self) -> str:
        """``RUN_ID/SCENARIO#REPEAT``: the episode, as lineage names it."""
        return f"{self.run_id}/{self.scenario}#{self.repeat}"


def _isin(column: str, values: Sequence[str]) -> Any:
    """``column`` in ``values`` as a scan predicate; typed, so an empty list is a predicate too (not a type error)."""
    return pc.field(column).isin(pa.array(list(values), type=pa.string()))


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
                 agent_version: str | None = None, versions_root: str | Path | None = None,
                 trusted: Mapping[str, PublicKey] | None = None) -> None:
        self.splits = _learnable(splits)
        self.agent = tuple(agent) if agent is not None else None
        self.agent_version = agent_version
        self.versions_root = versions_root
        self.trusted = trusted
        self._learnable_ids: dict[tuple[str, str], list[str]] = {}

    def _filter(self, outcomes: Sequence[str] | None) -> Any:
        expr = _isin("split", list(self.splits))
        learnable = [(pc.field("world") == w) & (pc.field("world_version") == v) & _isin("scenario", ids)
                     for (w, v), ids in self._learnable_ids.items()]
        expr = expr & functools.reduce(operator.or_, learnable, pc.scalar(False))
        if outcomes is not None:
            expr = expr & _isin("outcome", list(outcomes))
        if self.agent is not None:
            expr = expr & _isin("agent", list(self.agent))
        if self.agent_version is not None:
            expr = expr & (pc.field("agent_version") == self.agent_version)
        return expr

    def _dataset(self, run_dir: str | Path) -> ds.Dataset:
        parts = checked_parts(run_dir)
        seal = verify_seal(run_dir, self.trusted)
        dataset = ds.dataset([str(p) for p in parts], schema=SCHEMA, format="parquet")
        self._match_published(run_dir, dataset, str(seal.world), str(seal.world_version))
        return dataset

    def _match_published(self, run_dir: str | Path, dataset: ds.Dataset, world: str, version: str) -> None:
        """Refuse the run unless every record matches the published world version its sealed provenance
        names (see the module doc); remember the scenarios that version places in the learnable splits."""
        other = dataset.count_rows(filter=(pc.field("world") != world) | (pc.field("world_version") != version))
        if other:
            raise HoldoutRefused(f"{run_dir}: {other} record(s) name another world or world version than the run's "
                                 f"provenance ({world} {version}): renamed or re-cased, or mixed in from another "
                                 "run; the improvement step reads only records that match a published version "
                                 "exactly")
        try:
            content = load_content(world, version, self.versions_root)
        except NotPublished as exc:
            raise HoldoutRefused(f"{run_dir}: its records name world {world!r} version {version}, which is not "
                                 f"published here, so which scenarios are holdout cannot be known and the "
                                 f"improvement step reads none of them ({exc})") from None
        if content.get("world", {}).get("name") != world:
            raise HoldoutRefused(f"{run_dir}: its records name world {world!r}, but {version} is published as "
                                 f"{content.get('world', {}).get('name')!r}; records must name their world exactly "
                                 "as published")
        published: dict[str, list[str]] = {}
        for scenario in content.get("scenarios") or ():
            published.setdefault(str(scenario["split"]), []).append(str(scenario["id"]))
        unknown = dataset.count_rows(filter=~_isin("scenario", [i for ids in published.values() for i in ids]))
        if unknown:
            raise HoldoutRefused(f"{run_dir}: {unknown} record(s) name scenarios that {world} {version} does not "
                                 "publish (renamed or suffixed scenario ids); the improvement step reads only "
                                 "records that match a published version exactly")
        for split in ("train", "dev", "holdout"):
            moved = dataset.count_rows(filter=(pc.field("split") == split)
                                       & ~_isin("scenario", published.get(split, [])))
            if moved:
                raise HoldoutRefused(f"{run_dir}: {moved} record(s) labelled {split!r} are of scenarios that the "
                                     f"published {world} {version} places in another split (holdout records "
                                     "relabelled, or mixed into this run): the improvement step never learns from "
                                     "holdout, so it stops here")
        held = held_out(world, version, self.versions_root)  # holdout in any published version, by id or content
        for scenario in sorted(set(held) - set(published.get("holdout", []))):
            rows = dataset.count_rows(filter=pc.field("scenario") == scenario)
            if rows:
                raise HoldoutRefused(f"{run_dir}: scenario {scenario!r} of {world} {version} is "
                                     f"{held[scenario]} ({rows} record(s)): a scenario any published version placed "
                                     "in holdout stays holdout whatever split a later version gives it, so the "
                                     "improvement step stops here. Run the agent on the other scenarios "
                                     "(`rehearsal run --scenario ...`) and improve from that run")
        self._learnable_ids[(world, version)] = [i for split in self.splits for i in published.get(split, [])
                                                 if i not in held]

    def _kinds(self, run_dir: str | Path) -> dict[str, int]:
        """Kind (root, fork, restore) -> the agent's episodes of the learnable splits in the run, failed or not."""
        dataset = self._dataset(run_dir)  # first: it learns which scenarios the published version allows
        out: dict[str, int] = {}
        for row in dataset.to_table(columns=list(LINEAGE), filter=self._filter(None)).to_pylist():
            kind = episode_kind(row["parent_episode"], row["parent_kind"])
            out[kind] = out.get(kind, 0) + 1
        return out

    def count(self, run_dir: str | Path) -> int:
        """How many root episodes of the learnable splits (failed or not) the run holds for the agent."""
        return self._kinds(run_dir).get(ROOT_EPISODE, 0)

    def not_root(self, run_dir: str | Path) -> dict[str, int]:
        """Kind (``fork``, ``restore``) -> episodes of the learnable splits the run holds for the agent that are
        left out because they are not root episodes (never evidence about the agent)."""
        return dict(sorted((k, n) for k, n in self._kinds(run_dir).items() if k != ROOT_EPISODE))

    def failures(self, run_dir: str | Path) -> list[FailedEpisode]:
        """The run's failed root episodes of the learnable splits, ordered by (scenario, repeat)."""
        dataset = self._dataset(run_dir)  # first: it learns which scenarios the published version allows
        table = dataset.to_table(columns=list(COLUMNS), filter=self._filter(FAILED_OUTCOMES))
        out = []
        for row in table.to_pylist():
            if row["split"] not in self.splits:
                raise HoldoutLeak(f"a {row['split']!r} row came out of a scan filtered to {self.splits}; "
                                  "this is a bug of rehearsal_env.improve")
            if episode_kind(row["parent_episode"], row["parent_kind"]) != ROOT_EPISODE:
                continue  # a fork or restore: never evidence about the agent (counted by not_root)
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
                broken_rules=tuple(c["name"] for c in checks if c["kind"] == "hard_rule" and not c["passed"]),
                world_tool_calls=row["world_tool_calls"],
                rejected_kinds=tuple(t["rejected_kind"] for t in row["trace"] or () if t.get("rejected_kind"))))
        return sorted(out, key=lambda f: (f.scenario, f.repeat))
