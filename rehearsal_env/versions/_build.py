"""Build a world version (validate every scenario, measure the facts, publish) and recheck a published one."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ..backends import digest, open_database
from ..identity import content_hashes, version_id_of, world_content
from ..worlds import World, backend_for
from ._isolation import clock_fact, network_facts, reset_fact
from ._manifest import VALIDATOR_VERSION, Manifest, ScenarioValidation, Withdrawal, WorldVersion
from ._store import load_manifest, log_build, publish, withdraw
from ._validate import validate_scenario


@dataclass(frozen=True)
class BuildResult:
    """What ``rehearsal world build`` did."""

    version: WorldVersion
    """The version built."""
    path: Path
    """Its folder."""
    published: bool
    """True when this build wrote it; False when an identical version was already published."""
    seconds: float
    """Wall-clock seconds the build took (diagnostic; not part of the version)."""


@dataclass(frozen=True)
class RecheckResult:
    """What ``rehearsal world recheck`` found."""

    manifest: Manifest
    """The version as it stands after the recheck."""
    rechecked: tuple[str, ...]
    """The scenarios replayed (those in use before the recheck)."""
    withdrawn: tuple[Withdrawal, ...]
    """The scenarios this recheck withdrew."""
    seconds: float
    """Wall-clock seconds the recheck took (diagnostic)."""


def build_version(world: World, *, backend: str | None = None) -> WorldVersion:
    """Validate every scenario of ``world`` and measure the reset and isolation facts (nothing is written)."""
    backend = backend or backend_for(world)
    content = world_content(world)
    hashes = content_hashes(content)
    db = open_database(world, backend)
    try:
        seeded = digest(db)
        validations: list[ScenarioValidation] = []
        stamps: set[str] = set()
        episodes = 0
        for scenario in world.scenarios():
            validation, written = validate_scenario(world, scenario, db)
            validations.append(validation)
            stamps |= written
            episodes += 3 + len(scenario.wrong)
        facts = (reset_fact(world, db, seeded, episodes, backend),
                 clock_fact(world, stamps, validations), *network_facts(db, backend))
    finally:
        db.close()
    return WorldVersion(id=version_id_of(hashes), world=world.name, part_hashes=hashes,
                        data_anchor=world.data_anchor.isoformat(), clock=world.now, backend=backend,
                        validator=VALIDATOR_VERSION, validation=tuple(validations), isolation=facts)


def build_and_publish(world: World, root: str | Path | None = None, *,
                      backend: str | None = None) -> BuildResult:
    """Build ``world``'s version and publish it under ``root`` (see :mod:`._store`)."""
    started = time.perf_counter()
    version = build_version(world, backend=backend)
    path, published = publish(version, world_content(world), root)
    seconds = time.perf_counter() - started
    log_build(path, {"built_at_wall_clock": _wall_clock(), "seconds": round(seconds, 3),
                     "published": published, "kept_out": len(version.kept_out)})
    return BuildResult(version, path, published, seconds)


def recheck(world: World, root: str | Path | None = None, *, backend: str | None = None) -> RecheckResult:
    """Replay every scenario in use in ``world``'s published version; withdraw the ones found unfair.

    A scenario is withdrawn when it now fails a validation check, or when its
    reference no longer reaches the published end state (the digest differs).

    Raises:
        NotPublished: the world's current version was never built.
    """
    started = time.perf_counter()
    backend = backend or backend_for(world)
    manifest = load_manifest(world, root=root)
    rechecked = manifest.in_use
    found: list[Withdrawal] = []
    recorded_at = _wall_clock()
    db = open_database(world, backend)
    try:
        for scenario_id in rechecked:
            now, _ = validate_scenario(world, world.scenario(scenario_id), db)
            reasons = list(now.reasons)
            published = manifest.version.validation_of(scenario_id).end_digest
            if now.end_digest != published:
                reasons.append(f"the reference no longer reaches the published end state "
                               f"(digest {str(now.end_digest)[:12]}, published {str(published)[:12]})")
            if reasons:
                found.append(Withdrawal(scenario_id, "; ".join(reasons), world.now, recorded_at, "recheck"))
    finally:
        db.close()
    if found:
        manifest = withdraw(manifest, found)
    return RecheckResult(manifest, rechecked, tuple(found), time.perf_counter() - started)


def withdraw_by_hand(world: World, scenario: str, reason: str, root: str | Path | None = None) -> Manifest:
    """Withdraw one scenario of ``world``'s published version for ``reason`` (a person judged it unfair)."""
    if not reason.strip():
        raise ValueError("a withdrawal needs a reason: say why a careful agent cannot pass the scenario")
    manifest = load_manifest(world, root=root)
    return withdraw(manifest, [Withdrawal(scenario, reason.strip(), world.now, _wall_clock(), "manual")])


def _wall_clock() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
