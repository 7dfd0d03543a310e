"""The world folder the compile writes (``FOLDER/world``): world.toml, the application, migrations, seed.sql.

It is an ordinary world folder (``rehearsal_env.worlds`` loads it; ``rehearsal world add`` records it):
its ``[application]`` is written for the Docker sandbox (``python3``, ``/app``, the declared port),
and the compile runs the same files as local processes where no daemon answers.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Mapping, Sequence
from datetime import date
from pathlib import Path
from typing import Any

from .._atomic import write_atomic
from ..worlds import World, load_world_folder
from . import _toml
from ._errors import CompileError
from ._source import resolve

ROLE_KEYS = ("name", "description", "tools")
POLICY_KEYS = ("text", "hard_rules")
TOOL_KEYS = ("name", "kind", "type", "description", "method", "path", "query", "body", "headers", "args")
"""The keys of world.toml's tables, in the order a person reads them."""
WORLD_DIR = "world"
"""The world folder's name inside the compile folder."""


def docker_form(template: str, port: int) -> str:
    """A command or env template as the sandbox runs it: ``{python}`` is python3, ``{app}`` is /app, ``{port}``
    the declared port; ``{dsn}``, ``{email_url}``, ``{payments_url}``, ``{now}`` are left for the sandbox."""
    return template.replace("{python}", "python3").replace("{app}", "/app").replace("{port}", str(port))


def copy_sources(inspected: dict[str, Any], world_dir: Path, phase: str) -> list[str]:
    """Copy the application's files and the migrations into the world folder (each checked against the hash
    the inspect phase recorded); returns the migrations' names in the world folder."""
    app = inspected["application"]
    src = resolve(inspected, {"name": app["folder"], "root": app["root"]}, folder=True)
    target = world_dir / "app"
    if target.exists():
        shutil.rmtree(target)
    for rel, digest in sorted(app["files"].items()):
        data = (src / rel).read_bytes()
        if hashlib.sha256(data).hexdigest() != digest:
            raise CompileError(phase, f"expected the application's file {rel} as the inspect phase saw it; it changed "
                               "since. Fix: compile again from the inspect phase (delete FOLDER/.compile)")
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        (target / rel).write_bytes(data)
    names = []
    (world_dir / "migrations").mkdir(parents=True, exist_ok=True)
    for i, m in enumerate(inspected["migrations"]):
        name = f"migrations/{i + 1:02d}-{Path(m['name']).name}"
        write_atomic(world_dir / name, resolve(inspected, m).read_bytes())
        names.append(name)
    return names


def world_toml(inspected: dict[str, Any], migrations: Sequence[str], *, seeded: bool,
               tools: Sequence[Mapping[str, Any]] = (), roles: Sequence[Mapping[str, Any]] = (),
               policies: Sequence[Mapping[str, Any]] = (), name: str | None = None) -> str:
    """The text of world.toml.

    Before the seed phase the world is named ``bare-<hash of its migrations>-<name>``: the PostgreSQL backend keeps
    one template per world name (its first 16 characters) on its private server and drops the others, while a
    process remembers the templates it built, so two worlds that differ must not share those characters (a later
    compile in the same process would ask for a dropped template). ``name`` names a world of another stage so
    (the seed phase's, while it seeds through the API)."""
    app = inspected["application"]
    schema = hashlib.sha256("".join(m["sha256"] for m in inspected["migrations"]).encode()).hexdigest()[:8]
    port = int(app["port"])
    parts = ["# Written by `rehearsal world compile` (see .compile/ beside this folder for each phase's evidence).\n",
             _toml.top({"name": name or (inspected["name"] if seeded else f"bare-{schema}-{inspected['name']}"[:63]),
                        "description": inspected["description_text"] or inspected["name"],
                        "data_anchor": date.fromisoformat(inspected["data_anchor"]), "seed": inspected["seed"],
                        "suite_version": "1"}),
             "\n", _toml.table("schema", {"sql": list(migrations)})]
    if seeded:
        parts.append(_toml.table("data", {"sql": "seed.sql"}))
    parts.append(_toml.table("application", {
        "folder": "app", "command": [docker_form(c, port) for c in app["command"]], "port": port,
        "health": app["health"], "probe": app["probe"], "reset_hook": app.get("reset_hook"),
        "env": {k: docker_form(v, port) for k, v in app["env"].items()}}))
    if inspected["actors"][0]["headers"]:  # the first actor's: every tool without headers of its own sends them
        parts.append(_toml.table("http", {"headers": inspected["actors"][0]["headers"]}))
    for header, items, keys in (("role", roles, ROLE_KEYS), ("policy", policies, POLICY_KEYS),
                                 ("tool", tools, TOOL_KEYS)):
        for item in items:
            parts.append("\n" + _toml.table(header, {k: item[k] for k in keys if k in item}, array=True))
    return "".join(parts)


def _literal(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, int | float):
        return repr(v)
    return "'" + str(v).replace("'", "''") + "'"


def seed_sql(world: World, rows: Mapping[str, Sequence[Sequence[Any]]]) -> str:
    """INSERT statements of every seed row, table by table in the world's order, 100 rows a statement."""
    out = ["-- The world's fictional data, written by the compile's seed phase (same seed, same bytes).\n"]
    for table in world.tables:
        got = list(rows.get(table.name, ()))
        for start in range(0, len(got), 100):
            values = ",\n  ".join("(" + ", ".join(_literal(v) for v in row) + ")" for row in got[start:start + 100])
            out.append(f"INSERT INTO {table.name} ({', '.join(table.column_names)}) VALUES\n  {values};\n")
    return "".join(out)


def load(world_dir: Path, phase: str) -> World:
    """The world folder as the folder loader reads it (an error names the phase)."""
    try:
        return load_world_folder(world_dir)
    except (ValueError, OSError) as exc:
        raise CompileError(phase, f"expected the world folder {world_dir} to load; it does not: "
                           f"{str(exc).splitlines()[0][:300]}") from None
