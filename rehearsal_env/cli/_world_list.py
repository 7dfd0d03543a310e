"""``rehearsal world list``: each world's name, scenario count and description, quickly.

Loading a world to count its scenarios can take seconds (an imported tau2 world is rebuilt from its source
and replays every gold solution), so what the list shows is cached in the state home
(``$REHEARSAL_HOME/cache/world_list.json``) under the world's *identity*: what the world is made from.

- every world: the package's code (each ``rehearsal_env`` source file's path, size and modification time);
- an imported world: its record in ``imported.json`` (the source folder and the pinned hash of each file);
- a world from a folder: its folder and each file's path, size and modification time.

A world whose identity changed is loaded again (and its line cached); one that cannot be loaded is listed
with why, never cached. A state home that cannot be written only loses the cache.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from .._atomic import write_atomic
from .._home import home
from ..worlds import folder_worlds, imported_worlds, load_world, registry_problems, world_names

PACKAGE = Path(__file__).resolve().parents[1]
CACHE_VERSION = 1
"""Bumped when what a cached line holds changes."""


def cache_file() -> Path:
    """``$REHEARSAL_HOME/cache/world_list.json``."""
    return home() / "cache" / "world_list.json"


def _files(root: Path, pattern: str) -> list[tuple[str, int, int]]:
    out = []
    for path in sorted(root.rglob(pattern)):
        if path.is_file() and not any(part.startswith(".") for part in path.relative_to(root).parts):
            stat = path.stat()
            out.append((str(path.relative_to(root)), stat.st_size, stat.st_mtime_ns))
    return out


def code_fingerprint() -> str:
    """The package's source files (path, size, modification time), hashed."""
    return hashlib.sha256(json.dumps(_files(PACKAGE, "*.py")).encode()).hexdigest()


def identity(name: str, code: str) -> str:
    """What world ``name`` is made from, hashed (see the module docstring)."""
    made: dict[str, Any] = {"name": name, "code": code, "home": str(home())}
    imported = imported_worlds().get(name)
    folders = folder_worlds()
    if imported is not None:
        made["imported"] = {k: v for k, v in imported.items() if k != "imported_at"}
    elif name in folders:
        folder = Path(folders[name])
        made["folder"] = [str(folder.resolve()), _files(folder, "*")]
    return hashlib.sha256(json.dumps(made, sort_keys=True, default=str).encode()).hexdigest()


def _read_cache() -> dict[str, Any]:
    try:
        data = json.loads(cache_file().read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("version") != CACHE_VERSION or not isinstance(data.get("worlds"), dict):
        return {}
    return dict(data["worlds"])


def _write_cache(worlds: dict[str, Any]) -> None:
    try:
        cache_file().parent.mkdir(parents=True, exist_ok=True)
        write_atomic(cache_file(), json.dumps({"version": CACHE_VERSION, "worlds": worlds}, indent=1,
                                              sort_keys=True))
    except OSError:
        pass  # a read-only home: the list is right, only slower next time


def listing() -> list[tuple[str, int | None, str]]:
    """``(name, scenario count, description)`` per world; a world that cannot be loaded has count None and
    why as its description."""
    code = code_fingerprint()
    cached = _read_cache()
    kept: dict[str, Any] = {}
    out: list[tuple[str, int | None, str]] = []
    for name in world_names():
        key = identity(name, code)
        hit = cached.get(name)
        if isinstance(hit, dict) and hit.get("identity") == key:
            kept[name] = hit
            out.append((name, int(hit["scenarios"]), str(hit["description"])))
            continue
        try:  # one world that cannot load is reported; the others are still listed
            world = load_world(name)
            count = len(world.scenarios())
        except (KeyError, ValueError, OSError, ImportError) as exc:
            why = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
            out.append((name, None, why))
            continue
        kept[name] = {"identity": key, "scenarios": count, "description": world.description}
        out.append((name, count, world.description))
    if kept != cached:
        _write_cache(kept)
    return out


def handle_list(args: argparse.Namespace) -> int:
    for name, count, description in listing():
        if count is None:
            print(f"{name:<12}    - cannot be loaded: {description}")
        else:
            print(f"{name:<12} {count:>4} scenarios  {description}")
    for problem in registry_problems():
        print(f"rehearsal: warning: {problem}", file=sys.stderr)
    return 0


__all__ = ["cache_file", "code_fingerprint", "handle_list", "identity", "listing"]
