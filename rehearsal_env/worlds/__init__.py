"""Worlds: built-in worlds are registered by name; ``load_world(name)`` returns one.

A world package (``rehearsal_env/worlds/<name>/``) has the same shape every
time: ``schema`` (tables), ``data`` (seed rows), ``tools``, ``scenarios``, and
an ``__init__`` whose docstring is the world's spec sheet and which builds the
:class:`World`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from ..schema import Column, Table, col
from ._imported import imported_worlds, load_imported, record_imported
from ._world import Policy, Role, World, _unknown

_BUILTIN = {"shop": "rehearsal_env.worlds.shop", "analytics": "rehearsal_env.worlds.analytics"}
_REGISTRY: dict[str, Callable[[], World]] = {}
_LOADED: dict[str, World] = {}


def register_world(name: str, factory: Callable[[], World]) -> None:
    """Register a world under ``name`` (a factory, so loading stays lazy)."""
    _REGISTRY[name] = factory
    _LOADED.pop(name, None)


def world_names() -> list[str]:
    """Every registered world's name."""
    return sorted({*_BUILTIN, *_REGISTRY, *imported_worlds()})


def load_world(name: str) -> World:
    """The registered world ``name`` (built once per process; worlds are immutable).

    Raises:
        KeyError: naming the known worlds and the closest match.
    """
    if name not in _REGISTRY and name in _BUILTIN:
        module = importlib.import_module(_BUILTIN[name])
        register_world(name, module.build_world)
    if name not in _REGISTRY and name in imported_worlds():  # made from the user's data (rehearsal import)
        register_world(name, lambda: load_imported(name))
    if name not in _REGISTRY:
        raise KeyError(_unknown("world", name, dict.fromkeys(world_names()), "rehearsal_env"))
    if name not in _LOADED:
        _LOADED[name] = _REGISTRY[name]()
    return _LOADED[name]


__all__ = ["Column", "Policy", "Role", "Table", "World", "col", "imported_worlds", "load_world", "record_imported",
           "register_world", "world_names"]
