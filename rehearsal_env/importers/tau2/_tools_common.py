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
MAX_BITS = 4096
"""Largest integer (in bits) any step may produce: four times a float's range, so every value tau2 could turn
into a float still evaluates, while ``((9**999)**999)**30`` is refused before Python computes it."""
MAX_NODES = 4000
"""Most syntax-tree nodes an expression may have (the schema's 4000 characters hold about 2000 numbers)."""


def _too_big(op: ast.operator, left: Any, right: Any) -> bool:
    """Whether ``left op right`` would produce an integer past :data:`MAX_BITS` (decided before computing)."""
    if not (isinstance(left, int) and isinstance(right, int)):
        return False
    if isinstance(op, ast.Pow):
        return right > 0 and abs(left) > 1 and (abs(left).bit_length() - 1) * right > MAX_BITS
    if isinstance(op, ast.Mult):
        return left.bit_length() + right.bit_length() > MAX_BITS + 1
    return False


def _apply(node: ast.AST, values: list[Any]) -> Any:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, int | float) and not isinstance(node.value, bool):
            if isinstance(node.value, int) and node.value.bit_length() > MAX_BITS:
                raise ToolFailed(f"a number is longer than {MAX_BITS} bits")
            return node.value
        raise ToolFailed("invalid syntax")
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        right = values.pop()
        left = values.pop()
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_POWER:
            raise ToolFailed(f"exponent {right} is too large (at most {MAX_POWER})")
        if _too_big(node.op, left, right):
            raise ToolFailed(f"int too large to convert to float (a step passes {MAX_BITS} bits)")
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](values.pop())
    if isinstance(node, ast.Tuple):
        raise ToolFailed("float() argument must be a string or a real number, not 'tuple'")
    raise ToolFailed("invalid syntax")


def _children(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.BinOp):
        return [node.left, node.right]
    if isinstance(node, ast.UnaryOp):
        return [node.operand]
    return []


def _value(tree: ast.Expression) -> Any:
    """The value of ``tree``, evaluated without recursion (a chain of 2000 additions is fine) and with every
    step bounded (:data:`MAX_POWER`, :data:`MAX_BITS`, :data:`MAX_NODES`)."""
    values: list[Any] = []
    stack: list[tuple[ast.AST, bool]] = [(tree.body, False)]
    nodes = 0
    while stack:
        node, ready = stack.pop()
        if ready:
            values.append(_apply(node, values))
            continue
        nodes += 1
        if nodes > MAX_NODES:
            raise ToolFailed(f"the expression is too long (more than {MAX_NODES} numbers and operators)")
        stack.append((node, True))
        stack.extend((child, False) for child in reversed(_children(node)))
    return values.pop()


def evaluate(expression: str) -> str:
    """``expression``'s value as tau2's ``calculate`` gives it: ``str(round(float(value), 2))``."""
    if not all(char in _ALLOWED for char in expression):
        raise ToolFailed("Invalid characters in expression")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise ToolFailed(f"invalid syntax: {exc.msg}") from None
    except (RecursionError, MemoryError):
        raise ToolFailed("the expression is nested too deeply; write it with fewer levels") from None
    try:
        return str(round(float(_value(tree)), 2))
    except (ZeroDivisionError, OverflowError, TypeError, ValueError) as exc:  # as tau2's eval would fail
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
