"""``make("world/scenario")`` and the Gymnasium registration ``rehearsal/<world>-v0``."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from ..worlds import builtin_world_names, load_world, world_names
from ._env import RehearsalEnv

ENV_VERSION = 0


def make(env_id: str, **kwargs: Any) -> RehearsalEnv:
    """The env of one scenario: ``make("shop/refund-item-0001", backend="sqlite")``.

    The bare id works with ``world=``: ``make("refund-item-0001", world="shop")``, as
    ``gymnasium.make("rehearsal/shop-v0", scenario=...)`` takes either form; a full id takes
    ``world=None`` or its own world's name too.

    Raises:
        ValueError: ``env_id`` is not ``WORLD/SCENARIO`` (or a bare id with ``world=``), or names
            another world than ``world=``.
        KeyError: an unknown world or scenario, with the closest matches.
    """
    given = kwargs.pop("world", None)
    if "/" not in env_id and given is not None:
        return RehearsalEnv(env_id, world=given, **kwargs)
    world_name, sep, scenario_id = env_id.partition("/")
    if sep and given is not None and given != world_name and getattr(given, "name", None) != world_name:
        raise ValueError(f"make({env_id!r}) names world {world_name!r}, but world={given!r} was given; "
                         "give the full id alone, or a bare scenario id with world=")
    if not sep or not scenario_id:
        raise ValueError(
            f"expected an id 'WORLD/SCENARIO' (e.g. 'shop/refund-item-0001'), or a bare id with world=, "
            f"got {env_id!r}; "
            f"worlds: {', '.join(world_names())}"
        )
    world = load_world(world_name)
    return RehearsalEnv(world.scenario(scenario_id), world, **kwargs)


def register_envs(*, builtin_only: bool = False) -> None:
    """Register ``rehearsal/<world>-v0`` with Gymnasium for every known world (``builtin_only``: the worlds
    that ship as packages, which reads no file; ``import rehearsal_env`` registers those)."""
    for name in builtin_world_names() if builtin_only else world_names():
        env_id = f"rehearsal/{name}-v{ENV_VERSION}"
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point="rehearsal_env.env:RehearsalEnv", kwargs={"world": name})
