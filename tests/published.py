"""Publishing a world version's content for tests, without the validation plays of ``rehearsal world build``.

``rehearsal eval rescore --recheck`` and the improvement step read only a published version's content
(its scenarios, their splits and checks), so tests publish that content as ``build_and_publish`` would,
with no validation entries: building shop's version plays every scenario (about a minute here).
"""

from __future__ import annotations

from pathlib import Path

from rehearsal_env.versions import (
    VALIDATOR_VERSION,
    WorldVersion,
    content_hashes,
    publish,
    world_content,
    world_version,
)
from rehearsal_env.worlds import World


def publish_content(world: World, root: Path) -> Path:
    """Publish ``world``'s current content under ``root``; return the version's folder."""
    content = world_content(world)
    version = WorldVersion(id=world_version(world), world=world.name, part_hashes=content_hashes(content),
                           data_anchor=world.data_anchor.isoformat(), clock=world.now, backend="sqlite",
                           validator=VALIDATOR_VERSION, validation=(), isolation=())
    return publish(version, content, root)[0]
