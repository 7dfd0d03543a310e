"""Reading a run directory into per-agent, per-scenario outcome arrays.

A run directory holds ``episodes.parquet`` (one row per episode: a file, or the runner's
directory of atomically written part files, read as one table with pyarrow.dataset, which skips
hidden temporary parts), ``provenance.json`` (needed to compare two runs; one run is measured
without it) and ``summary.json`` (not needed here). Only the columns used are read. Not-scored
episodes are kept only as counts per cause (``not_scored_cause``: world, database, provider,
sandbox, worker; ``unknown`` for records written before the column existed): they are excluded
from every rate. Each scenario keeps its scored episodes' repeat indices, so two runs can be
paired episode by episode when counting flips. K, the repeats, counts scored episodes only: an
extra not-scored episode is no repeat.

Only root episodes (begun at ``reset``) are measured. A fork or restore (its record's ``parent_episode`` and
``parent_kind``; :func:`rehearsal_env.records._record.episode_kind` decides, the same rule readiness, compare and
improve use) is a training and search tool, never evidence about the agent: it is left out before anything is
counted, and counted apart per kind (:attr:`AgentRun.not_root`). Records written before those columns existed
are root episodes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.dataset as ds

from ..records import MixedRuns, PublicKey, RecordsDamaged, sealed_parts
from ..records._attempts import NOT_SCORED, OPEN, row_field, settle
from ..records._record import ROOT_EPISODE, episode_kind

OUTCOMES = ("verified", "not_achieved", "rule_violated", "not_scored")
"""The outcome values an episode may have."""
REQUIRED_COLUMNS = ("scenario", "split", "agent", "repeat", "outcome", "reward", "false_completion")
"""Columns ``episodes.parquet`` must have."""
OPTIONAL_COLUMNS = ("not_scored_cause", "agent_version", "parent_episode", "parent_kind", "attempt", "retry_replayed")
"""Columns read when present."""
UNKNOWN_CAUSE = "unknown"
"""The cause of a not-scored episode whose record names none (written before causes were recorded)."""
METRICS = ("verified", "rule_violated", "false_completion", "reward")
"""Per-episode values kept for every scored episode: three 0/1 outcomes and the reward."""


class RunError(ValueError):
    """A run directory that cannot be read as the runner's output."""


@dataclass(frozen=True, eq=False)
class ScenarioEpisodes:
    """The scored episodes of one scenario for one agent."""

    scenario: str
    """Scenario id."""
    split: str
    """train / dev / holdout."""
    repeats: np.ndarray
    """Repeat index of each scored episode (0-based), sorted."""
    values: Mapping[str, np.ndarray] = field(repr=False)
    """Metric name -> per-episode value aligned with ``repeats`` (reward is NaN where missing)."""
    not_scored: int
    """Episodes of this scenario that were not scored (excluded)."""
    not_scored_causes: Mapping[str, int] = field(default_factory=dict)
    """Cause -> not-scored episodes of this scenario."""
    open: np.ndarray | None = None
    """Aligned with ``repeats``: True where the scored episode is a retry that did not replay the attempt it retried
    (:mod:`rehearsal_env.records._attempts`): the headline counts it, the not-scored bounds fill it (None: none)."""
    open_causes: Mapping[str, int] = field(default_factory=dict)
    """Cause of the first failed attempt -> this scenario's open episodes."""
    retried: int = 0
    """Retries played for this scenario's episodes (attempts beyond the first)."""

    def bounded(self, metric: str, fill: float) -> np.ndarray:
        """The values of ``metric`` the not-scored bounds read: each open episode and each not-scored one is
        ``fill``, the others their scored value (missing values left out)."""
        v = self.values[metric]
        keep = ~np.isnan(v)
        opened = self.open[keep] if self.open is not None else np.zeros(int(keep.sum()), dtype=bool)
        return np.concatenate([np.where(opened, fill, v[keep]), np.full(self.not_scored, fill)])

    @property
    def n_open(self) -> int:
        """Episodes the bounds fill: the not-scored ones and the open ones."""
        return self.not_scored + (int(self.open.sum()) if self.open is not None else 0)

    def series(self, metric: str) -> tuple[np.ndarray, np.ndarray]:
        """(repeat indices, values) of ``metric``, without missing values."""
        v = self.values[metric]
        keep = ~np.isnan(v)
        return self.repeats[keep], v[keep]


@dataclass(frozen=True, eq=False)
class AgentRun:
    """One agent's episodes in one run directory."""

    run: str
    """The run directory, as given."""
    agent: str
    """The checkpoint: the agent profile's name and version, ``NAME@VERSION`` (just ``NAME`` when the
    records carry no version)."""
    scenarios: tuple[ScenarioEpisodes, ...]
    """Per scenario, sorted by scenario id."""
    repeats: int
    """K: the most scored episodes any scenario has (not-scored episodes are no repeats)."""
    provenance: Mapping[str, Any] | None = field(repr=False)
    """The run's provenance blob; None when the run directory has no provenance.json."""
    not_root: Mapping[str, int] = field(default_factory=dict)
    """Kind (``fork``, ``restore``) -> this agent's episodes left out because they are not root episodes (never
    evidence about the agent); empty when there were none."""

    def per_scenario(self, metric: str) -> dict[str, np.ndarray]:
        """Scenario id -> that scenario's values of ``metric`` (scenarios without values left out)."""
        out = {}
        for s in self.scenarios:
            v = s.series(metric)[1]
            if len(v):
                out[s.scenario] = v
        return out

    def scored_counts(self, metric: str = "verified") -> np.ndarray:
        """K_j: scored values of ``metric`` per scenario that has any."""
        return np.array([len(v) for v in self.per_scenario(metric).values()], dtype=int)

    @property
    def n_episodes(self) -> int:
        """Every episode of this agent, scored or not."""
        return self.n_scored + self.n_not_scored

    @property
    def not_scored_causes(self) -> dict[str, int]:
        """Cause -> not-scored episodes, most frequent first."""
        out: dict[str, int] = {}
        for s in self.scenarios:
            for cause, k in s.not_scored_causes.items():
                out[cause] = out.get(cause, 0) + k
        return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))

    @property
    def n_scored(self) -> int:
        return int(sum(len(s.repeats) for s in self.scenarios))

    @property
    def n_not_scored(self) -> int:
        return int(sum(s.not_scored for s in self.scenarios))

    @property
    def n_open(self) -> int:
        """Episodes the not-scored bounds fill: not scored, or scored by a retry that did not replay its attempt."""
        return int(sum(s.n_open for s in self.scenarios))

    @property
    def n_retried(self) -> int:
        """Retries played (attempts beyond each planned episode's first)."""
        return int(sum(s.retried for s in self.scenarios))

    @property
    def bound_causes(self) -> dict[str, int]:
        """Cause -> episodes the bounds fill (an open episode as ``CAUSE (retried, not replayed)``), most first."""
        out = dict(self.not_scored_causes)
        for s in self.scenarios:
            for cause, k in s.open_causes.items():
                key = f"{cause} (retried, not replayed)"
                out[key] = out.get(key, 0) + k
        return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))

    @property
    def missing_rewards(self) -> int:
        """Scored episodes whose reward is null (left out of the mean reward only)."""
        return int(sum(np.isnan(s.values["reward"]).sum() for s in self.scenarios))

    @property
    def splits(self) -> dict[str, int]:
        """Split -> number of scenarios."""
        out: dict[str, int] = {}
        for s in self.scenarios:
            out[s.split] = out.get(s.split, 0) + 1
        return dict(sorted(out.items()))


def load_run(path: str | Path, split: str | None = None,
             trusted: Mapping[str, PublicKey] | None = None) -> list[AgentRun]:
    """Every agent's episodes in run directory ``path`` (only scenarios of ``split`` if given), read only
    from a sealed run whose parts match its manifest (``trusted``: the keys whose seal is accepted,
    default the state home's trusted keys)."""
    root = Path(path)
    episodes = root / "episodes.parquet"
    if not episodes.exists():
        raise RunError(f"{root}: expected a run directory with episodes.parquet; {episodes} does not exist "
                       "(pass the directory the runner wrote)")
    if not episodes.is_dir():
        raise RunError(f"{episodes}: expected the directory of parts a run writes (with its manifest and "
                       "seal); a single Parquet file says nothing about who wrote it. Measure the run "
                       "directory `rehearsal run` wrote")
    try:
        # the parts against their manifest (both ways), one run id, and the run's seal by a trusted key
        source = [str(p) for p in sealed_parts(root, trusted)]
        dataset = ds.dataset(source, format="parquet")
    except (RecordsDamaged, MixedRuns) as e:
        raise RunError(str(e)) from e
    except (OSError, ValueError) as e:
        raise RunError(f"{episodes}: expected Parquet episode records; pyarrow cannot read them ({e})") from e
    names = dataset.schema.names
    missing = [c for c in REQUIRED_COLUMNS if c not in names]
    if missing:
        raise RunError(f"{episodes}: expected columns {list(REQUIRED_COLUMNS)}; missing {missing} "
                       f"(has {names}); regenerate the run with the current runner")
    columns = [*REQUIRED_COLUMNS, *(c for c in OPTIONAL_COLUMNS if c in names)]
    rows = dataset.to_table(columns=columns).to_pylist()
    if "run_id" in names:
        run_ids = sorted(set(dataset.to_table(columns=["run_id"]).column("run_id").to_pylist()))
        if len(run_ids) > 1:
            raise RunError(f"{episodes}: expected the records of one run; found run ids {run_ids} (two runs wrote "
                           "into one directory). Measure each run from its own directory")
    provenance = read_provenance(root)
    bad = sorted({str(r["outcome"]) for r in rows} - set(OUTCOMES))
    if bad:
        raise RunError(f"{episodes}: expected outcomes in {list(OUTCOMES)}; found {bad}")
    if split is not None:
        rows = [r for r in rows if r["split"] == split]
        if not rows:
            splits = sorted(set(dataset.to_table(columns=["split"]).column("split").to_pylist()))
            raise RunError(f"{episodes}: no episodes in split {split!r}; leave out --split or choose "
                           f"one of {splits}")
    if not rows:
        raise RunError(f"{episodes}: expected at least one episode; the file has no rows")
    not_root: dict[str, dict[str, int]] = {}
    roots = []
    for r in rows:
        r["checkpoint"] = checkpoint_of(r)
        kind = episode_kind(r.get("parent_episode"), r.get("parent_kind"))
        if kind == ROOT_EPISODE:
            roots.append(r)
        else:
            counts = not_root.setdefault(r["checkpoint"], {})
            counts[kind] = counts.get(kind, 0) + 1
    if not roots:
        found = ", ".join(f"{k} {kind}(s)" for kind, k in _kinds(not_root).items())
        raise RunError(f"{episodes}: expected root episodes (begun at reset) to measure; found no root episode, only "
                       f"{found}: a fork or restore is never evidence about the agent. Measure a run of episodes "
                       "played from reset")
    agents = sorted({r["checkpoint"] for r in roots})
    return [_agent_run(str(path), a, [r for r in roots if r["checkpoint"] == a], provenance, not_root.get(a, {}))
            for a in agents]


def _kinds(by_agent: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for counts in by_agent.values():
        for kind, k in counts.items():
            out[kind] = out.get(kind, 0) + k
    return dict(sorted(out.items()))


def checkpoint_of(row: Mapping[str, Any]) -> str:
    """What measure calls a checkpoint: ``agent@agent_version`` (each version of a profile apart)."""
    version = row.get("agent_version")
    return f"{row['agent']}@{version}" if version else str(row["agent"])


def read_provenance(root: Path) -> dict[str, Any] | None:
    """The provenance blob of a run directory; None when absent, an error when unusable."""
    path = root / "provenance.json"
    if not path.is_file():
        return None
    try:
        blob = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise RunError(f"{path}: expected a JSON object; it does not parse ({e})") from e
    if not isinstance(blob, dict):
        raise RunError(f"{path}: expected a JSON object; found {type(blob).__name__}")
    return blob


def _agent_run(run: str, agent: str, rows: list[dict[str, Any]],
               provenance: dict[str, Any] | None, not_root: Mapping[str, int]) -> AgentRun:
    by_scenario: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_scenario.setdefault(str(r["scenario"]), []).append(r)
    scenarios = []
    for name in sorted(by_scenario):
        try:
            slots = sorted(settle(by_scenario[name], row_field), key=lambda e: int(e.record["repeat"]))
        except ValueError as exc:
            raise RunError(f"{run}: agent {agent!r}: {exc}") from exc
        eps = [e.record for e in slots]
        reps = [int(r["repeat"]) for r in eps]
        if len(set(reps)) != len(reps):
            raise RunError(f"{run}: agent {agent!r}, scenario {name!r}: expected each repeat once; "
                           f"repeat indices {reps} repeat (the run directory mixes two runs?)")
        standing = [e for e in slots if e.status != NOT_SCORED]
        scored = [e.record for e in standing]
        splits = {str(r["split"]) for r in eps}
        if len(splits) != 1:
            raise RunError(f"{run}: scenario {name!r}: expected one split; found {sorted(splits)}")
        values = {
            "verified": np.array([r["outcome"] == "verified" for r in scored], dtype=float),
            "rule_violated": np.array([r["outcome"] == "rule_violated" for r in scored], dtype=float),
            "false_completion": np.array([bool(r["false_completion"]) for r in scored], dtype=float),
            "reward": np.array([np.nan if r["reward"] is None else float(r["reward"]) for r in scored]),
        }
        causes: dict[str, int] = {}
        for r in eps:
            if r["outcome"] == "not_scored":
                cause = str(r.get("not_scored_cause") or UNKNOWN_CAUSE)
                causes[cause] = causes.get(cause, 0) + 1
        opened: dict[str, int] = {}
        for e in standing:
            if e.status == OPEN:
                cause = str(e.superseded[0].get("not_scored_cause") or UNKNOWN_CAUSE)
                opened[cause] = opened.get(cause, 0) + 1
        scenarios.append(ScenarioEpisodes(
            scenario=name,
            split=splits.pop(),
            repeats=np.array([int(r["repeat"]) for r in scored], dtype=int),
            values=values,
            not_scored=len(eps) - len(scored),
            not_scored_causes=causes,
            open=np.array([e.status == OPEN for e in standing], dtype=bool),
            open_causes=opened,
            retried=sum(e.attempts - 1 for e in slots),
        ))
    repeats = max(len(s.repeats) for s in scenarios)
    return AgentRun(run=run, agent=agent, scenarios=tuple(scenarios), repeats=repeats, provenance=provenance,
                    not_root=dict(sorted(not_root.items())))


def select_agent(runs: list[AgentRun], agent: str | None, where: str) -> AgentRun:
    """The one agent of a run, or the named one: ``NAME@VERSION``, or ``NAME`` when the run has one
    version of it (an error listing the agents otherwise)."""
    names = [r.agent for r in runs]
    if agent is None:
        if len(runs) != 1:
            raise RunError(f"{where}: expected one agent to compare; found {names}; "
                           "choose one with --agent NAME[@VERSION]")
        return runs[0]
    matches = [r for r in runs if r.agent == agent] or [r for r in runs if r.agent.split("@")[0] == agent]
    if len(matches) == 1:
        return matches[0]
    found = "several versions" if matches else "none"
    raise RunError(f"{where}: expected one agent {agent!r}; found {found}; the run has {names} "
                   "(choose with --agent NAME@VERSION)")
