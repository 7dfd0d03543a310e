"""Loading a world folder, and the folder worlds the registry knows (shipped, or added with ``world add``)."""

from __future__ import annotations

import json
import re
import tomllib
from datetime import date
from pathlib import Path
from typing import Any

from ..._atomic import write_atomic
from ..._home import home
from ...scenarios import load_scenarios
from .._name import WORLD_NAME_RULE, is_world_name
from .._world import Policy, Role, World
from ._app import application_of, parse_application
from ._data import declared_tables, migrated_tables, seed_rows
from ._hashes import folder_hashes
from ._paths import confined_file, shown
from ._source import WORLD_FILE, WorldFolderError, read_toml
from ._tools import parse_tools


def is_world_folder(name: str) -> bool:
    """Whether ``name`` is a path to a folder holding ``world.toml``."""
    return (Path(name) / WORLD_FILE).is_file()


SHIPPED = Path(__file__).resolve().parents[3] / "worlds"
"""Folder worlds that ship with the repository (``worlds/<name>/world.toml`` at its root)."""


def added_file() -> Path:
    """Where ``rehearsal world add`` records folders: ``$REHEARSAL_HOME/worlds.json`` (default ``~/.rehearsal``)."""
    return home() / "worlds.json"


def _name_of(folder: Path) -> str | None:
    try:
        name = tomllib.loads((folder / WORLD_FILE).read_text()).get("name")
    except (OSError, ValueError, RecursionError):
        return None
    return name if isinstance(name, str) else None


def _registry() -> tuple[dict[str, str], list[str]]:
    """(folder worlds by name, a line per entry left out and why)."""
    out: dict[str, str] = {}
    problems: list[str] = []
    if SHIPPED.is_dir():
        for world_toml in sorted(SHIPPED.glob(f"*/{WORLD_FILE}")):
            name = _name_of(world_toml.parent)
            if is_world_name(name):
                out[str(name)] = str(world_toml.parent)
    path = added_file()
    if not path.is_file():
        return out, problems
    try:
        added = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return out, [f"{path}: cannot be read ({type(exc).__name__}); no added folder world is known until it is "
                     "fixed or removed"]
    if not isinstance(added, dict):
        return out, [f"{path}: expected {{name: folder}}; no added folder world is known until it is fixed"]
    for name, folder in added.items():
        if not is_world_name(name):
            problems.append(f"{path}: entry {shown(name)} left out: a world name is {WORLD_NAME_RULE}")
        elif not isinstance(folder, str) or not is_world_folder(folder):
            problems.append(f"{path}: world {name!r} left out: its folder {shown(folder)} holds no {WORLD_FILE}")
        else:
            out[name] = folder
    return out, problems


def folder_worlds() -> dict[str, str]:
    """Folder worlds by name: the shipped ones, then those added with ``rehearsal world add`` (an entry with
    an invalid name or a missing folder is left out; :func:`folder_registry_problems` says which)."""
    return _registry()[0]


def folder_registry_problems() -> list[str]:
    """A line per entry of ``worlds.json`` left out of :func:`folder_worlds`, saying why."""
    return _registry()[1]


def add_world_folder(folder: str | Path) -> World:
    """Validate ``folder`` as a world (tables, tools, every scenario) and record it under its name.

    Raises:
        WorldFolderError: naming the file, the line and the fix.
    """
    world = load_world_folder(folder)
    world.seed_rows()  # runs a [data] generator (confined) and checks its rows against the tables
    world.scenarios()  # loads and checks every scenario file
    path = added_file()
    try:
        added = json.loads(path.read_text()) if path.is_file() else {}
    except ValueError:
        added = {}
    added = {k: v for k, v in (added.items() if isinstance(added, dict) else ()) if is_world_name(k)}
    added[world.name] = str(Path(folder).resolve())
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(added, indent=2, sort_keys=True) + "\n")
    return world



def load_world_folder(folder: str | Path) -> World:
    """The world a folder describes (see the module docstring).

    Raises:
        WorldFolderError: naming the file, the line and the fix.
    """
    folder = Path(folder).resolve()
    if not (folder / WORLD_FILE).is_file():
        raise WorldFolderError(f"{folder}: no {WORLD_FILE}. Fix: give the folder that holds world.toml")
    src, data = read_toml(confined_file(folder, folder / WORLD_FILE))
    for key in ("name", "data_anchor"):
        if key not in data:
            raise src.error(1, f"{key} is missing", 'write name = "myworld" and data_anchor = 2025-06-30 at the top')
    if not is_world_name(data["name"]):
        raise src.error(src.line(None, 0, "name"), f"name {shown(data['name'])} is not a world name",
                        f"a world name is {WORLD_NAME_RULE}")
    if not isinstance(data["data_anchor"], date):
        raise src.error(src.line(None, 0, "data_anchor"), f"data_anchor {data['data_anchor']!r} is not a date",
                        "write a bare TOML date: data_anchor = 2025-06-30")
    migrations = data.get("schema", {}).get("sql", [])
    migrations = [migrations] if isinstance(migrations, str) else list(migrations)
    tables = declared_tables(src, data.get("table", [])) + migrated_tables(
        folder, migrations, f"{src.path}:{src.line('schema', 0, 'sql')}")
    tools = parse_tools(src, data.get("tool", []), data.get("http", {}))
    names = {t.name for t in tools}
    roles = []
    for i, r in enumerate(data.get("role", [])):
        unknown = [t for t in r.get("tools", ()) if t not in names]
        if unknown:
            raise src.error(src.line("role", i, "tools"), f"role {r.get('name')!r} lists unknown tool(s) {unknown}",
                            f"declare them under [[tool]] or use {', '.join(sorted(names))}")
        roles.append(Role(r["name"], r.get("description", r["name"]), tuple(r.get("tools", ()))))
    policies = tuple(Policy(p["text"], tuple(p.get("hard_rules", ()))) for p in data.get("policy", []))
    if any(t.get("type") == "http" for t in data.get("tool", [])):
        if "application" not in data:
            raise src.error(1, "the world has http tools but no [application]",
                            "describe the application the sandbox runs under [application]")
    application = parse_application(src, folder, data["application"]) if "application" in data else None
    rows = seed_rows(src, folder, data.get("data", {}), tables)
    scenario_files = [confined_file(folder, p) for p in sorted((folder / "scenarios").glob("*.toml"))]
    role_names = {r.name for r in roles}

    def scenarios(world: World) -> list[Any]:
        out = []
        for path in scenario_files:
            out.extend(_scenarios(path, world, role_names, names))
        return out

    return World(name=data["name"], description=data.get("description", ""), tables=tables, tools=tools,
                 roles=tuple(roles), policies=policies, data_anchor=data["data_anchor"], seed=int(data.get("seed", 0)),
                 generate_rows=rows, generate_scenarios=scenarios, suite_version=str(data.get("suite_version", "1")),
                 application=application, sources=folder_hashes(folder))


def _scenarios(path: Path, world: World, roles: set[str], tools: set[str]) -> list[Any]:
    src, _ = read_toml(path)
    try:
        loaded = load_scenarios(path, world.name)
    except ValueError as exc:
        match = re.search(r"scenario #(\d+)", str(exc))
        line = src.line("scenario", int(match.group(1)) - 1) if match else 1
        raise WorldFolderError(f"{path}:{line}: {exc}") from exc
    builtin = {"finish", "give_up", "ask_customer", "retry_operation"}
    for i, s in enumerate(loaded):
        if s.role not in roles:
            raise src.error(src.line("scenario", i, "role"), f"scenario {s.id!r} plays role {s.role!r}",
                            f"use one of the roles of world.toml: {', '.join(sorted(roles))}")
        for solution in (s.reference, *s.wrong):
            bad = [c.tool for c in solution.calls if c.tool not in tools | builtin]
            if bad:
                raise src.error(src.line("scenario", i, "reference"), f"scenario {s.id!r}: {solution.name} calls "
                                f"unknown tool(s) {bad}", f"use the world's tools: {', '.join(sorted(tools))}")
    return list(loaded)


def folder_world_json(world: World) -> str:
    """A one-line JSON summary of a folder world (for ``rehearsal world add``)."""
    info = world.describe()
    app = application_of(world)
    return json.dumps({"name": world.name, "tools": len(world.tools), "roles": list(info["roles"]),
                       "scenarios": info["scenarios"], "application": str(app.folder) if app else None})
