"""Tools: typed functions whose docstring is their JSON schema, tagged read or write."""

from ._context import ToolContext
from ._tool import Tool, ToolFailed, ToolInputError, ToolKind, tool
from .builtin import BUILTIN_TOOLS, ENDING_TOOLS, retry_operation

__all__ = [
    "BUILTIN_TOOLS",
    "ENDING_TOOLS",
    "Tool",
    "ToolContext",
    "ToolFailed",
    "ToolInputError",
    "ToolKind",
    "retry_operation",
    "tool",
]
