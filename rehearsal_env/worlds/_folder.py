"""A world from a folder: ``world.toml`` (tables, seed data, roles, policies, tools) and ``scenarios/*.toml``.

``world.toml``::

    name = "notes"                       # the world's name
    description = "..."
    data_anchor = 2025-06-30             # the frozen day (the clock reads it at noon)
    seed = 1
    suite_version = "1"

    [[table]]                            # columns[0] is the integer primary key
    name = "notes"
    columns = [{ name = "id", type = "int" }, { name = "body" },
               { name = "author_id", type = "int", references = "users.id", nullable = true }]
    indexes = [["author_id"]]

    [schema]                             # or the application's own migrations, instead of [[table]]:
    sql = ["migrations/001_init.sql"]    # CREATE TABLE / CREATE INDEX, applied in order

    [data]
    sql = "seed.sql"                     # INSERT ... VALUES statements with literal values, or
    # generator = "data.py"              # a file defining rows(seed: int, anchor: date) -> {table: [tuple]}

    [[role]]   name, description, tools = [...]
    [[policy]] text, hard_rules = [...]  # names of hard-rule checks the scenarios use

    [[tool]]                             # kind = "read" | "write"; type = "sql" | "http"
    name = "add_note"
    kind = "write"
    type = "sql"
    description = "Add a note."
    sql = "INSERT INTO notes (body, created_at) VALUES (:body, :now) RETURNING id"   # or a list
    returns = ["id"]                     # the result's fields (default: the statement's own names)
    on_empty = "no note {note_id}"       # refuse when a SELECT/RETURNING gives no row
    [tool.args.body]                     # or [tool.parameters]: a whole JSON Schema object
    type = "string"
    description = "The note's text."

An ``sql`` tool runs its statements inside the tool call's transaction;
``:name`` binds an argument, ``:now`` the world's clock, ``:operation_id`` the
call's operation id. An ``http`` tool (``method``, ``path`` with ``{arg}``
templates, ``query`` and ``body``: which arguments go where, default the ones
not in the path, ``headers``, ``returns``) calls the application that the
sandbox runs (``--backend docker``), described by ``[application]``: ``folder``
(copied into the image), ``command``, ``port``, ``env`` (``{dsn}``,
``{email_url}``, ``{payments_url}``, ``{now}`` are filled in), ``health`` (a
GET answering 200 once it is up), ``probe`` (a GET whose answer must be the
same after every reset) and ``reset_hook`` (``"POST /path"`` the sandbox calls
after each database restore; leave it out when the application keeps no state
outside its database). A 4xx answer is the application refusing (the agent
sees the error); a 5xx answer or no answer is the environment failing.

Errors name the file, the line and the fix.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, Protocol, runtime_checkable
from urllib.parse import quote

import sqlglot
from sqlglot import exp

from ..backends import DatabaseError
from ..scenarios import load_scenarios
from ..schema import Column, Table
from ..tools import Tool, ToolContext, ToolFailed
from ._world import Policy, Role, World

WORLD_FILE = "world.toml"
SPECIAL_PARAMS = ("now", "operation_id")
_JSON_TYPES = ("integer", "number", "string", "boolean", "array")
_PARAM = re.compile(r"'(?:[^']|'')*'|(?<![:\w]):([A-Za-z_]\w*)")


class WorldFolderError(ValueError):
    """A world folder does not describe a valid world; the message says file, line and fix."""


@runtime_checkable
class Application(Protocol):
    """What ``http`` tools call: a running application (the sandbox's database provides it)."""

    def request(self, method: str, path: str, *, query: Mapping[str, Any], body: Mapping[str, Any] | None,
                headers: Mapping[str, str]) -> tuple[int, Any]:
        """Send one request; return (status, decoded JSON answer). Raises DatabaseError when unreachable."""
        ...


@dataclass(frozen=True)
class ApplicationSpec:
    """The ``[application]`` of a folder world: what the sandbox builds and runs."""

    folder: Path
    """The application's files (copied into its image)."""
    command: tuple[str, ...]
    """How the container starts it."""
    port: int
    """The port it listens on inside its container."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Environment; ``{dsn}``, ``{email_url}``, ``{payments_url}`` and ``{now}`` are filled in."""
    health: str = "/health"
    """A GET path answering 200 once the application is up."""
    probe: str = "/"
    """A GET path whose answer must be identical after every reset."""
    reset_hook: str | None = None
    """``"METHOD /path"`` called after each database restore; None: no state outside the database."""


_APPLICATIONS: dict[str, ApplicationSpec] = {}


def application_of(world: World) -> ApplicationSpec | None:
    """The application a folder world's ``http`` tools call (None: the world runs in process)."""
    return _APPLICATIONS.get(world.name)


def backend_for(world: World) -> str:
    """The backend a world needs: ``docker`` when its tools call its application, else ``sqlite``."""
    return "docker" if application_of(world) is not None else "sqlite"


def is_world_folder(name: str) -> bool:
    """Whether ``name`` is a path to a folder holding ``world.toml``."""
    return (Path(name) / WORLD_FILE).is_file()


SHIPPED = Path(__file__).resolve().parents[2] / "worlds"
"""Folder worlds that ship with the repository (``worlds/<name>/world.toml`` at its root)."""
HOME_ENV = "REHEARSAL_HOME"


def added_file() -> Path:
    """Where ``rehearsal world add`` records folders: ``$REHEARSAL_HOME/worlds.json`` (default ``~/.rehearsal``)."""
    return Path(os.environ.get(HOME_ENV) or "~/.rehearsal").expanduser() / "worlds.json"


def _name_of(folder: Path) -> str | None:
    try:
        name = tomllib.loads((folder / WORLD_FILE).read_text()).get("name")
    except (OSError, tomllib.TOMLDecodeError):
        return None
    return name if isinstance(name, str) else None


def folder_worlds() -> dict[str, str]:
    """Folder worlds by name: the shipped ones, then those added with ``rehearsal world add``."""
    out: dict[str, str] = {}
    if SHIPPED.is_dir():
        for world_toml in sorted(SHIPPED.glob(f"*/{WORLD_FILE}")):
            name = _name_of(world_toml.parent)
            if name:
                out[name] = str(world_toml.parent)
    path = added_file()
    if path.is_file():
        try:
            added = json.loads(path.read_text())
        except ValueError:
            added = {}
        out.update({k: v for k, v in added.items() if isinstance(v, str) and is_world_folder(v)})
    return out


def add_world_folder(folder: str | Path) -> World:
    """Validate ``folder`` as a world (tables, tools, every scenario) and record it under its name.

    Raises:
        WorldFolderError: naming the file, the line and the fix.
    """
    world = load_world_folder(folder)
    world.scenarios()  # loads and checks every scenario file
    path = added_file()
    added = json.loads(path.read_text()) if path.is_file() else {}
    added[world.name] = str(Path(folder).resolve())
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(added, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)
    return world


# -- lines for errors ------------------------------------------------------------------
class _Source:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.text = path.read_text()
        self.lines = self.text.splitlines()

    def line(self, array: str | None = None, index: int = 0, key: str | None = None) -> int:
        """The line of ``key`` in the ``index``-th ``[[array]]`` (or the table ``[array]``); 1 when unknown."""
        start, end = 0, len(self.lines)
        if array is not None:
            headers = [i for i, ln in enumerate(self.lines) if ln.strip() in (f"[[{array}]]", f"[{array}]")]
            if index < len(headers):
                start = headers[index]
                end = headers[index + 1] if index + 1 < len(headers) else end
        if key is not None:
            pattern = re.compile(rf"^\s*(\[{re.escape(array or '')}\.)?{re.escape(key)}(\s*=|\]|\.)")
            for i in range(start, end):
                if pattern.match(self.lines[i]):
                    return i + 1
        return start + 1

    def error(self, line: int, problem: str, fix: str) -> WorldFolderError:
        return WorldFolderError(f"{self.path}:{line}: {problem}. Fix: {fix}")


def _toml(path: Path) -> tuple[_Source, dict[str, Any]]:
    source = _Source(path)
    try:
        return source, tomllib.loads(source.text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"line (\d+)", str(exc))
        raise source.error(int(match.group(1)) if match else 1, f"not valid TOML ({exc})",
                           "correct the syntax on that line (strings in quotes, one key = value per line)") from exc


# -- tables and seed data -------------------------------------------------------------
def _tables(src: _Source, raw: list[dict[str, Any]]) -> tuple[Table, ...]:
    tables = []
    for i, t in enumerate(raw):
        if not isinstance(t.get("name"), str) or not t.get("columns"):
            raise src.error(src.line("table", i), "a [[table]] needs name and columns",
                            'write name = "..." and columns = [{ name = "id", type = "int" }, ...]')
        cols = []
        for c in t["columns"]:
            kind = c.get("type", "text")
            if kind not in ("int", "text", "real") or not isinstance(c.get("name"), str):
                raise src.error(src.line("table", i, "columns"), f"table {t['name']!r}: column {c!r} is not valid",
                                'each column is { name = "...", type = "int" | "text" | "real" }')
            cols.append(Column(c["name"], kind, bool(c.get("nullable", False)), c.get("references")))
        if cols[0].type != "int":
            raise src.error(src.line("table", i, "columns"), f"table {t['name']!r} starts with a {cols[0].type} column",
                            "make the first column the integer primary key (type = \"int\")")
        tables.append(Table(t["name"], tuple(cols), tuple(tuple(ix) for ix in t.get("indexes", ()))))
    return tuple(tables)


_STATEMENT = re.compile(r"(?:'(?:[^']|'')*'|--[^\n]*|[^;'-]|-(?!-))+")
"""One SQL statement of a file (a semicolon or quote inside quoted text or a comment does not count)."""


def _only_comments(chunk: str) -> bool:
    return all(not line.strip() or line.strip().startswith("--") for line in chunk.splitlines())


def _first_line(text: str, chunk: re.Match[str]) -> int:
    """The 1-based line where the statement in ``chunk`` starts (after blank and comment lines)."""
    offset = chunk.start()
    for line in chunk.group(0).splitlines(keepends=True):
        if line.strip() and not line.strip().startswith("--"):
            break
        offset += len(line)
    return text.count("\n", 0, offset) + 1


_INT_TYPES = {"INT", "BIGINT", "SMALLINT", "TINYINT", "BOOLEAN", "SERIAL", "BIGSERIAL"}
_REAL_TYPES = {"DOUBLE", "FLOAT", "REAL", "DECIMAL", "NUMERIC"}


def _column_type(column: exp.ColumnDef) -> str:
    kind = column.args.get("kind")
    name = kind.this.name if isinstance(kind, exp.DataType) else "TEXT"
    return "int" if name in _INT_TYPES else "real" if name in _REAL_TYPES else "text"


def _schema_tables(folder: Path, files: Sequence[str]) -> tuple[Table, ...]:
    """Tables from the application's own migrations: CREATE TABLE and CREATE INDEX statements, in order."""
    tables: dict[str, Table] = {}
    for file in files:
        path = folder / file
        if not path.is_file():
            raise WorldFolderError(f"{folder / WORLD_FILE}: [schema] names {file}, which does not exist. Fix: "
                                   "name the migration files relative to world.toml")
        text = path.read_text()
        for chunk in _STATEMENT.finditer(text):
            if _only_comments(chunk.group(0)):
                continue
            line = _first_line(text, chunk)
            try:
                statement = sqlglot.parse_one(chunk.group(0), read="sqlite")
            except sqlglot.errors.ParseError as exc:
                raise WorldFolderError(f"{path}:{line}: not valid SQL ({str(exc).splitlines()[0]}). Fix: "
                                       "write CREATE TABLE and CREATE INDEX statements") from exc
            if statement is None:
                continue
            kind = str(statement.args.get("kind", "")).upper() if isinstance(statement, exp.Create) else ""
            if kind == "TABLE" and isinstance(statement.this, exp.Schema):
                name = statement.this.this.name
                cols = []
                for c in statement.this.expressions:
                    if not isinstance(c, exp.ColumnDef):
                        continue
                    ref = next((k.kind for k in c.constraints if isinstance(k.kind, exp.Reference)), None)
                    target = None
                    if ref is not None and isinstance(ref.this, exp.Schema):
                        target = f"{ref.this.this.name}.{ref.this.expressions[0].name}"
                    not_null = any(isinstance(k.kind, exp.NotNullColumnConstraint | exp.PrimaryKeyColumnConstraint)
                                   for k in c.constraints)
                    cols.append(Column(c.name, _column_type(c), not not_null, target))  # type: ignore[arg-type]
                if not cols or cols[0].type != "int":
                    raise WorldFolderError(f"{path}:{line}: table {name!r} must start with an integer primary key. "
                                           "Fix: make its first column INTEGER PRIMARY KEY")
                tables[name] = Table(name, tuple(cols))
            elif kind == "INDEX" and isinstance(statement.this, exp.Index):
                index = statement.this
                table_name = index.args["table"].name
                params = index.args.get("params")
                columns = tuple(o.this.name for o in (params.args.get("columns") or ())) if params else ()
                if table_name not in tables:
                    raise WorldFolderError(f"{path}:{line}: index on unknown table {table_name!r}. Fix: create "
                                           "the table before its index")
                t = tables[table_name]
                tables[table_name] = Table(t.name, t.columns, (*t.indexes, columns))
            else:
                raise WorldFolderError(f"{path}:{line}: only CREATE TABLE and CREATE INDEX belong in the schema, "
                                       f"got {chunk.group(0).strip()[:50]!r}. Fix: keep data in [data] and leave "
                                       "other statements out")
    return tuple(tables.values())


def _literal(node: exp.Expression) -> Any:
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Boolean):
        return int(node.this)
    if isinstance(node, exp.Neg):
        return -_literal(node.this)
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        text = node.this
        return float(text) if any(ch in text for ch in ".eE") else int(text)
    raise ValueError(f"{node.sql()} is not a literal value")


def _sql_rows(src_path: Path, tables: Sequence[Table]) -> dict[str, list[tuple[Any, ...]]]:
    by_name = {t.name: t for t in tables}
    rows: dict[str, list[tuple[Any, ...]]] = {t.name: [] for t in tables}
    text = src_path.read_text()
    for chunk in _STATEMENT.finditer(text):
        if _only_comments(chunk.group(0)):
            continue
        line = _first_line(text, chunk)
        try:
            statement = sqlglot.parse_one(chunk.group(0), read="sqlite")
        except sqlglot.errors.ParseError as exc:
            raise WorldFolderError(f"{src_path}:{line}: not valid SQL ({str(exc).splitlines()[0]}). Fix: write "
                                   "INSERT INTO table (columns) VALUES (...); statements") from exc
        target = statement.this if isinstance(statement, exp.Insert) else None
        name = target.this.name if isinstance(target, exp.Schema) else target.name if target is not None else None
        if not isinstance(statement, exp.Insert) or name not in by_name:
            raise WorldFolderError(f"{src_path}:{line}: only INSERT INTO <a table of world.toml> belongs in "
                                   f"seed SQL, got {statement.sql()[:60]!r}. Fix: declare the table under "
                                   "[[table]] and seed it with INSERT ... VALUES")
        table = by_name[name]
        columns = ([c.name for c in target.expressions] if isinstance(target, exp.Schema)
                   else list(table.column_names))
        unknown = sorted(set(columns) - set(table.column_names))
        if unknown:
            raise WorldFolderError(f"{src_path}:{line}: table {name!r} has no column(s) {unknown}. Fix: use "
                                   f"{', '.join(table.column_names)}")
        values = statement.expression
        for tup in values.expressions if isinstance(values, exp.Values) else ():
            try:
                given = dict(zip(columns, (_literal(v) for v in tup.expressions), strict=True))
            except ValueError as exc:
                raise WorldFolderError(f"{src_path}:{line}: table {name!r}: {exc}. Fix: seed rows hold only "
                                       "numbers, 'text' and NULL, one value per listed column") from exc
            if given.get(table.primary_key) is None:
                given[table.primary_key] = max((r[0] for r in rows[name]), default=0) + 1
            missing = [c.name for c in table.columns if not c.nullable and given.get(c.name) is None]
            if missing:
                raise WorldFolderError(f"{src_path}:{line}: table {name!r}: no value for {missing}. Fix: give "
                                       "every column that is not nullable a value")
            rows[name].append(tuple(given.get(c) for c in table.column_names))
    return rows


def _seed(src: _Source, folder: Path, raw: dict[str, Any], tables: Sequence[Table]) -> Callable[..., Any]:
    if "sql" in raw:
        path = folder / raw["sql"]
        if not path.is_file():
            raise src.error(src.line("data", 0, "sql"), f"seed file {path} does not exist",
                            "name a file in the world folder, relative to world.toml")
        rows = _sql_rows(path, tables)
        return lambda seed, anchor: rows
    if "generator" in raw:
        path = folder / raw["generator"]
        if not path.is_file():
            raise src.error(src.line("data", 0, "generator"), f"generator {path} does not exist",
                            "name a Python file in the world folder that defines rows(seed, anchor)")
        spec = importlib.util.spec_from_file_location(f"rehearsal_world_seed_{abs(hash(str(path)))}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        if not callable(getattr(module, "rows", None)):
            raise src.error(src.line("data", 0, "generator"), f"{path} defines no rows(seed, anchor)",
                            "define rows(seed: int, anchor: datetime.date) -> {table: [tuple, ...]}")
        return module.rows  # type: ignore[no-any-return]
    return lambda seed, anchor: {}


# -- tools -------------------------------------------------------------------------------
def _parameters(src: _Source, i: int, raw: dict[str, Any]) -> dict[str, Any]:
    if "parameters" in raw:
        schema = dict(raw["parameters"])
        schema.setdefault("required", [])
    else:
        props = {name: {k: v for k, v in spec.items() if k != "required"} for name, spec in raw.get("args", {}).items()}
        schema = {"type": "object", "properties": props,
                  "required": [n for n, spec in raw.get("args", {}).items() if spec.get("required", True)]}
    schema["additionalProperties"] = False
    for name, prop in schema.get("properties", {}).items():
        if prop.get("type") not in _JSON_TYPES or (prop["type"] == "array" and "items" not in prop):
            raise src.error(src.line("tool", i, "args"), f"tool {raw['name']!r}: argument {name!r} has type "
                            f"{prop.get('type')!r}", f"use one of {', '.join(_JSON_TYPES)} (arrays need items)")
        prop.setdefault("description", name)
    return schema


def _bind(sql: str, args: Mapping[str, Any], ctx: ToolContext) -> tuple[str, list[Any]]:
    params: list[Any] = []

    def sub(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return match.group(0)
        params.append(ctx.now if name == "now" else ctx.operation_id if name == "operation_id" else args.get(name))
        return "?"

    return _PARAM.sub(sub, sql), params


def _names(sql: str) -> list[str]:
    tree = sqlglot.parse_one(sql, read="sqlite")
    returning = tree.args.get("returning")
    if returning is not None:
        return [e.alias_or_name for e in returning.expressions]
    return list(tree.named_selects) if isinstance(tree, exp.Query) else []


def _sql_tool(src: _Source, i: int, raw: dict[str, Any], schema: dict[str, Any]) -> Callable[..., Any]:
    statements = [raw["sql"]] if isinstance(raw.get("sql"), str) else list(raw.get("sql") or [])
    if not statements:
        raise src.error(src.line("tool", i, "name"), f"sql tool {raw['name']!r} has no sql",
                        'write sql = "SELECT ... WHERE id = :id" (or a list of statements)')
    for statement in statements:
        for name in filter(None, (m.group(1) for m in _PARAM.finditer(statement))):
            if name not in schema["properties"] and name not in SPECIAL_PARAMS:
                raise src.error(src.line("tool", i, "sql"), f"tool {raw['name']!r} binds :{name}, which is no argument",
                                f"declare [tool.args.{name}] or use one of :{', :'.join(SPECIAL_PARAMS)}")
        try:
            sqlglot.parse_one(_PARAM.sub(lambda m: "?" if m.group(1) else m.group(0), statement), read="sqlite")
        except sqlglot.errors.ParseError as exc:
            raise src.error(src.line("tool", i, "sql"), f"tool {raw['name']!r}: not valid SQL ({exc})",
                            "write one SQL statement per string") from exc
    last = _PARAM.sub(lambda m: "?" if m.group(1) else m.group(0), statements[-1])
    fields = list(raw.get("returns") or _names(last))
    many = raw.get("result", "rows" if raw["kind"] == "read" else "row") == "rows"
    on_empty = raw.get("on_empty")

    def run(ctx: ToolContext, **args: Any) -> Any:
        rows: list[tuple[Any, ...]] = []
        for statement in statements:
            text, params = _bind(statement, args, ctx)
            rows = ctx.db.execute(text, params)
            if on_empty and not rows and _names(text):
                raise ToolFailed(str(on_empty).format(**args))
        out = [dict(zip(fields, row, strict=False)) for row in rows]
        if many:
            return out
        return out[0] if out else {"done": True}

    return run


def _pick(data: Any, fields: Sequence[str]) -> Any:
    if not fields:
        return data
    if isinstance(data, list):
        return [_pick(item, fields) for item in data]
    if isinstance(data, dict):
        return {k: data.get(k) for k in fields}
    return data


def _http_tool(src: _Source, i: int, raw: dict[str, Any], schema: dict[str, Any],
               defaults: Mapping[str, Any]) -> Callable[..., Any]:
    method = str(raw.get("method", "GET")).upper()
    path = raw.get("path")
    if method not in ("GET", "POST", "PUT", "PATCH", "DELETE") or not isinstance(path, str) or not path.startswith("/"):
        raise src.error(src.line("tool", i, "path" if "path" in raw else "name"),
                        f"http tool {raw['name']!r} needs a method and a path starting with /",
                        'write method = "POST" and path = "/things/{thing_id}"')
    in_path = re.findall(r"\{(\w+)\}", path)
    for name in in_path:
        if name not in schema["properties"]:
            raise src.error(src.line("tool", i, "path"), f"tool {raw['name']!r}: path names {{{name}}}, no argument",
                            f"declare [tool.args.{name}] or change the path")
    rest = [n for n in schema["properties"] if n not in in_path]
    sends_body = method in ("POST", "PUT", "PATCH")
    body_args = list(raw.get("body", rest if sends_body else []))
    query_args = list(raw.get("query", [] if sends_body else rest))
    headers = {**defaults.get("headers", {}), **raw.get("headers", {})}
    fields = list(raw.get("returns", []))
    name, write = raw["name"], raw["kind"] == "write"

    def run(ctx: ToolContext, **args: Any) -> Any:
        app = getattr(ctx.db, "application", None)
        if not isinstance(app, Application):
            raise DatabaseError(f"tool {name!r} calls the application over HTTP, and this backend runs no "
                                "application; run the world on the sandbox (--backend docker)")
        url = path.format(**{k: quote(str(args[k]), safe="") for k in in_path})
        query = {k: args[k] for k in query_args if k in args}
        body = {k: args[k] for k in body_args if k in args} if sends_body else None
        sent = dict(headers, **({"Idempotency-Key": ctx.operation_id} if write else {}))
        status, data = app.request(method, url, query=query, body=body, headers=sent)
        if 200 <= status < 300:
            return _pick(data, fields)
        error = data.get("error") if isinstance(data, dict) else data
        if 400 <= status < 500:
            raise ToolFailed(f"the application refused ({status}): {error}")
        raise DatabaseError(f"the application failed on {method} {url} ({status}): {error}")

    return run


def _tools(src: _Source, raw: list[dict[str, Any]], defaults: Mapping[str, Any]) -> tuple[Tool, ...]:
    out = []
    for i, t in enumerate(raw):
        bad = next((key for key, ok in (("name", isinstance(t.get("name"), str)),
                                        ("kind", t.get("kind") in ("read", "write")),
                                        ("type", t.get("type") in ("sql", "http"))) if not ok), None)
        if bad is not None:
            raise src.error(src.line("tool", i, bad if bad in t else None),
                            f"tool {t.get('name', '#' + str(i + 1))!r}: {bad} is {t.get(bad)!r}",
                            'write name = "...", kind = "read" | "write", type = "sql" | "http"')
        schema = _parameters(src, i, t)
        fn = _sql_tool(src, i, t, schema) if t["type"] == "sql" else _http_tool(src, i, t, schema, defaults)
        out.append(Tool(t["name"], t["kind"], t.get("description", t["name"]), schema, fn))
    return tuple(out)


def _application(src: _Source, folder: Path, raw: dict[str, Any]) -> ApplicationSpec:
    app_folder = folder / raw.get("folder", "app")
    if not app_folder.is_dir() or not raw.get("command"):
        raise src.error(src.line("application", 0), f"[application] needs folder (found: {app_folder}) "
                        "and command", 'write folder = "app" and command = ["python3", "/app/server.py"]')
    return ApplicationSpec(app_folder, tuple(raw["command"]), int(raw.get("port", 8080)),
                           dict(raw.get("env", {})), raw.get("health", "/health"), raw.get("probe", "/"),
                           raw.get("reset_hook") or None)


# -- the world -------------------------------------------------------------------------------
def load_world_folder(folder: str | Path) -> World:
    """The world a folder describes (see the module docstring).

    Raises:
        WorldFolderError: naming the file, the line and the fix.
    """
    folder = Path(folder).resolve()
    if not (folder / WORLD_FILE).is_file():
        raise WorldFolderError(f"{folder}: no {WORLD_FILE}. Fix: give the folder that holds world.toml")
    src, data = _toml(folder / WORLD_FILE)
    for key in ("name", "data_anchor"):
        if key not in data:
            raise src.error(1, f"{key} is missing", 'write name = "myworld" and data_anchor = 2025-06-30 at the top')
    if not isinstance(data["data_anchor"], date):
        raise src.error(src.line(None, 0, "data_anchor"), f"data_anchor {data['data_anchor']!r} is not a date",
                        "write a bare TOML date: data_anchor = 2025-06-30")
    tables = _tables(src, data.get("table", [])) + _schema_tables(folder, list(data.get("schema", {}).get("sql", [])))
    tools = _tools(src, data.get("tool", []), data.get("http", {}))
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
    if "application" in data:
        _APPLICATIONS[data["name"]] = _application(src, folder, data["application"])
    rows = _seed(src, folder, data.get("data", {}), tables)
    scenario_files = sorted((folder / "scenarios").glob("*.toml"))
    role_names = {r.name for r in roles}

    def scenarios(world: World) -> list[Any]:
        out = []
        for path in scenario_files:
            out.extend(_scenarios(path, world, role_names, names))
        return out

    return World(name=data["name"], description=data.get("description", ""), tables=tables, tools=tools,
                 roles=tuple(roles), policies=policies, data_anchor=data["data_anchor"], seed=int(data.get("seed", 0)),
                 generate_rows=rows, generate_scenarios=scenarios, suite_version=str(data.get("suite_version", "1")))


def _scenarios(path: Path, world: World, roles: set[str], tools: set[str]) -> list[Any]:
    src, _ = _toml(path)
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
