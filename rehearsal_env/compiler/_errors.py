"""The one error a compile raises: which phase failed, what it expected, what arrived, how to fix it."""

from __future__ import annotations


class CompileError(ValueError):
    """A compile phase failed; ``str()`` is one line naming the phase (the phases done so far are kept)."""

    def __init__(self, phase: str, message: str) -> None:
        self.phase = phase
        self.detail = " ".join(message.split())
        super().__init__(f"compile phase {phase}: {self.detail}")
