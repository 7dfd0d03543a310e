"""A world whose tool has a bug an agent's input trips (tests/test_tool_crashes.py, tests/test_attribution.py).

``lookup`` reads a label from a table the world's author forgot a key in (``KeyError``); ``tag`` writes, then
divides by the length of its text (``ZeroDivisionError`` for an empty one, after its write: the rollback
must undo it). Both are the world's defects: each is the tool's crash, returned to the agent as an error.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from rehearsal_env.checks import Check
from rehearsal_env.scenarios import Scenario, Solution, ToolCall
from rehearsal_env.schema import Table, col
from rehearsal_env.tools import ToolContext, tool
from rehearsal_env.worlds import Role, World

NOTES = Table("notes", (col("id", "int"), col("owner"), col("body")))
LABELS = {"red": "urgent", "green": "done"}


@tool("read")
def lookup(ctx: ToolContext, colour: str) -> dict[str, Any]:
    """The label of a colour.

    Args:
        colour: A colour, such as 'red'.
    """
    return {"colour": colour, "label": LABELS[colour]}  # the world's bug: no check that the colour is known


@tool("write")
def tag(ctx: ToolContext, body: str) -> dict[str, Any]:
    """Add a note for ann.

    Args:
        body: The note's text.
    """
    ctx.db.execute("INSERT INTO notes (owner, body) VALUES ('ann', ?)", (body,))
    return {"added": body, "weight": 100 // len(body)}  # the world's bug: an empty body divides by zero


def _rows(seed: int, anchor: date) -> dict[str, list[tuple[Any, ...]]]:
    return {"notes": [(1, "bob", "hi")]}


def _scenarios(world: World) -> list[Scenario]:
    done = ToolCall("finish", {"message": "done"})
    one = Check("one note hello for ann", "SELECT COUNT(*) FROM notes WHERE owner = 'ann' AND body = 'hello'",
                "eq", 1)
    only = Check("no note for anyone but ann and bob", "SELECT COUNT(*) FROM notes WHERE owner NOT IN ('ann', 'bob')",
                 "eq", 0)
    return [
        Scenario(id=f"tag-{i}", world=world.name, split="dev", role="clerk", category="note",
                 request="Add the note 'hello' for ann.", goal_checks=(one,), hard_rules=(only,),
                 reference=Solution("reference", (ToolCall("lookup", {"colour": "red"}),
                                                  ToolCall("tag", {"body": "hello"}), done)),
                 wrong=(Solution("wrong:other-text", (ToolCall("tag", {"body": "bye"}), done)),), turn_limit=8)
        for i in range(3)
    ]


def build_world() -> World:
    return World(
        name="crashy", description="Notes, with two tools that have bugs.", tables=(NOTES,),
        tools=(lookup, tag), roles=(Role("clerk", "Adds notes.", ("lookup", "tag")),), policies=(),
        data_anchor=date(2026, 1, 15), seed=1, generate_rows=_rows, generate_scenarios=_scenarios,
    )
