"""Reset and isolation facts, measured during a build: reset, clock, network.

* **reset**: a freshly seeded database's digest is taken before validation;
  after every validation episode has run on the same database, one more
  ``reset()`` must reach that digest again, and so must a second database
  opened from scratch.
* **clock**: the world's clock is its data anchor. Every timestamp that the
  reference solutions wrote must be the frozen clock's day or earlier and never
  today's wall-clock date (unless that is the anchor). The replays of the
  validated scenarios, run later by the wall clock, reached the same digests.
* **network**: for the embedded database there is no application network to
  cut off; the fact says "not applicable" rather than pretending.

Details name only frozen values (digests, the world's clock, counts), so two
builds at different wall-clock times write the same facts.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from ..backends import Database, digest, open_database
from ..worlds import World
from ._manifest import Fact, ScenarioValidation

NETWORK_NOT_APPLICABLE = "not applicable: embedded database, no application network"


def reset_fact(world: World, db: Database, before: str, episodes: int, backend: str = "sqlite") -> Fact:
    """After ``episodes`` episodes on ``db``, does a reset reach the digest ``before`` taken at seeding?"""
    db.reset()
    after = digest(db)
    fresh_db = open_database(world, backend)
    try:
        fresh = digest(fresh_db)
    finally:
        fresh_db.close()
    if after == before == fresh:
        return Fact("reset", True, f"after {episodes} validation episodes on one database, reset() reached "
                    f"digest {before[:16]}, the same as at seeding and as a database seeded from scratch")
    return Fact("reset", False, f"digest at seeding {before[:16]}, after {episodes} episodes and reset() "
                f"{after[:16]}, seeded from scratch {fresh[:16]}: a reset does not restore the snapshot")


def clock_fact(world: World, stamps: Iterable[str], validations: Iterable[ScenarioValidation],
               today: str | None = None) -> Fact:
    """Is the clock frozen at the data anchor? (see the module docstring)."""
    today = today or datetime.now(UTC).date().isoformat()
    anchor = world.data_anchor.isoformat()
    found = sorted(set(stamps))
    later = [s for s in found if s[:10] > anchor]
    wall = [s for s in found if s[:10] == today and today != anchor]
    replays = [v for v in validations if v.fair]
    if later or wall:
        return Fact("clock", False, f"the reference solutions wrote timestamps after the frozen clock "
                    f"{world.now} or on the wall-clock date: {', '.join((later + wall)[:3])}")
    shown = ", ".join(found[:2]) + (", ..." if len(found) > 2 else "")
    written = (f"every timestamp the reference solutions wrote is at or before it ({len(found)} distinct: "
               f"{shown})" if found else "the reference solutions wrote no timestamps")
    return Fact("clock", True, f"frozen at {world.now} (the data anchor); {written}; "
                f"the {len(replays)} validated scenarios' replays, run later by the wall clock, "
                "reached the same digests")


def network_fact(backend: str) -> Fact:
    """Only sandboxed applications have a network to cut off; the embedded database has none."""
    return Fact("network", None, NETWORK_NOT_APPLICABLE if backend == "sqlite"
                else f"not measured: the {backend} backend runs no application network of its own")


def network_facts(db: Database, backend: str) -> tuple[Fact, ...]:
    """A sandbox measures its own isolation and clock (``isolation_facts``); other backends state one fact."""
    measure = getattr(db, "isolation_facts", None)
    if measure is None:
        return (network_fact(backend),)
    return tuple(Fact(f"sandbox {f.name}", f.holds, f.detail) for f in measure())
