"""Writing TOML: the world folder's files are plain text a person reads and edits, written the same bytes every time.

Only what a world folder holds is written: tables of strings, whole numbers, floats, booleans, dates,
arrays and inline tables. Strings are JSON-quoted (a valid TOML basic string); ``None`` has no TOML
form and is refused, so a caller leaves the key out instead.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from datetime import date
from typing import Any

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def key(name: str) -> str:
    """A key as TOML writes it: bare when it can be, else quoted."""
    return name if _BARE.match(name) else json.dumps(name)


def value(v: Any) -> str:
    """One TOML value on one line."""
    if v is None:
        raise ValueError("TOML has no null: leave the key out")
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, date):
        return v.isoformat()
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, Mapping):
        return "{ " + ", ".join(f"{key(str(k))} = {value(x)}" for k, x in v.items()) + " }" if v else "{}"
    if isinstance(v, Sequence):
        return "[" + ", ".join(value(x) for x in v) + "]"
    raise ValueError(f"no TOML form for a {type(v).__name__}")


def table(header: str, body: Mapping[str, Any], *, array: bool = False) -> str:
    """``[header]`` (or ``[[header]]``) and its keys, one a line; keys whose value is None are left out."""
    lines = [f"[[{header}]]" if array else f"[{header}]"]
    lines += [f"{key(k)} = {value(v)}" for k, v in body.items() if v is not None]
    return "\n".join(lines) + "\n"


def top(body: Mapping[str, Any]) -> str:
    """Top-level keys, one a line."""
    return "".join(f"{key(k)} = {value(v)}\n" for k, v in body.items() if v is not None)
