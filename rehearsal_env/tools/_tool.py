"""Tools: typed functions whose docstring is their schema, tagged read or write.

A world's tool is a plain function ``fn(ctx, **args)``; :func:`tool` wraps it
into a :class:`Tool` whose JSON schema (OpenAI function-calling format) is
derived from the type hints and the docstring's ``Args:`` section, so the
schema an agent reads and the validation an action gets cannot drift apart.
"""

from __future__ import annotations

import inspect
import math
import re
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

ToolKind = Literal["read", "write"]


class ToolInputError(ValueError):
    """The arguments of a tool call do not match its schema (a rejected attempt)."""


class ToolFailed(Exception):
    """The application refused the request; the agent sees status ``error`` with this message."""


@dataclass(frozen=True)
class Tool:
    """One action an agent may take."""

    name: str
    """The name the agent calls."""
    kind: ToolKind
    """``read`` (changes nothing) or ``write`` (changes the world; subject to faults and the stress layer)."""
    description: str
    """What the tool does, from the docstring's first paragraph."""
    parameters: Mapping[str, Any]
    """JSON Schema of the arguments (``type: object``)."""
    fn: Callable[..., Any] = field(repr=False, compare=False)
    """The implementation, ``fn(ctx, **args)``."""

    def schema(self) -> dict[str, Any]:
        """The tool in OpenAI function-calling format."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }

    def validate(self, args: Any) -> dict[str, Any]:
        """Return ``args`` checked against the schema, or raise :class:`ToolInputError`."""
        if not isinstance(args, dict):
            raise ToolInputError(
                f"{self.name}: 'args' must be a JSON object, got {type(args).__name__}"
            )
        props: Mapping[str, Any] = self.parameters["properties"]
        unknown = sorted(set(args) - set(props))
        if unknown:
            raise ToolInputError(
                f"{self.name}: unknown argument(s) {unknown}; it takes {sorted(props) or 'none'}"
            )
        missing = [name for name in self.parameters["required"] if name not in args]
        if missing:
            raise ToolInputError(f"{self.name}: missing required argument(s) {missing}")
        for name, value in args.items():
            _check_value(self.name, name, value, props[name])
        return dict(args)


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "integer": (int,),
    "number": (int, float),
    "string": (str,),
    "boolean": (bool,),
    "array": (list,),
}


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
"""The integers every database backend stores."""


def _check_value(tool: str, name: str, value: Any, schema: Mapping[str, Any]) -> None:
    expected = schema["type"]
    ok = isinstance(value, _JSON_TYPES[expected])
    if expected in ("integer", "number") and isinstance(value, bool):
        ok = False
    if not ok:
        raise ToolInputError(
            f"{tool}: argument {name!r} must be {expected}, got {type(value).__name__} {value!r}"
        )
    if "enum" in schema and value not in schema["enum"]:
        raise ToolInputError(
            f"{tool}: argument {name!r} must be one of {schema['enum']}, got {value!r}"
        )
    if expected == "array":
        for item in value:
            _check_value(tool, f"{name}[]", item, schema["items"])
    if expected == "string" and len(value) > 4000:
        raise ToolInputError(f"{tool}: argument {name!r} is longer than 4000 characters")
    if expected == "string" and "\x00" in value:
        raise ToolInputError(f"{tool}: argument {name!r} contains a NUL character (\\u0000); send text without it")
    if expected == "integer" and not INT64_MIN <= value <= INT64_MAX:
        raise ToolInputError(f"{tool}: argument {name!r} must fit in 64 bits ({INT64_MIN} to {INT64_MAX}), "
                             f"got {value}")
    if expected == "number" and not math.isfinite(value):
        raise ToolInputError(f"{tool}: argument {name!r} must be a finite number, got {value!r}")


def _json_schema(annotation: Any) -> dict[str, Any]:
    origin = typing.get_origin(annotation)
    if origin is Literal:
        choices = list(typing.get_args(annotation))
        return {**_json_schema(type(choices[0])), "enum": choices}
    if origin is list:
        (item,) = typing.get_args(annotation)
        return {"type": "array", "items": _json_schema(item)}
    simple = {int: "integer", float: "number", str: "string", bool: "boolean"}
    if annotation in simple:
        return {"type": simple[annotation]}
    raise TypeError(f"tool argument type {annotation!r} has no JSON schema; use int, float, str, bool, list or Literal")


_ARG_LINE = re.compile(r"^ {4}(\w+):\s*(.*)$")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The first paragraph and the ``Args:`` entries of a Google-style docstring."""
    summary, _, rest = inspect.cleandoc(doc).partition("\nArgs:\n")
    args: dict[str, str] = {}
    current = None
    for line in rest.splitlines():
        match = _ARG_LINE.match(line)
        if match:
            current = match.group(1)
            args[current] = match.group(2).strip()
        elif current and line.startswith("     "):
            args[current] += " " + line.strip()
        else:
            current = None
    return " ".join(summary.split()), args


def tool(kind: ToolKind) -> Callable[[Callable[..., Any]], Tool]:
    """Make a :class:`Tool` of ``fn(ctx, **args)``; its docstring must document every argument."""

    def wrap(fn: Callable[..., Any]) -> Tool:
        if not fn.__doc__:
            raise TypeError(f"tool {fn.__name__} needs a docstring: it is the tool's schema")
        description, arg_docs = _parse_docstring(fn.__doc__)
        hints = typing.get_type_hints(fn)
        properties: dict[str, Any] = {}
        required: list[str] = []
        for i, (name, param) in enumerate(inspect.signature(fn).parameters.items()):
            if i == 0:
                continue  # ctx
            if name not in arg_docs:
                raise TypeError(f"tool {fn.__name__}: argument {name!r} is not documented under Args:")
            properties[name] = {**_json_schema(hints[name]), "description": arg_docs[name]}
            if param.default is inspect.Parameter.empty:
                required.append(name)
        parameters = {
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": False,
        }
        return Tool(name=fn.__name__, kind=kind, description=description, parameters=parameters, fn=fn)

    return wrap
