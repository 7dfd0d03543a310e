"""What a tool sees when it runs: the database, the frozen clock, the outside services."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..backends import Database
from ..services import OutsideService


@dataclass(frozen=True)
class ToolContext:
    """Passed as the first argument of every tool function."""

    db: Database
    """The episode's database (application access)."""
    now: str
    """The world's frozen clock, ISO-8601 (``data_anchor`` at noon); never the wall clock."""
    operation_id: str
    """This call's operation id, used as the idempotency key for outside services."""
    ask: Callable[[str], str] = field(repr=False)
    """Ask the simulated customer a question (for ``ask_customer``)."""
    replay: Callable[[str], Any] = field(repr=False)
    """Re-send an earlier operation by id (for ``retry_operation``)."""

    def service(self, name: str) -> OutsideService:
        """The emulated outside service ``name`` (``payments`` or ``email``) for this call."""
        return OutsideService(name=name, db=self.db, now=self.now, idempotency_key=self.operation_id)
