"""Which argument values the application accepts, found by asking it: the read operations, explored.

Starting from the GET operations without path parameters, each answer's items give candidate values
for the next path parameter: a path ``/a/{x}/b/{y}`` takes ``{x}`` from the items of ``GET /a`` (the
field named ``x``, else ``name``, ``id``, ``slug``, ``key`` or ``number``) and ``{y}`` from the items of
``GET /a/{x}/b`` (or of ``GET /a/``, for ``/a/{x}/``). A value counts only when the application answers
2xx for it (evidence, not a guess).
A query parameter with an enum is asked once per value, so ``?state=all`` finds closed items too.
Everything is bounded: values per parameter, requests in all.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._sandboxed import Runtime

KEY_FIELDS = ("name", "id", "slug", "key", "number", "login")
"""Fields an item's key is read from when none is named like the parameter."""
MAX_VALUES = 50
"""Candidate values per parameter and parent binding."""
MAX_REQUESTS = 600
"""Requests one exploration sends."""


@dataclass(frozen=True)
class Explored:
    """What exploration found."""

    bindings: Mapping[str, tuple[dict[str, Any], ...]]
    """GET path template -> the path-parameter values it answered 2xx for."""
    answers: Mapping[str, Any] = field(default_factory=dict)
    """``METHOD path`` (filled) -> its decoded answer."""
    requests: int = 0
    """Requests sent."""


def _params(path: str) -> list[str]:
    return re.findall(r"\{(\w+)\}", path)


def _items(answer: Any) -> list[dict[str, Any]]:
    if isinstance(answer, list):
        return [a for a in answer if isinstance(a, dict)]
    if isinstance(answer, dict):
        for v in answer.values():
            if isinstance(v, list) and v and isinstance(v[0], dict):
                return [a for a in v if isinstance(a, dict)]
    return []


def key_values(items: Sequence[Mapping[str, Any]], param: str) -> list[Any]:
    """The values of ``param`` in ``items`` (its own field, else a key field), in order, without repeats."""
    for name in (param, *KEY_FIELDS):
        found = [i[name] for i in items if isinstance(i.get(name), str | int) and not isinstance(i.get(name), bool)]
        if found:
            return list(dict.fromkeys(found))[:MAX_VALUES]
    return []


def fill_path(path: str, binding: Mapping[str, Any]) -> str:
    from urllib.parse import quote

    return re.sub(r"\{(\w+)\}", lambda m: quote(str(binding[m.group(1)]), safe=""), path)


def explore(runtime: Runtime, reads: Sequence[Mapping[str, Any]], headers: Mapping[str, str]) -> Explored:
    """Explore the read operations (``{name, path, args}``) on the running application."""
    bindings: dict[str, list[dict[str, Any]]] = {}
    answers: dict[str, Any] = {}
    sent = 0

    def ask(op: Mapping[str, Any], binding: dict[str, Any]) -> Any:
        nonlocal sent
        url = fill_path(op["path"], binding)
        enums = [a for a in op["args"] if a["in"] == "query" and a.get("enum")]
        queries: list[dict[str, Any]] = [{}] + [{a["name"]: v} for a in enums for v in a["enum"]]
        merged: list[Any] = []
        ok = False
        whole: Any = None
        for query in queries:
            if sent >= MAX_REQUESTS:
                break
            sent += 1
            status, data = runtime.request("GET", url, query=query, body=None, headers=headers)
            if 200 <= status < 300:
                ok = True
                whole = data if whole is None else whole
                merged.extend(_items(data))
        if not ok:
            return None
        answers[f"GET {url}"] = whole
        return merged if merged else whole

    by_depth = sorted(reads, key=lambda o: (len(_params(o["path"])), o["path"]))
    collections: dict[str, list[tuple[dict[str, Any], Any]]] = {}
    for op in by_depth:
        params = _params(op["path"])
        found: list[dict[str, Any]] = []
        if not params:
            candidates: list[dict[str, Any]] = [{}]
        else:
            last = params[-1]
            parent = op["path"].split("/{" + last + "}")[0]
            if parent not in collections and parent + "/" in collections:  # /tickets/ lists /tickets/{id}/
                parent += "/"
            candidates = [{**b, last: v} for b, answer in collections.get(parent, ())
                          for v in key_values(_items(answer), last)]
            if not parent or parent not in collections:
                candidates = []
        for binding in candidates:
            answer = ask(op, binding)
            if answer is not None:
                found.append(binding)
                collections.setdefault(op["path"], []).append((binding, answer))
        bindings[op["path"]] = found
    return Explored({k: tuple(v) for k, v in bindings.items()}, answers, sent)


def resource_of(explored: Explored, path: str) -> str | None:
    """The deepest explored GET template whose parameters are a prefix of ``path``'s (the write's resource)."""
    best = None
    for template in explored.bindings:
        if path.startswith(template) and (best is None or len(template) > len(best)) and \
                _params(template) == _params(path)[:len(_params(template))]:
            best = template
    return best
