"""The provenance blob: what a number was measured on, as frozen dataclasses and as JSON.

``rehearsal health`` returns it, every run directory holds it as
``provenance.json`` and every episode record carries it in its ``provenance``
column. The JSON form is :func:`dataclasses.asdict` of :class:`Provenance`
(nested objects ``dataset``, ``suite``, ``capabilities``, ``build``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

PROVENANCE_FORMAT = 1
"""Version of this layout (a field added or renamed bumps it)."""


@dataclass(frozen=True)
class Dataset:
    """The rows the questions were asked about."""

    catalog_hash: str
    """SHA-256 of the world's schema (tables, columns, types, keys, indexes): the catalog."""
    data_anchor: str
    """ISO date the rows are dated for; the world's clock reads this day at noon."""
    seed_manifest_hash: str
    """SHA-256 of the provisioning that produced the rows (seed, anchor, row counts, row fingerprint)."""


@dataclass(frozen=True)
class Suite:
    """The generator of the scenarios."""

    version: str
    """``World.suite_version``: bumped whenever the scenario generator changes."""
    scenarios: int
    """How many scenarios the suite has (all splits)."""


@dataclass(frozen=True)
class Capabilities:
    """What the served world can be trusted to do."""

    suite_fingerprint: str
    """SHA-256 of every scenario as generated (request, checks, solutions, faults): the exact set of tasks."""
    catalog_match: bool
    """Whether the suite describes the world it is served on: every check, oracle, scope, role and tool
    it names exists in the catalog (checks are compiled against the schema)."""
    catalog_problems: tuple[str, ...]
    """Why ``catalog_match`` is false, one line per problem (empty when it is true)."""
    freeze_time_source: str | None
    """Who pinned the clock: ``--freeze-time``, ``RunConfig.freeze_time``, ``RehearsalEnv(freeze_time=...)``,
    or ``world.data_anchor`` (the world's own anchor); None if nobody did."""


@dataclass(frozen=True)
class Build:
    """Which code produced the number."""

    version: str
    """``rehearsal_env.__version__``."""
    binary_sha256: str
    """SHA-256 over the installed package's files (path and bytes of every source and data file)."""


@dataclass(frozen=True)
class Provenance:
    """Everything needed to decide whether two rewards can be compared."""

    format: int
    """Layout version of this blob (:data:`PROVENANCE_FORMAT`)."""
    world: str
    """The world's registered name."""
    world_version: str
    """The world version id (``wv_`` and 16 hex characters; see :mod:`rehearsal_env.versions`)."""
    reward_profile: str
    """The profile rewards were computed under: ``benchmark``, ``rl``, or ``outcome`` (1 / 0 / -1)."""
    reward_version: str
    """The scoring contract's version: different versions are different measurements."""
    dataset: Dataset
    """The schema and the rows."""
    suite: Suite
    """The scenario generator."""
    capabilities: Capabilities
    """The exact tasks, whether they fit the world, and the clock."""
    build: Build
    """Which code produced the number: the package version and a hash of its files."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON blob (tuples as lists)."""
        blob = asdict(self)
        blob["capabilities"]["catalog_problems"] = list(self.capabilities.catalog_problems)
        return blob

    def with_reward(self, profile: str, version: str) -> Provenance:
        """The same provenance under another reward profile (what rescoring writes)."""
        return replace(self, reward_profile=profile, reward_version=version)


_PARTS: dict[str, type] = {"dataset": Dataset, "suite": Suite, "capabilities": Capabilities, "build": Build}


def provenance_from_dict(blob: Mapping[str, Any]) -> Provenance:
    """A :class:`Provenance` from its JSON blob.

    Raises:
        ValueError: naming the missing or unexpected keys, so an old or foreign blob is not misread.
    """
    expected = {f.name for f in fields(Provenance)}
    if set(blob) != expected:
        raise ValueError(f"expected a provenance blob with keys {sorted(expected)}; missing "
                         f"{sorted(expected - set(blob))}, unexpected {sorted(set(blob) - expected)}. "
                         "Regenerate it with `rehearsal health` or a current runner")
    values: dict[str, Any] = dict(blob)
    for key, cls in _PARTS.items():
        part = dict(blob[key])
        want = {f.name for f in fields(cls)}
        if set(part) != want:
            raise ValueError(f"expected provenance.{key} with keys {sorted(want)}; got {sorted(part)}")
        if key == "capabilities":
            part["catalog_problems"] = tuple(part["catalog_problems"])
        values[key] = cls(**part)
    return Provenance(**values)
