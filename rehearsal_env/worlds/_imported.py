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
    except ValueError:
        return {}
    return {k: v for k, v in data.items() if isinstance(v, dict) and isinstance(v.get("factory"), str)}


def record_imported(name: str, record: dict[str, Any]) -> Path:
    """Record (or replace) the imported world ``name``; returns the state file's path."""
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
