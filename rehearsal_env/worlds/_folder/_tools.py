"""The tools of a world folder: ``sql`` (statements in the tool call's transaction) and ``http`` (the application)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import quote

import sqlglot
from sqlglot import exp

from ...backends import DatabaseError
from ...tools import Tool, ToolContext, ToolFailed
from ...verdict import NotScoredCause, NotScoredError
from ._app import Application
from ._source import Source

SPECIAL_PARAMS = ("now", "operation_id")
_JSON_TYPES = ("integer", "number", "string", "boolean", "array")
_PARAM = re.compile(r"'(?:[^']|'')*'|(?<![:\w]):([A-Za-z_]\w*)")


def _parameters(src: Source, i: int, raw: dict[str, Any]) -> dict[str, Any]:
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


def _bindable(value: Any) -> Any:
    """An argument as a database parameter: an array as its JSON text (``json_each(:ids)`` reads it), an
    omitted optional argument as NULL, anything else as it is."""
    return json.dumps(value) if isinstance(value, list | dict) else value


class _Shown(dict[str, Any]):
    """The arguments an ``on_empty`` message is formatted with: an omitted optional argument reads ``None``."""

    def __missing__(self, key: str) -> Any:
        return None


def _bind(sql: str, args: Mapping[str, Any], ctx: ToolContext) -> tuple[str, list[Any]]:
    params: list[Any] = []

    def sub(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return match.group(0)
        params.append(ctx.now if name == "now" else ctx.operation_id if name == "operation_id"
                      else _bindable(args.get(name)))
        return "?"

    return _PARAM.sub(sub, sql), params


def _names(sql: str) -> list[str]:
    tree = sqlglot.parse_one(sql, read="sqlite")
    returning = tree.args.get("returning")
    if returning is not None:
        return [e.alias_or_name for e in returning.expressions]
    return list(tree.named_selects) if isinstance(tree, exp.Query) else []


def _sql_tool(src: Source, i: int, raw: dict[str, Any], schema: dict[str, Any]) -> Callable[..., Any]:
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
                raise ToolFailed(str(on_empty).format_map(_Shown(args)))
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


def _http_tool(src: Source, i: int, raw: dict[str, Any], schema: dict[str, Any],
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
            raise NotScoredError(NotScoredCause.SANDBOX, f"tool {name!r} calls the application over HTTP, and this "
                                 "backend runs no application; run the world on the sandbox (--backend docker)")
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


def parse_tools(src: Source, raw: list[dict[str, Any]], defaults: Mapping[str, Any]) -> tuple[Tool, ...]:
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

