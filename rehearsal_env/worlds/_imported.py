"""Imported worlds: made at load time from data the user keeps elsewhere, recorded in a small state file.

``rehearsal import ...`` records each world it imports in
``$REHEARSAL_HOME/imported.json`` (default ``~/.rehearsal``): the world's name,
the factory that builds it (``"module:function"``, called as
``function(name, record)``) and what the importer needs (its source folder,
the pinned hashes). Nothing of the data is copied; the world is rebuilt from
the source in every process that loads it.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

from filelock import FileLock

from .._atomic import write_atomic
from .._home import home
from ._name import WORLD_NAME_RULE, check_world_name, is_world_name
from ._world import World


def imported_file() -> Path:
    """``$REHEARSAL_HOME/imported.json``, else ``~/.rehearsal/imported.json``."""
    return home() / "imported.json"


def imported_worlds() -> dict[str, dict[str, Any]]:
    """Every imported world's record, by name (empty when nothing was imported)."""
    path = imported_file()
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items()
            if is_world_name(k) and isinstance(v, dict) and isinstance(v.get("factory"), str)}


def imported_registry_problems() -> list[str]:
    """A line per entry of ``imported.json`` left out of :func:`imported_worlds`, saying why."""
    path = imported_file()
    try:
        data = json.loads(path.read_text()) if path.is_file() else {}
    except (OSError, ValueError) as exc:
        return [f"{path}: cannot be read ({type(exc).__name__}); no imported world is known until it is fixed"]
    if not isinstance(data, dict):
        return [f"{path}: expected {{name: record}}; no imported world is known until it is fixed"]
    return [f"{path}: entry {repr(k)[:80]} left out: "
            + (f"a world name is {WORLD_NAME_RULE}" if not is_world_name(k) else "its record names no factory")
            for k, v in data.items()
            if not (is_world_name(k) and isinstance(v, dict) and isinstance(v.get("factory"), str))]


def record_imported(name: str, record: dict[str, Any]) -> Path:
    """Record (or replace) the imported world ``name``; returns the state file's path."""
    check_world_name(name, "rehearsal import")
    path = imported_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock"):
        data = imported_worlds()
        data[name] = record
        write_atomic(path, json.dumps(data, indent=2, sort_keys=True))
    return path


def load_imported(name: str) -> World:
    """Build the imported world ``name`` with the factory its record names."""
    record = imported_worlds()[name]
    module, _, function = record["factory"].partition(":")
    world: World = getattr(importlib.import_module(module), function)(name, record)
    return world
