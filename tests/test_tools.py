"""Tools: the docstring and type hints are the schema, and validation follows it."""

from __future__ import annotations

from typing import Literal

import pytest

from rehearsal_env import load_world
from rehearsal_env.tools import ToolContext, ToolInputError, tool


@tool("write")
def example(ctx: ToolContext, order_id: int, mode: Literal["a", "b"], tags: list[str], note: str = "") -> None:
    """Do an example thing.

    More words that are not the summary.

    Args:
        order_id: The order.
        mode: Which mode,
            over two lines.
        tags: Labels.
        note: Optional note.
    """


def test_schema_is_openai_function_format() -> None:
    schema = example.schema()
    assert schema["type"] == "function"
    fn = schema["function"]
    assert fn["name"] == "example"
    assert fn["description"] == "Do an example thing. More words that are not the summary."
    params = fn["parameters"]
    assert params["required"] == ["order_id", "mode", "tags"]
    assert params["additionalProperties"] is False
    assert params["properties"]["order_id"] == {"type": "integer", "description": "The order."}
    assert params["properties"]["mode"] == {"type": "string", "enum": ["a", "b"],
                                            "description": "Which mode, over two lines."}
    assert params["properties"]["tags"]["items"] == {"type": "string"}
    assert example.kind == "write"


@pytest.mark.parametrize(("args", "says"), [
    ({"mode": "a", "tags": []}, "missing required argument"),
    ({"order_id": "7", "mode": "a", "tags": []}, "'order_id' must be integer, got str"),
    ({"order_id": True, "mode": "a", "tags": []}, "must be integer, got bool"),
    ({"order_id": 2**63, "mode": "a", "tags": []}, "must fit in 64 bits"),
    ({"order_id": 1, "mode": "a", "tags": ["a\x00b"]}, "NUL character"),
    ({"order_id": 1, "mode": "c", "tags": []}, "must be one of"),
    ({"order_id": 1, "mode": "a", "tags": [1]}, "tags\\[\\]"),
    ({"order_id": 1, "mode": "a", "tags": [], "extra": 1}, "unknown argument"),
    ([1, 2], "must be a JSON object"),
])
def test_invalid_arguments_are_refused(args: object, says: str) -> None:
    with pytest.raises(ToolInputError, match=says):
        example.validate(args)


def test_undocumented_arguments_are_a_definition_error() -> None:
    with pytest.raises(TypeError, match="not documented"):
        @tool("read")
        def bad(ctx: ToolContext, x: int) -> None:
            """No args section."""


def test_shop_has_at_least_twelve_typed_tools_read_and_write() -> None:
    world = load_world("shop")
    kinds = {t.kind for t in world.tools}
    assert len(world.tools) >= 12 and kinds == {"read", "write"}
    for t in world.tools:
        assert t.description and t.schema()["function"]["parameters"]["type"] == "object"
    assert len(world.roles) >= 2
