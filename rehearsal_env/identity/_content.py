"""A world's content as canonical JSON, and the ``wv_`` id that hashes it.

The content is everything an outcome can depend on that a world declares:
its schema, the seed manifest (seed, data anchor, fingerprint of every seed
row, row counts), its tools (names, kinds, schemas, and a hash of the source
of the modules that implement them), roles, policies, every scenario as
generated, the files of a folder world (its ``world.toml``, application, data and scenarios)
and the reward profiles in ``configs/profiles/*.toml`` if present.
Equal content gives an equal id; any change to one of those parts gives a
new id. :func:`world_version` is cheap after the first call per world object.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import sys
from dataclasses import asdict
from typing import Any

from ..rewards import profiles_dir
from ..scenarios import scenario_dict
from ..tools import BUILTIN_TOOLS, Tool, retry_operation
from ..worlds import World

CONTENT_FORMAT = 1
"""Version of the content layout below; bumping it changes every id."""
VERSION_PREFIX = "wv_"
ID_HEX_CHARS = 16
"""Hex characters of the SHA-256 kept in the id (64 bits)."""


def canonical_json(value: Any) -> str:
    """``value`` as canonical JSON text: sorted keys, no spaces, non-JSON values as text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str, ensure_ascii=True)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def profile_hashes() -> dict[str, str]:
    """``{file name: sha256 of its bytes}`` of every ``*.toml`` reward profile (empty when there are none)."""
    folder = profiles_dir()
    if not folder.is_dir():
        return {}
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.glob("*.toml"))}


def _module_source_hash(module_name: str) -> str:
    """SHA-256 of a tool module's source (its name alone when the source cannot be read)."""
    module = sys.modules.get(module_name)
    try:
        source = inspect.getsource(module) if module is not None else module_name
    except (OSError, TypeError):
        source = module_name
    return sha256_text(source)


def _tool(t: Tool) -> dict[str, Any]:
    return {"name": t.name, "kind": t.kind, "description": t.description,
            "parameters": t.parameters, "module": getattr(t.fn, "__module__", None)}


@functools.lru_cache(maxsize=32)
def _world_parts(world: World) -> dict[str, Any]:
    """The world's own parts (profiles are added per call), cached per world object (worlds are immutable)."""
    every_tool = (*world.tools, *BUILTIN_TOOLS, retry_operation)
    modules = sorted({m for m in (getattr(t.fn, "__module__", None) for t in every_tool) if m})
    rows = world.seed_rows()
    parts: dict[str, Any] = {
        "format": CONTENT_FORMAT,
        "world": {"name": world.name, "description": world.description, "suite_version": world.suite_version},
        "schema": [asdict(t) for t in world.tables],
        "seed_manifest": {"seed": world.seed, "data_anchor": world.data_anchor.isoformat(),
                          "clock": world.now, "fingerprint": world.seed_fingerprint,
                          "rows": {name: len(rows.get(name, ())) for name in sorted(rows)}},
        "tools": [_tool(t) for t in every_tool],
        "tool_code": {m: _module_source_hash(m) for m in modules},
        "roles": [asdict(r) for r in world.roles],
        "policies": [asdict(p) for p in world.policies],
        "scenarios": [scenario_dict(s) for s in world.scenarios()],
    }
    if world.sources:  # a folder world's files (its application included); in-process worlds have none
        parts["sources"] = dict(sorted(world.sources.items()))
    return parts


@functools.lru_cache(maxsize=32)
def _world_part_hashes(world: World) -> dict[str, str]:
    return content_hashes(_world_parts(world))


def world_content(world: World) -> dict[str, Any]:
    """Everything the version id hashes, as a JSON-able dict (see the module docstring)."""
    return {**_world_parts(world), "profiles": profile_hashes()}


def content_hashes(content: dict[str, Any]) -> dict[str, str]:
    """A SHA-256 per top-level part of ``content``; the id hashes these (and they say what changed)."""
    return {key: sha256_text(canonical_json(value)) for key, value in sorted(content.items())}


def version_id_of(part_hashes: dict[str, str]) -> str:
    """The ``wv_`` id of a content's part hashes (see :func:`content_hashes`)."""
    return VERSION_PREFIX + sha256_text(canonical_json(part_hashes))[:ID_HEX_CHARS]


def world_version(world: World) -> str:
    """The world version id: ``wv_`` and 16 hex characters of a SHA-256 over :func:`world_content`.

    The hash covers one SHA-256 per part (schema, seed manifest, tools, tool code,
    roles, policies, scenarios, profiles, ...). Whether that version was built and
    published is another matter: see :mod:`rehearsal_env.versions`.
    """
    hashes = {**_world_part_hashes(world), "profiles": sha256_text(canonical_json(profile_hashes()))}
    return version_id_of(dict(sorted(hashes.items())))
