"""Phase 1, *inspect*: what the source is, how it runs, and which of its files the compile reads.

SOURCE is a folder (the application's tree). How it runs is a description, ``rehearsal-app.toml`` in
SOURCE or given with ``--describe``::

    name = "reviews-compiled"            # the compiled world's name
    data_anchor = 2025-06-30             # the world's frozen day
    seed = 17
    [application]                        # what runs: the folder copied into the world, the command
    folder = "app"                       # ({python}, {app}, {dsn}, {email_url}, {now}, {port} filled in)
    command = ["{python}", "{app}/server.py"]
    port = 8080
    health = "/health"                   # a GET answering 200 once it is up (within start_timeout_s, default 30)
    probe = "/repos"
    env = { APP_DSN = "{dsn}", APP_PORT = "{port}" }
    runtime = "auto"                     # or "docker" (the sandbox) or "local" (local processes): ._sandboxed
    [http]   headers = { "X-Actor" = "bot" }       # sent with every tool call
    [schema] sql = ["migrations/001.sql"]          # the application's migrations (CREATE TABLE / INDEX), or
    [schema.from_app] command = [...]              # how it makes its schema on SQLite ({database}): ._appschema
    [data]   generator = "data.py"                 # or sql = "seed.sql": the fictional data
             api = 40                              # and/or writes sent through the application's API: ._seedapi
    [openapi] file = "openapi.json"                # or served = "/openapi.json"
    [[actor]]                                      # who the agent may act as: one role each (default: one
    role = "triager"                               # role, "operator", with [http] headers); the first actor's
    headers = { "X-Actor" = "triage-bot" }         # writes keep their names, the others' are prefixed role_
    [[policy]]                                     # a stated policy and the hard rules that enforce it
    text = "Never merge a pull request labelled do-not-merge."
    rules = [{ name = "no-do-not-merge-merged", op = "eq", want = 0, sql = "SELECT COUNT(*) FROM ..." }]

Every path is relative: looked up in SOURCE first, then beside the description (for what the
application does not ship), and confined to that folder (no ``..``, no absolute path, no link out).
Files are bounded in size and number. The compile never reads anything else of SOURCE.
"""

from __future__ import annotations

import hashlib
import os
import re
import tomllib
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from ..worlds import is_world_name
from ._appschema import from_app_spec
from ._errors import CompileError
from ._sandboxed import RUNTIMES
from ._seedapi import MAX_API_CALLS

DESCRIPTION_FILE = "rehearsal-app.toml"
"""The description's default name, in SOURCE."""
MAX_DESCRIPTION_BYTES = 256 * 1024
"""The largest description read."""
MAX_APP_FILES = 2_000
"""Files the application's folder may hold."""
MAX_APP_BYTES = 64 * 2**20
"""Bytes the application's folder may hold."""
MAX_POLICIES = 20
"""Policies a description may state (each with at most 5 rules)."""
MAX_ACTORS = 8
"""Identities ([[actor]]) a description may give."""
ROLE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,30}$")
MAX_FILE_BYTES = 8 * 2**20
"""The largest schema, seed or OpenAPI file read."""
PHASE = "inspect"


@dataclass(frozen=True)
class Located:
    """One file or folder the description names."""

    name: str
    """The path as the description wrote it."""
    path: Path
    """Where it was found (resolved, inside its root)."""
    root: str
    """``source`` or ``description``: which folder it was found in."""


def _confined(root: Path, name: object, what: str) -> Path | None:
    if not isinstance(name, str) or not name or "\x00" in name or Path(name).is_absolute():
        raise CompileError(PHASE, f"expected {what} as a relative path; got {name!r}. Fix: name it relative to "
                           "SOURCE (or to the description)")
    path = (root / name).resolve()
    if not path.is_relative_to(root.resolve()):
        raise CompileError(PHASE, f"{what} {name!r} resolves outside its folder {root} (through '..' or a link). "
                           "Fix: keep every file the compile reads inside SOURCE or beside the description")
    return path if path.exists() else None


def locate(source: Path, beside: Path, name: object, what: str, *, folder: bool = False) -> Located:
    """``name`` found in ``source``, else in ``beside`` (the description's folder); bounded when a file."""
    for root, label in ((source, "source"), (beside, "description")):
        path = _confined(root, name, what)
        if path is None or path.is_dir() != folder:
            continue
        if not folder and path.stat().st_size > MAX_FILE_BYTES:
            raise CompileError(PHASE, f"{what} {name!r} holds {path.stat().st_size:,} bytes; expected at most "
                               f"{MAX_FILE_BYTES:,}. Fix: give a smaller file")
        return Located(str(name), path, label)
    kind = "folder" if folder else "file"
    raise CompileError(PHASE, f"expected {what} {name!r} as a {kind} in SOURCE {source} or beside the description "
                       f"{beside}; found none. Fix: correct the path in the description")


def app_files(folder: Path) -> dict[str, str]:
    """``{relative path: sha256}`` of the application's files, bounded; a link out of the folder is refused."""
    root = folder.resolve()
    out: dict[str, str] = {}
    total = 0
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in ("__pycache__", ".git"))
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if name.endswith(".pyc"):
                continue
            if path.is_symlink() or not path.is_file():
                raise CompileError(PHASE, f"expected plain files in the application's folder; {path} is a link or "
                                   "special file. Fix: replace it by the file itself")
            total += path.stat().st_size
            if len(out) >= MAX_APP_FILES or total > MAX_APP_BYTES:
                raise CompileError(PHASE, f"the application's folder {root} holds more than {MAX_APP_FILES:,} files "
                                   f"or {MAX_APP_BYTES:,} bytes. Fix: point [application] folder at the code only")
            out[path.relative_to(root).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def read_description(path: Path) -> dict[str, Any]:
    """The description's TOML, bounded."""
    if not path.is_file():
        raise CompileError(PHASE, f"expected a description of how the application runs at {path}; found none. Fix: "
                           f"write {DESCRIPTION_FILE} in SOURCE or pass --describe FILE")
    if path.stat().st_size > MAX_DESCRIPTION_BYTES:
        raise CompileError(PHASE, f"the description {path} holds {path.stat().st_size:,} bytes; expected at most "
                           f"{MAX_DESCRIPTION_BYTES:,}")
    try:
        return tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise CompileError(PHASE, f"the description {path} is not valid TOML ({exc}). Fix: correct it") from None


_URL_PATH = re.compile(r"^/(?!/)[A-Za-z0-9_./~-]{0,200}$")


def url_path(value: object, what: str) -> str:
    """A path of the application's own URL space (``/health``): never an absolute URL or ``//host``."""
    if not isinstance(value, str) or not _URL_PATH.match(value):
        raise CompileError(PHASE, f"expected {what} as a path on the application, such as /health; got "
                           f"{str(value)[:80]!r}. Fix: write a path starting with one /")
    return value


def _hook(value: object) -> str | None:
    if value is None:
        return None
    method, _, path = str(value).partition(" ")
    if method not in ("GET", "POST", "PUT", "DELETE"):
        raise CompileError(PHASE, f"expected [application] reset_hook as 'METHOD /path'; got {str(value)[:80]!r}")
    return f"{method} {url_path(path, '[application] reset_hook path')}"


def _runtime(value: object) -> str:
    if value not in RUNTIMES:
        raise CompileError(PHASE, f"expected [application] runtime as one of {', '.join(RUNTIMES)}; got "
                           f"{str(value)[:80]!r}")
    return str(value)


def _bounded(value: object, what: str, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise CompileError(PHASE, f"expected [application] {what} as a whole number from {low} to {high}; got "
                           f"{value!r}")
    return value


def inspect_source(source: Path, describe: Path | None) -> dict[str, Any]:
    """The inspect phase's result (JSON-able): what runs, the files the compile will read, and their hashes."""
    source = source.resolve()
    if not source.is_dir():
        raise CompileError(PHASE, f"expected SOURCE to be the application's folder; {source} is not a folder. Fix: "
                           "give the folder that holds the application")
    desc_path = (describe or source / DESCRIPTION_FILE).resolve()
    raw = read_description(desc_path)
    beside = desc_path.parent
    app = raw.get("application")
    if not isinstance(app, dict) or not isinstance(app.get("command"), list) or not app["command"]:
        raise CompileError(PHASE, "expected [application] with a command list in the description; found none. Fix: "
                           'write [application] folder = "app" and command = ["{python}", "{app}/server.py"]')
    anchor = raw.get("data_anchor", date(2025, 6, 30))
    if not isinstance(anchor, date):
        raise CompileError(PHASE, f"expected data_anchor as a bare TOML date; got {anchor!r}")
    name = raw.get("name", source.name)
    if not is_world_name(name):
        raise CompileError(PHASE, "expected name as a world name (a lowercase letter, then up to 63 lowercase "
                           f"letters, digits, _ or -); got {str(name)[:80]!r}")
    folder = locate(source, beside, app.get("folder", "."), "[application] folder", folder=True)
    schema = raw.get("schema", {}).get("sql", [])
    schema = [schema] if isinstance(schema, str) else list(schema)
    from_app = from_app_spec(raw.get("schema", {}).get("from_app"))
    if from_app is not None and schema:
        raise CompileError(PHASE, "expected either [schema] sql or [schema.from_app], not both. Fix: keep one")
    if not schema and from_app is None and (source / "migrations").is_dir():
        schema = sorted(f"migrations/{p.name}" for p in (source / "migrations").glob("*.sql"))
    migrations = [locate(source, beside, s, "[schema] sql file") for s in schema]
    data = raw.get("data", {})
    seed = None
    if "generator" in data or "sql" in data:
        kind = "generator" if "generator" in data else "sql"
        seed = (kind, locate(source, beside, data[kind], f"[data] {kind}"))
    api = data.get("api", 0)
    if not isinstance(api, int) or isinstance(api, bool) or not 0 <= api <= MAX_API_CALLS:
        raise CompileError(PHASE, f"expected [data] api as the number of writes to seed through the application's "
                           f"API, from 0 to {MAX_API_CALLS}; got {str(api)[:80]!r}")
    openapi = raw.get("openapi", {})
    doc: Located | None = None
    if "file" in openapi:
        doc = locate(source, beside, openapi["file"], "[openapi] file")
    elif (source / "openapi.json").is_file():
        doc = locate(source, beside, "openapi.json", "OpenAPI document")

    policies = raw.get("policy", [])
    if not isinstance(policies, list) or len(policies) > MAX_POLICIES or not all(
            isinstance(p, dict) and isinstance(p.get("text"), str) and isinstance(p.get("rules", []), list)
            and len(p.get("rules", [])) <= 5 and all(isinstance(r, dict) and {"name", "sql", "op", "want"} <= set(r)
                                                      for r in p.get("rules", [])) for p in policies):
        raise CompileError(PHASE, f"expected at most {MAX_POLICIES} [[policy]] tables, each with text and at most 5 "
                           "rules {name, sql, op, want}; the description's do not read so. Fix: correct them")

    headers = {str(k): str(v) for k, v in dict(raw.get("http", {}).get("headers", {})).items()}
    actors = raw.get("actor", [{"role": "operator", "headers": headers}])
    if not isinstance(actors, list) or not 1 <= len(actors) <= MAX_ACTORS or not all(
            isinstance(a, dict) and isinstance(a.get("role"), str) and ROLE_NAME.match(a["role"])
            and isinstance(a.get("headers", {}), dict) for a in actors) or \
            len({a["role"] for a in actors}) != len(actors):
        raise CompileError(PHASE, f"expected 1 to {MAX_ACTORS} [[actor]] tables, each with a distinct role (lowercase "
                           "letters, digits, _) and headers; the description's do not read so. Fix: correct them")

    def shown(loc: Located) -> dict[str, str]:
        return {"name": loc.name, "root": loc.root, "sha256": hashlib.sha256(loc.path.read_bytes()).hexdigest()}

    return {
        "source": str(source), "description": str(desc_path),
        "name": str(name), "description_text": str(raw.get("description", "")),
        "data_anchor": anchor.isoformat(), "seed": int(raw.get("seed", 0)),
        "application": {"folder": folder.name, "root": folder.root, "files": app_files(folder.path),
                        "command": [str(c) for c in app["command"]], "port": int(app.get("port", 8080)),
                        "health": url_path(app.get("health", "/health"), "[application] health"),
                        "probe": url_path(app.get("probe", "/"), "[application] probe"),
                        "env": {str(k): str(v) for k, v in dict(app.get("env", {})).items()},
                        "reset_hook": _hook(app.get("reset_hook")),
                        "start_timeout_s": _bounded(app.get("start_timeout_s", 30), "start_timeout_s", 1, 300),
                        "runtime": _runtime(app.get("runtime", "auto"))},
        "policies": [{"text": p["text"], "rules": [dict(r) for r in p.get("rules", [])]} for p in policies],
        "headers": headers,
        "actors": [{"role": a["role"], "description": str(a.get("description", "")),
                    "headers": {str(k): str(v) for k, v in dict(a.get("headers", {})).items()}} for a in actors],
        "migrations": [shown(m) for m in migrations],
        "schema_from_app": from_app,
        "data": None if seed is None else {"kind": seed[0], **shown(seed[1])},
        **({"data_api": api} if api else {}),  # absent when 0: a compile without it keeps its bytes
        "openapi": {"file": shown(doc)} if doc else ({"served": url_path(openapi["served"], "[openapi] served")}
                                                      if "served" in openapi else None),
    }


def resolve(inspected: dict[str, Any], entry: dict[str, str], *, folder: bool = False) -> Path:
    """The path of a file the inspect phase located (``entry`` as it recorded it)."""
    if entry["root"] == "compile":  # written by the compile itself (the schema read from the application)
        root = Path(inspected["compile_dir"])
    else:
        root = Path(inspected["source"] if entry["root"] == "source" else Path(inspected["description"]).parent)
    return locate(root, root, entry["name"], "a file the inspect phase found", folder=folder).path
