"""Building the provenance blob of a world under a reward profile and a clock.

The dataset hashes are the same part hashes the world version id is made of
(:func:`rehearsal_env.identity.content_hashes`), so ``dataset.catalog_hash``
and ``wv_...`` can never disagree about what the schema was.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from .._version import __version__
from ..clock import WORLD_ANCHOR
from ..identity import content_hashes, world_content, world_version
from ..rewards import load_profile
from ..worlds import World
from ._blob import PROVENANCE_FORMAT, Build, Capabilities, Dataset, Provenance, Suite
from ._catalog import catalog_problems

OUTCOME_PROFILE = "outcome"
"""The profile name of the plain outcome reward (1 verified, 0 not achieved, -1 rule violated)."""
OUTCOME_REWARD_VERSION = "outcome-1"
"""The outcome reward's contract version."""

_PACKAGE = Path(__file__).resolve().parents[1]
_HASHED_SUFFIXES = (".py", ".toml", ".sql", ".json", ".txt")


@functools.lru_cache(maxsize=1)
def binary_sha256() -> str:
    """SHA-256 over the installed package's files: every source and data file's path and bytes, sorted."""
    h = hashlib.sha256()
    files = sorted(p for p in _PACKAGE.rglob("*")
                   if p.is_file() and p.suffix in _HASHED_SUFFIXES and "__pycache__" not in p.parts)
    for path in files:
        h.update(path.relative_to(_PACKAGE).as_posix().encode() + b"\x00")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def reward_contract(profile: str | None) -> tuple[str, str]:
    """``(profile name, reward_version)`` of a profile (None: the outcome reward).

    Raises:
        ValueError: an unknown profile (``rewards.UnknownProfileError``), naming the known ones.
    """
    if profile is None or profile == OUTCOME_PROFILE:
        return OUTCOME_PROFILE, OUTCOME_REWARD_VERSION
    return profile, load_profile(profile).reward_version


def provenance_of(world: World, profile: str | None = None,
                  freeze_time_source: str | None = WORLD_ANCHOR) -> Provenance:
    """The provenance blob of ``world`` (already frozen at its day, see :mod:`rehearsal_env.clock`).

    Args:
        world: The world as served: its ``data_anchor`` is the day the clock reads.
        profile: The reward profile (None: the outcome reward).
        freeze_time_source: Who pinned the clock (see :mod:`rehearsal_env.clock`).
    """
    name, version = reward_contract(profile)
    return _provenance(world, name, version, freeze_time_source)


@functools.lru_cache(maxsize=64)
def _provenance(world: World, profile: str, reward_version: str, source: str | None) -> Provenance:
    hashes = content_hashes(world_content(world))
    problems = catalog_problems(world)

    return Provenance(
        format=PROVENANCE_FORMAT,
        world=world.name,
        world_version=world_version(world),
        reward_profile=profile,
        reward_version=reward_version,
        dataset=Dataset(catalog_hash=hashes["schema"], data_anchor=world.data_anchor.isoformat(),
                        seed_manifest_hash=hashes["seed_manifest"]),
        suite=Suite(version=world.suite_version, scenarios=len(world.scenarios())),
        capabilities=Capabilities(suite_fingerprint=hashes["scenarios"], catalog_match=not problems,
                                  catalog_problems=problems, freeze_time_source=source),
        build=Build(version=__version__, binary_sha256=binary_sha256()),
    )
