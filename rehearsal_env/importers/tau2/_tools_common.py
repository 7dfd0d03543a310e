"""tau2's generic tools: ``calculate`` and ``transfer_to_human_agents`` (recorded in ``transfers``)."""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

from ...tools import ToolContext, ToolFailed, tool

_ALLOWED = set("0123456789+-*/(). ")
_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Pow: operator.pow, ast.Mod: operator.mod,
}
_UNARY: dict[type, Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
MAX_POWER = 1000
"""Largest exponent evaluated (an arithmetic expression, not a way to exhaust memory)."""


def _value(node: ast.AST) -> Any:
    if isinstance(node, ast.Expression):
        return _value(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _value(node.left), _value(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_POWER:
            raise ToolFailed(f"exponent {right} is too large (at most {MAX_POWER})")
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_value(node.operand))
    if isinstance(node, ast.Tuple):
        raise ToolFailed("float() argument must be a string or a real number, not 'tuple'")
    raise ToolFailed("invalid syntax")


def evaluate(expression: str) -> str:
    """``expression``'s value as tau2's ``calculate`` gives it: ``str(round(float(value), 2))``."""
    if not all(char in _ALLOWED for char in expression):
        raise ToolFailed("Invalid characters in expression")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise ToolFailed(f"invalid syntax: {exc.msg}") from None
    try:
        return str(round(float(_value(tree)), 2))
    except (ZeroDivisionError, OverflowError) as exc:
        raise ToolFailed(str(exc)) from None


@tool("read")
def calculate(ctx: ToolContext, expression: str) -> str:
    """Calculate the result of a mathematical expression.

    Args:
        expression: The mathematical expression to calculate, such as '2 + 2'. The expression can contain
            numbers, operators (+, -, *, /), parentheses, and spaces.
    """
    return evaluate(expression)


@tool("write")
def transfer_to_human_agents(ctx: ToolContext, summary: str) -> str:
    """Transfer the user to a human agent, with a summary of the user's issue. Only transfer if the user
    explicitly asks for a human agent, or given the policy and the available tools, you cannot solve the
    user's issue.

    Args:
        summary: A summary of the user's issue.
    """
    ctx.db.execute("INSERT INTO transfers (summary, transferred_at) VALUES (?, ?)", (summary, ctx.now))
    return "Transfer successful"
