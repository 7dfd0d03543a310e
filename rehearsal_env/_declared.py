"""Configuration files declared as pydantic models, with errors that name the file and the line.

A configuration file (an agent profile today) is TOML read into a dict and validated by a pydantic
model that declares every key, its type and its bounds (``extra="forbid"``: an unknown key is an
error). :func:`validated` turns the first validation error into one ``ValueError`` line::

    support-bot.toml:9: expected sampling.temperature in [0, 2], got 3

The line is found in the text itself (the key's ``key =`` line under its ``[table]`` header; a key
of an inline table points at the line of the table's key). A model may give its own wording for a
field's error (``messages``: a template with ``{got}``), so a message stays what its users know.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)

_TABLE = re.compile(r"^\s*\[\s*([A-Za-z0-9_.\-\s\"']+?)\s*\]\s*(#.*)?$")
_KEY = re.compile(r"^\s*([A-Za-z0-9_\-]+|\"[^\"]*\")\s*=")


def read_toml(text: str, source: str) -> dict[str, Any]:
    """``text`` as TOML.

    Raises:
        ValueError: ``source:LINE: not valid TOML (...)``.
    """
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line = re.search(r"line (\d+)", str(exc))
        raise ValueError(f"{source}{':' + line[1] if line else ''}: not valid TOML ({exc})") from None


def line_of(text: str, loc: Sequence[str | int]) -> int | None:
    """The 1-based line that sets the key at ``loc`` (``("sampling", "temperature")``), or of the closest
    enclosing key or table found; None when nothing of it is in the text."""
    keys = [str(k) for k in loc if isinstance(k, str)]
    best: tuple[int, int] | None = None  # (how many keys of loc matched, line)
    table: list[str] = []
    for number, raw in enumerate(text.splitlines(), 1):
        header = _TABLE.match(raw)
        if header:
            table = [part.strip().strip("\"'") for part in header[1].split(".")]
            if table == keys[:len(table)] and (best is None or len(table) > best[0]):
                best = (len(table), number)
            continue
        key = _KEY.match(raw)
        if key is None:
            continue
        path = [*table, key[1].strip('"')]
        if path == keys[:len(path)] and (best is None or len(path) > best[0]):
            best = (len(path), number)
    return best[1] if best else None


def validated(model: type[M], data: Mapping[str, Any], *, text: str, source: str,
              messages: Mapping[str, str] | None = None) -> M:
    """``data`` (read from ``text``) validated by ``model``.

    Raises:
        ValueError: ``source:LINE: message`` for the first error; ``messages`` maps a dotted key
            (``sampling.temperature``) to the wording of its error (``{got}``: the value given).
    """
    try:
        return model.model_validate(dict(data))
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        loc = [k for k in error["loc"] if isinstance(k, str | int)]
        dotted = ".".join(str(k) for k in loc)
        got = error.get("input")
        if error["type"] == "value_error":  # a model's own rule: its message as written
            message = str(error.get("ctx", {}).get("error", error["msg"]))
        elif error["type"] == "extra_forbidden":
            parent = [str(k) for k in loc[:-1]]
            where = f"[{'.'.join(parent)}] " if parent else ""
            fields = _fields(model, parent)
            message = f"unknown {where}key(s) [{loc[-1]!r}]; known: {', '.join(fields)}"
        elif messages and dotted in messages:
            message = messages[dotted].format(got=repr(got))
        else:
            message = f"{dotted}: {error['msg'].lower()}, got {got!r}"
        line = line_of(text, loc)
        raise ValueError(f"{source}{f':{line}' if line else ''}: {message}") from None


def _fields(model: type[BaseModel], path: Sequence[str]) -> list[str]:
    """The declared keys of the (nested) model at ``path``."""
    current: Any = model
    for name in path:
        field = current.model_fields.get(name)
        annotation = getattr(field, "annotation", None)
        current = next((a for a in (annotation, *getattr(annotation, "__args__", ())) if isinstance(a, type)
                        and issubclass(a, BaseModel)), None)
        if current is None:
            return []
    return sorted(n for n, f in current.model_fields.items() if not f.exclude)
