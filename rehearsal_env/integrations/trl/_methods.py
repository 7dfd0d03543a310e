"""A tool's JSON schema as a Python method TRL can call and read.

TRL (``GRPOTrainer(environment_factory=...)``) exposes every public method of the
environment class as a tool, and the chat template gets each one's schema from
``transformers.utils.get_json_schema``: the name, the signature's type hints and
the Google-style docstring. :func:`tool_method` builds that method from our
:class:`~rehearsal_env.tools.Tool` so that ``get_json_schema`` gives our schema
back: keyword-only parameters in the schema's order (so ``required`` keeps its
order), ``Literal`` for an ``enum``, ``list[T]`` for an array, and the defaults of
the world's own function for optional arguments.

The method's body takes ``**arguments``: whatever the model sent reaches the env,
which validates it on the agent's side (an unknown or mistyped argument is a
rejected attempt the model reads about, as in the Gymnasium env), never a
``TypeError`` raised before the env saw the call.
"""

from __future__ import annotations

import inspect
import keyword
from collections.abc import Callable, Mapping
from typing import Any, Literal

from ...tools import Tool

RESERVED = frozenset({"reset", "get_reward"})
"""Names TRL gives a meaning of its own; a tool may not take them."""

_SCALARS: dict[str, type] = {"integer": int, "number": float, "string": str, "boolean": bool}


def python_type(schema: Mapping[str, Any]) -> Any:
    """The type hint whose ``get_json_schema`` form is ``schema`` (without its description)."""
    kind = schema["type"]
    if "enum" in schema:
        return Literal[tuple(schema["enum"])]
    if kind == "array":
        return list[python_type(schema["items"])]  # type: ignore[misc]
    if kind not in _SCALARS:
        raise TypeError(f"tool argument schema {dict(schema)!r} has no Python type; expected integer, number, "
                        "string, boolean, an enum of those, or an array of them")
    return _SCALARS[kind]


def docstring(tool: Tool) -> str:
    """The Google-style docstring of ``tool``: its description, then ``Args:`` with every argument's description."""
    props: Mapping[str, Any] = tool.parameters["properties"]
    text = tool.description
    if props:
        text += "\n\nArgs:\n" + "\n".join(f"    {name}: {p.get('description') or name}" for name, p in props.items())
    return text


def tool_method(tool: Tool, call: Callable[[Any, str, dict[str, Any]], str]) -> Callable[..., str]:
    """A method ``name(self, *, arg: T, ...)`` for ``tool`` that returns ``call(self, name, arguments)`` (text).

    The signature carries no return hint, so ``get_json_schema`` adds no ``return`` entry: the schema
    is exactly the tool's, less ``additionalProperties`` (which ``get_json_schema`` never writes).

    Raises:
        ValueError: the tool's name is not a Python identifier or is one TRL reserves (rename the tool).
    """
    name = tool.name
    if not name.isidentifier() or keyword.iskeyword(name) or name.startswith("_") or name in RESERVED:
        raise ValueError(f"tool {name!r} cannot be a TRL environment method: expected a public Python identifier "
                         f"other than {sorted(RESERVED)}; rename the tool")
    defaults = {}
    try:
        defaults = {k: p.default for k, p in inspect.signature(tool.fn).parameters.items()
                    if p.default is not inspect.Parameter.empty}
    except (TypeError, ValueError):  # a tool whose function has no signature: no defaults to show
        pass
    required = set(tool.parameters["required"])
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    for arg, schema in tool.parameters["properties"].items():
        annotations[arg] = python_type(schema)
        default = inspect.Parameter.empty if arg in required else defaults.get(arg)
        params.append(inspect.Parameter(arg, inspect.Parameter.KEYWORD_ONLY, default=default,
                                        annotation=annotations[arg]))

    def method(self: Any, **arguments: Any) -> str:
        return call(self, name, arguments)

    method.__name__ = name
    method.__qualname__ = name
    method.__doc__ = docstring(tool)
    method.__annotations__ = annotations
    method.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    return method
