"""Tools every scenario has, whatever the world: finish, give_up, ask_customer, retry_operation."""

from __future__ import annotations

from typing import Any

from ..schema import Table, col
from ._context import ToolContext
from ._tool import tool

FINAL_ANSWERS = Table("final_answers", (col("id", "int"), col("message"), col("answer"), col("answered_at")))
"""What the agent said when it called ``finish``: checks of question scenarios read the answer here."""


@tool("read")
def finish(ctx: ToolContext, message: str, answer: str = "") -> dict[str, Any]:
    """Say the work is done and end the episode; the answer is recorded for the checks.

    Args:
        message: What you tell the customer in closing.
        answer: The answer to the customer's question, when they asked one (a number or a short text).
    """
    ctx.db.execute(
        "INSERT INTO final_answers (message, answer, answered_at) VALUES (?, ?, ?)",
        (message, answer, ctx.now),
    )
    return {"ended": "done"}


@tool("read")
def give_up(ctx: ToolContext, reason: str) -> dict[str, Any]:
    """Stop without finishing, and say why; the episode ends.

    Args:
        reason: Why the request cannot be done.
    """
    return {"ended": "gave_up"}


@tool("read")
def ask_customer(ctx: ToolContext, question: str) -> dict[str, Any]:
    """Ask the customer a question and wait for the answer. Interrupt them only when needed.

    Args:
        question: The question, in plain words.
    """
    return {"answer": ctx.ask(question)}


@tool("write")
def retry_operation(ctx: ToolContext, operation_id: str) -> Any:
    """Safely re-send an earlier change whose outcome is unknown; it never applies twice.

    Args:
        operation_id: The operation id from the earlier result (e.g. "op-0003").
    """
    return ctx.replay(operation_id)


ENDING_TOOLS = {"finish": "done", "give_up": "gave_up"}
BUILTIN_TOOLS = (finish, give_up, ask_customer)
"""Built-ins every role has; ``retry_operation`` is added only where a scenario offers it."""
