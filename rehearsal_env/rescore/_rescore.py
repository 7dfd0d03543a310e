"""Re-grading a stored run under a reward profile, from its episode records alone.

No database, application or model provider is touched: the new reward of an
episode is a pure function of what its record stores (the outcome reward, or
the profile applied to the stored reward components). Rescoring under the
contract the run was scored with reproduces its rewards exactly; any
difference is reported, and means the scoring code changed without its
``reward_version`` changing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from ..provenance import OUTCOME_PROFILE, provenance_from_dict, reward_contract
from ..records import (
    EPISODES_DIR,
    EpisodeRecord,
    PublicKey,
    read_records,
    seal_run,
    write_bytes_atomic,
    write_part,
)
from ..rewards import Components, apply_profile, load_profile
from ..runner import summary_of
from ._rebuild import Recheck, ScenarioChecks, published_checks, recheck, world_of

REPORT_FILE = "rescore.json"
"""The report a rescore writes next to its records."""


def reward_under(record: EpisodeRecord, profile: str) -> float | None:
    """The reward of a stored episode under ``profile`` (None when the episode was not scored).

    Raises:
        ValueError: the record lacks the reward components a profile needs, saying what to do.
    """
    if record.outcome_reward is None:
        return None
    if profile == OUTCOME_PROFILE:
        return record.outcome_reward
    if not record.reward_components:
        raise ValueError(f"episode {record.scenario} #{record.repeat} has no stored reward components, so profile "
                         f"{profile!r} cannot be applied to it; rescore under 'outcome', or rerun with a build "
                         "that records reward components")
    components = Components.from_values({c.name: c.value for c in record.reward_components})
    return apply_profile(load_profile(profile), components).reward


def rescore_records(records: Sequence[EpisodeRecord], profile: str) -> list[EpisodeRecord]:
    """The records with ``reward`` and ``provenance.reward_*`` under ``profile``; nothing else changes."""
    name, version = reward_contract(profile)
    return [replace(r, reward=reward_under(r, name), provenance=r.provenance.with_reward(name, version))
            for r in records]


@dataclass(frozen=True)
class RescoreReport:
    """What a rescore did and found."""

    run_dir: str
    """The stored run."""
    out: str
    """Where the rescored records were written."""
    episodes: int
    """Episodes rescored."""
    scored: int
    """Of those, episodes with a reward (not ``not_scored``)."""
    from_profile: str
    """The profile the run was scored with."""
    from_reward_version: str
    """Its reward version."""
    profile: str
    """The profile rescored under."""
    reward_version: str
    """Its reward version."""
    same_contract: bool
    """Same profile and reward version as the run: every reward must come out identical."""
    identical: int
    """Episodes whose rescored reward equals the stored one exactly."""
    changed: tuple[str, ...]
    """``scenario #repeat (agent): stored -> rescored`` for every reward that changed."""
    mean_reward_before: float | None
    """Mean stored reward of the scored episodes."""
    mean_reward_after: float | None
    """Mean rescored reward of the scored episodes."""
    rechecked: int
    """Episodes whose end state was rebuilt and checks re-run (0 without ``recheck``)."""
    recheck_agree: int
    """Of those, episodes whose re-run verdict equals the stored one in every check."""
    recheck_differences: tuple[str, ...]
    """Every disagreement of a re-run with its record."""

    @property
    def ok(self) -> bool:
        """Identical rewards under the same contract, and every re-run verdict equal to the stored one."""
        return (not self.same_contract or not self.changed) and self.recheck_agree == self.rechecked

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def _mean(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


def _checked_provenance(run: Path, records: Sequence[EpisodeRecord]) -> dict[str, Any]:
    path = run / "provenance.json"
    if not path.is_file():
        raise FileNotFoundError(f"expected {path} next to {EPISODES_DIR}; it is missing. The records carry the "
                                "same blob: restore provenance.json from any record's provenance column")
    blob = json.loads(path.read_text())
    stamped = {json.dumps(r.provenance.to_dict(), sort_keys=True) for r in records}
    if stamped != {json.dumps(provenance_from_dict(blob).to_dict(), sort_keys=True)}:
        raise ValueError(f"{run}: expected every record to carry the run's provenance.json; they differ "
                         f"({len(stamped)} distinct blobs). The directory mixes runs: rescore each run on its own")
    return blob


def rescore_run(run_dir: str | Path, profile: str, out: str | Path | None = None, *,
                recheck_checks: bool = False, trusted: Mapping[str, PublicKey] | None = None,
                versions_root: str | Path | None = None) -> RescoreReport:
    """Rescore the run in ``run_dir`` under ``profile`` and write it to ``out``, sealed with this home's key.

    The run must be sealed by a ``trusted`` key (default: the state home's trusted keys).
    ``out`` (default ``RUN_DIR/rescore-PROFILE``) receives ``episodes.parquet/``,
    ``provenance.json``, ``summary.json`` and ``rescore.json``. With
    ``recheck_checks`` every episode's end state is rebuilt and the checks of the published
    world version it names (under ``versions_root``) are run on it.

    Raises:
        NotPublished: ``recheck_checks`` and a record's world version is not published here.
    """
    run = Path(run_dir)
    records = read_records(run, trusted)
    before = _checked_provenance(run, records)
    rescored = rescore_records(records, profile)
    target = Path(out) if out is not None else run / f"rescore-{rescored[0].provenance.reward_profile}"
    if target.resolve() == run.resolve():
        raise ValueError(f"--out {target} is the run directory itself; rescoring never overwrites the stored "
                         "records: choose another directory")
    changed = [f"{a.scenario} #{a.repeat} ({a.agent}): {a.reward} -> {b.reward}"
               for a, b in zip(records, rescored, strict=True) if a.reward != b.reward]
    checks: list[Recheck] = []
    if recheck_checks:
        worlds: dict[str, Any] = {}
        published: dict[tuple[str, str], dict[str, ScenarioChecks]] = {}
        for r in records:  # every version first: an unpublished one refuses before any work
            if (r.world, r.world_version) not in published:
                published[(r.world, r.world_version)] = published_checks(r.world, r.world_version, versions_root)
        for r in records:
            key = r.provenance.dataset.data_anchor
            if key not in worlds:
                worlds[key] = world_of(r)
            scenario = published[(r.world, r.world_version)].get(r.scenario)
            if scenario is None:
                checks.append(Recheck(r.scenario, r.agent, r.repeat, r.outcome, None,
                                      (f"scenario {r.scenario!r} is not in the published {r.world} "
                                       f"{r.world_version}",)))
                continue
            checks.append(recheck(r, scenario, worlds[key]))
    after = rescored[0].provenance
    report = RescoreReport(
        run_dir=str(run), out=str(target), episodes=len(records),
        scored=sum(r.outcome_reward is not None for r in records),
        from_profile=before["reward_profile"], from_reward_version=before["reward_version"],
        profile=after.reward_profile, reward_version=after.reward_version,
        same_contract=(before["reward_profile"], before["reward_version"]) == (after.reward_profile,
                                                                               after.reward_version),
        identical=len(records) - len(changed), changed=tuple(changed),
        mean_reward_before=_mean([r.reward for r in records]), mean_reward_after=_mean([r.reward for r in rescored]),
        rechecked=len(checks), recheck_agree=sum(c.agrees for c in checks),
        recheck_differences=tuple(f"{c.scenario} #{c.repeat} ({c.agent}): {d}" for c in checks
                                  for d in c.differences),
    )
    _write(target, rescored, after.to_dict(), report)
    return report


def _write(target: Path, records: Sequence[EpisodeRecord], provenance: dict[str, Any],
           report: RescoreReport) -> None:
    (target / EPISODES_DIR).mkdir(parents=True, exist_ok=True)
    for old in (target / EPISODES_DIR).glob("part-*.parquet"):
        old.unlink()
    write_part(target, records, 0)
    summary = {**summary_of(records), "rescored_from": report.run_dir}
    for name, body in (("provenance.json", provenance), ("summary.json", summary), (REPORT_FILE, report.to_dict())):
        write_bytes_atomic(target / name, (json.dumps(body, indent=2, sort_keys=True) + "\n").encode())
    seal_run(target)  # the rescored run, vouched for by whoever rescored it
