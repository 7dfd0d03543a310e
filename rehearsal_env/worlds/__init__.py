"""Worlds: built-in worlds are registered by name; ``load_world(name)`` returns one.

A world package (``rehearsal_env/worlds/<name>/``) has the same shape every
time: ``schema`` (tables), ``data`` (seed rows), ``tools``, ``scenarios``, and
an ``__init__`` whose docstring is the world's spec sheet and which builds the
:class:`World`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from .._home import home
from ..schema import Column, Table, col
from ._folder import (
    CHILD_ENV,
    Application,
    ApplicationLimits,
    ApplicationSpec,
    WorldFolderError,
    add_world_folder,
    application_of,
    backend_for,
    folder_registry_problems,
    folder_worlds,
    is_world_folder,
    load_world_folder,
)
from ._imported import imported_registry_problems, imported_worlds, load_imported, record_imported
from ._name import WORLD_NAME, check_world_name, is_world_name
from ._world import Policy, Role, World, _unknown

_BUILTIN = {"shop": "rehearsal_env.worlds.shop", "analytics": "rehearsal_env.worlds.analytics"}
_REGISTRY: dict[str, Callable[[], World]] = {}
_LOADED: dict[str, World] = {}
_FROM_HOME: dict[tuple[str, str, str], World] = {}
"""Worlds the state home names (added folders, imported data), by (kind, name, where): read from the home on
every lookup, never copied into the process's registry, so a home that changes (another REHEARSAL_HOME, an
entry removed) is what the next lookup sees."""


def register_world(name: str, factory: Callable[[], World]) -> None:
    """Register a world under ``name`` (a factory, so loading stays lazy).

    Raises:
        ValueError: ``name`` is not a world name (:data:`WORLD_NAME`).
    """
    check_world_name(name, "register_world")
    _REGISTRY[name] = factory
    _LOADED.pop(name, None)


def builtin_world_names() -> list[str]:
    """The worlds that ship as Python packages (known without reading any file)."""
    return sorted(_BUILTIN)


def world_names() -> list[str]:
    """Every registered world's name (registry entries that cannot be used are left out:
    :func:`registry_problems` says which and why)."""
    return sorted({*_BUILTIN, *_REGISTRY, *folder_worlds(), *imported_worlds()})


def registry_problems() -> list[str]:
    """A line per entry of the state home's registry files (``worlds.json``, ``imported.json``) that was left
    out of :func:`world_names`, saying why; one bad entry never hides the others."""
    return [*folder_registry_problems(), *imported_registry_problems()]


def load_world(name: str) -> World:
    """The registered world ``name`` (built once per process; worlds are immutable).

    Raises:
        KeyError: naming the known worlds and the closest match.
    """
    if name not in _REGISTRY and name in _BUILTIN:
        module = importlib.import_module(_BUILTIN[name])
        register_world(name, module.build_world)
    if name in _REGISTRY:
        if name not in _LOADED:
            _LOADED[name] = _REGISTRY[name]()
        return _LOADED[name]
    folders = folder_worlds()
    if name in folders or is_world_folder(name):  # a world from a folder: by its added name, or its path
        folder = str(folders.get(name, name))
        key = ("folder", name, folder)
        if key not in _FROM_HOME:
            _FROM_HOME[key] = load_world_folder(folder)
        return _FROM_HOME[key]
    if name in imported_worlds():  # made from the user's data (rehearsal import)
        key = ("imported", name, str(home()))
        if key not in _FROM_HOME:
            _FROM_HOME[key] = load_imported(name)
        return _FROM_HOME[key]
    raise KeyError(_unknown("world", name, dict.fromkeys(world_names()), "rehearsal_env"))


__all__ = [
    "CHILD_ENV",
    "Application",
    "ApplicationLimits",
    "ApplicationSpec",
    "Column",
    "Policy",
    "Role",
    "Table",
    "WORLD_NAME",
    "World",
    "WorldFolderError",
    "add_world_folder",
    "application_of",
    "builtin_world_names",
    "backend_for",
    "check_world_name",
    "col",
    "folder_registry_problems",
    "folder_worlds",
    "imported_registry_problems",
    "imported_worlds",
    "is_world_folder",
    "is_world_name",
    "load_imported",
    "load_world",
    "load_world_folder",
    "record_imported",
    "register_world",
    "registry_problems",
    "world_names",
]
