"""What a published world version says: per-scenario validation, reset and isolation facts, withdrawals.

Everything here is a frozen dataclass that round-trips through JSON
(:meth:`WorldVersion.to_dict` / :meth:`WorldVersion.from_dict`). A
:class:`WorldVersion` is written once and never changes; withdrawals are
kept beside it, append-only, and the two together make a :class:`Manifest`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

VALIDATOR_VERSION = 1
"""Version of the validation rules; recorded in every version so a reader knows which rules judged it."""

CHECK_LABELS: dict[str, str] = {
    "null_fails": "The checks fail when nothing is done",
    "reference_passes": "A reference solution passes",
    "wrong_fail": "Each wrong solution fails",
    "replay_same": "A replay gives the same result",
    "facts_reachable": "Every needed fact is reachable",
}
"""The validation checks, in page order, and their headings."""

FAILURE_LABELS: dict[str, str] = {
    "null_fails": "the checks do not fail when nothing is done",
    "reference_passes": "the reference solution does not pass",
    "wrong_fail": "a wrong solution is not caught",
    "replay_same": "a replay gives a different result",
    "facts_reachable": "a needed fact is not reachable",
}
"""What a failed check means, at the head of each reason a scenario is kept out or withdrawn."""


@dataclass(frozen=True)
class Finding:
    """The result of one validation check of one scenario."""

    passed: bool
    """Whether the scenario passed this check."""
    detail: str
    """What was measured, in words; when it failed, why."""


@dataclass(frozen=True)
class ScenarioValidation:
    """The validation of one scenario during a build (or a recheck)."""

    scenario: str
    """The scenario id."""
    split: str
    """train / dev / holdout."""
    category: str
    """What kind of work the scenario is."""
    null_fails: Finding
    """The null agent (says done at once) is not verified and breaks no hard rule."""
    reference_passes: Finding
    """The reference solution is verified."""
    wrong_fail: Finding
    """Every wrong solution is scored and not verified."""
    replay_same: Finding
    """The reference's actions, replayed after a reset with another seed, give the same verdict and digest."""
    facts_reachable: Finding
    """Every id the reference uses was shown before use (request, customer fact, tool result)."""
    end_digest: str | None
    """SHA-256 of the database after the reference solution (None when it could not run)."""

    @property
    def findings(self) -> dict[str, Finding]:
        """The five findings by check name, in :data:`CHECK_LABELS` order."""
        return {name: getattr(self, name) for name in CHECK_LABELS}

    @property
    def fair(self) -> bool:
        """Whether every check passed (the scenario goes into the version)."""
        return all(f.passed for f in self.findings.values())

    @property
    def reasons(self) -> tuple[str, ...]:
        """One line per failed check: its heading and what was found."""
        return tuple(f"{FAILURE_LABELS[n]}: {f.detail}" for n, f in self.findings.items() if not f.passed)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> ScenarioValidation:
        found = {name: Finding(**raw[name]) for name in CHECK_LABELS}
        return cls(scenario=raw["scenario"], split=raw["split"], category=raw["category"],
                   end_digest=raw.get("end_digest"), **found)


@dataclass(frozen=True)
class Fact:
    """One measured fact about resetting and isolating the world."""

    name: str
    """``reset``, ``clock`` or ``network``."""
    holds: bool | None
    """Whether it was shown to hold; None when it does not apply."""
    detail: str
    """What was measured, in words."""


@dataclass(frozen=True)
class Withdrawal:
    """A scenario taken out of use after publication; it stays in the record."""

    scenario: str
    """The scenario id."""
    reason: str
    """Why it is unfair, in words."""
    world_clock: str
    """The world's frozen clock at withdrawal (its data anchor at noon), ISO-8601."""
    recorded_at: str
    """The recheck's own wall-clock time (UTC, ISO-8601), recorded as such: not the world's clock."""
    by: str
    """``recheck`` (found by replaying) or ``manual`` (``rehearsal world withdraw``)."""


@dataclass(frozen=True)
class WorldVersion:
    """One published build of a world; written once, never changed."""

    id: str
    """``wv_`` and 16 hex characters of the content hash (see :func:`world_version`)."""
    world: str
    """The world's name."""
    part_hashes: Mapping[str, str]
    """SHA-256 of each content part (schema, seed_manifest, tools, tool_code, roles, scenarios, ...)."""
    data_anchor: str
    """The day the data is dated for (ISO-8601)."""
    clock: str
    """The world's frozen clock (ISO-8601)."""
    backend: str
    """The database backend the validation ran on."""
    validator: int
    """:data:`VALIDATOR_VERSION` of the rules that judged the scenarios."""
    validation: tuple[ScenarioValidation, ...]
    """Every scenario's validation, in the world's scenario order."""
    isolation: tuple[Fact, ...]
    """Reset and isolation facts, as measured during the build."""

    @property
    def scenarios(self) -> tuple[str, ...]:
        """The ids of the scenarios in the version (those that passed every check)."""
        return tuple(v.scenario for v in self.validation if v.fair)

    @property
    def kept_out(self) -> tuple[ScenarioValidation, ...]:
        """The scenarios that failed a check, with their findings."""
        return tuple(v for v in self.validation if not v.fair)

    def validation_of(self, scenario: str) -> ScenarioValidation:
        for v in self.validation:
            if v.scenario == scenario:
                return v
        raise KeyError(f"world version {self.id} has no scenario {scenario!r}; "
                       f"it has {len(self.validation)} (see `rehearsal world show {self.world}`)")

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["part_hashes"] = dict(sorted(self.part_hashes.items()))
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> WorldVersion:
        return cls(id=raw["id"], world=raw["world"], part_hashes=dict(raw["part_hashes"]),
                   data_anchor=raw["data_anchor"], clock=raw["clock"], backend=raw["backend"],
                   validator=raw["validator"],
                   validation=tuple(ScenarioValidation.from_dict(v) for v in raw["validation"]),
                   isolation=tuple(Fact(**f) for f in raw["isolation"]))


@dataclass(frozen=True)
class Manifest:
    """A published version as it stands now: the immutable version plus its withdrawals."""

    version: WorldVersion
    """The version as published."""
    withdrawn: tuple[Withdrawal, ...] = ()
    """Scenarios withdrawn since, oldest first."""
    path: Path | None = field(default=None, compare=False)
    """The version's folder, when it was read from disk."""

    @property
    def withdrawn_ids(self) -> frozenset[str]:
        return frozenset(w.scenario for w in self.withdrawn)

    @property
    def in_use(self) -> tuple[str, ...]:
        """Scenarios runs use: validated and not withdrawn."""
        return tuple(s for s in self.version.scenarios if s not in self.withdrawn_ids)

    def not_in_use(self) -> dict[str, str]:
        """``{scenario id: why}`` for every scenario runs must not use (kept out or withdrawn)."""
        out = {v.scenario: "kept out of " + self.version.id + ": " + "; ".join(v.reasons)
               for v in self.version.kept_out}
        for w in self.withdrawn:
            out[w.scenario] = f"withdrawn from {self.version.id} on {w.world_clock[:10]}: {w.reason}"
        return out
