"""What a turn was given, as a chain's turn record keeps it (:mod:`._replay`): the env notes it at every step."""

from __future__ import annotations

from typing import Any

MAX_KEPT_CHARS = 1 << 20
"""Longest input a turn record keeps (a longer one makes the chain take a full checkpoint)."""


def input_of(action: Any) -> str | None:
    """What a turn record keeps of an input to ``step`` (None: it cannot be kept: not text, or too long)."""
    return action if isinstance(action, str) and len(action) <= MAX_KEPT_CHARS else None


def raised_of(error: BaseException) -> tuple[str, str] | None:
    """What a turn record keeps of a policy's exception: its type's name and its message (None: not keepable)."""
    try:
        message = str(error)
    except Exception:  # a hostile __str__: the env's own record of it decides; this turn is not kept
        return None
    name = type(error).__name__
    return (name, message) if len(message) + len(name) <= MAX_KEPT_CHARS else None
