"""Phases 4 and 6, *discover* and *adapt*: the application's operations from its OpenAPI document, as typed tools.

The document is hostile input: it is bounded (bytes, operations, parameters, nesting), parsed with
the JSON parser, and every name that becomes a tool name or a path is checked. Each operation
becomes one ``http`` tool: ``read`` for GET, ``write`` otherwise; its arguments are its path and
query parameters and the properties of its JSON request body, with their types, enums and
descriptions (a ``$ref`` to ``components/schemas`` is followed once); a ``readOnly`` property is the
application's to set, never an argument.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ._errors import CompileError

MAX_OPENAPI_BYTES = 2 * 2**20
"""The largest OpenAPI document read."""
MAX_OPERATIONS = 200
"""Operations a document may describe."""
MAX_ARGS = 32
"""Arguments one operation may take."""
METHODS = ("get", "post", "put", "patch", "delete")
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
_PATH = re.compile(r"^/[A-Za-z0-9_./{}-]{0,300}$")
_TYPES = {"integer": "integer", "number": "number", "string": "string", "boolean": "boolean"}
PHASE = "discover"


def parse_document(text: str) -> dict[str, Any]:
    """The document as JSON, bounded."""
    if len(text.encode()) > MAX_OPENAPI_BYTES:
        raise CompileError(PHASE, f"expected an OpenAPI document of at most {MAX_OPENAPI_BYTES:,} bytes; got "
                           f"{len(text.encode()):,}. Fix: give the document of the operations agents use")
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise CompileError(PHASE, f"expected the OpenAPI document as JSON; it does not parse ({str(exc)[:120]}). "
                           "Fix: give a valid openapi.json") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("paths"), dict):
        raise CompileError(PHASE, "expected an OpenAPI 3 document with a 'paths' object; found none. Fix: give the "
                           "application's openapi.json")
    return doc


def _schema(doc: dict[str, Any], schema: Any) -> dict[str, Any]:
    if isinstance(schema, dict) and isinstance(schema.get("$ref"), str):
        ref = schema["$ref"]
        if not ref.startswith("#/components/schemas/"):
            return {}
        found = doc.get("components", {}).get("schemas", {}).get(ref.rsplit("/", 1)[-1])
        return found if isinstance(found, dict) else {}
    return schema if isinstance(schema, dict) else {}


def _arg(name: str, schema: dict[str, Any], description: Any, required: bool, where: str) -> dict[str, Any]:
    kind = _TYPES.get(str(schema.get("type", "string")), "string")
    out: dict[str, Any] = {"name": name, "type": kind, "in": where, "required": bool(required),
                           "description": str(description or schema.get("description") or name)[:300]}
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and all(isinstance(e, str | int) and not isinstance(e, bool) for e in enum):
        out["enum"] = list(enum)[:50]
    return out


def operations(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Every operation of the document (JSON-able), in path then method order."""
    out: list[dict[str, Any]] = []
    for path in sorted(doc["paths"]):
        item = doc["paths"][path]
        if not isinstance(item, dict):
            continue
        if not isinstance(path, str) or not _PATH.match(path):
            raise CompileError(PHASE, f"expected OpenAPI paths of letters, digits and {{params}}; got {path[:80]!r}. "
                               "Fix: correct the document")
        for method in METHODS:
            op = item.get(method)
            if not isinstance(op, dict):
                continue
            if len(out) >= MAX_OPERATIONS:
                raise CompileError(PHASE, f"expected at most {MAX_OPERATIONS} operations; the document has more. "
                                   "Fix: give the document of the operations agents use")
            name = op.get("operationId")
            if not isinstance(name, str) or not _NAME.match(name):
                raise CompileError(PHASE, f"expected an operationId of letters, digits and _ for {method.upper()} "
                                   f"{path}; got {str(name)[:80]!r}. Fix: name every operation")
            args: list[dict[str, Any]] = []
            for p in [*item.get("parameters", []), *op.get("parameters", [])]:
                if isinstance(p, dict) and p.get("in") in ("path", "query") and isinstance(p.get("name"), str):
                    args.append(_arg(p["name"], _schema(doc, p.get("schema")), p.get("description"),
                                     p["in"] == "path" or bool(p.get("required")), p["in"]))
            body = op.get("requestBody", {})
            schema = _schema(doc, body.get("content", {}).get("application/json", {}).get("schema")
                             if isinstance(body, dict) else None)
            required = set(schema.get("required", [])) if isinstance(schema.get("required"), list) else set()
            for prop, sub in (schema.get("properties") or {}).items():
                if _schema(doc, sub).get("readOnly") is True:  # the application's to set: never an argument
                    continue
                args.append(_arg(str(prop), _schema(doc, sub), _schema(doc, sub).get("description"),
                                 prop in required, "body"))
            if len(args) > MAX_ARGS or any(not _NAME.match(a["name"]) for a in args):
                raise CompileError(PHASE, f"expected at most {MAX_ARGS} arguments named with letters, digits and _ "
                                   f"for {name}; got {[a['name'] for a in args][:8]}. Fix: correct the document")
            missing = [p for p in re.findall(r"\{(\w+)\}", path) if p not in {a["name"] for a in args}]
            if missing:
                raise CompileError(PHASE, f"expected {name}'s path parameters {missing} to be declared; they are "
                                   "not. Fix: declare them under parameters")
            out.append({"name": name, "method": method.upper(), "path": path,
                        "summary": str(op.get("summary") or op.get("description") or name)[:300], "args": args})
    if not out:
        raise CompileError(PHASE, "expected at least one operation in the OpenAPI document; found none")
    if len({o["name"] for o in out}) != len(out):
        raise CompileError(PHASE, "expected every operationId once; some repeat. Fix: name each operation once")
    return out


def tool_of(op: dict[str, Any]) -> dict[str, Any]:
    """The ``[[tool]]`` table of one operation (world.toml's http tool)."""
    args: dict[str, Any] = {}
    for a in op["args"]:
        spec: dict[str, Any] = {"type": a["type"], "description": a["description"]}
        if "enum" in a:
            spec["enum"] = a["enum"]
        if not a["required"]:
            spec["required"] = False
        args[a["name"]] = spec
    tool: dict[str, Any] = {"name": op["name"], "kind": "read" if op["method"] == "GET" else "write", "type": "http",
                            "description": op["summary"] + ".", "method": op["method"], "path": op["path"]}
    body = [a["name"] for a in op["args"] if a["in"] == "body"]
    query = [a["name"] for a in op["args"] if a["in"] == "query"]
    if op["method"] in ("POST", "PUT", "PATCH"):
        tool["body"] = body
        if query:
            tool["query"] = query
    tool["args"] = args
    return tool
