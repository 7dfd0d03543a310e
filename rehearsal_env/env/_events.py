"""What happens to a write before it reaches the application: held, stress-refused, or a fault.

The events layer is the only place that decides this, from the scenario (its
change of request and its faults) and the stress layer switch.
"""

from __future__ import annotations

from collections import Counter
from enum import Enum

from ..scenarios import Scenario
from ._customer import Customer


class WriteDecision(Enum):
    HOLD = "hold"
    """The customer's change arrived first: not carried out."""
    STRESS_REFUSE = "stress_refuse"
    """The stress layer refuses the agent's first change once."""
    REFUSE = "refuse"
    """A scenario fault: refused, not carried out."""
    UNKNOWN = "unknown"
    """A scenario fault: carried out, but the agent is told the outcome is unknown."""
    EXECUTE = "execute"
    """Carried out normally."""


class Events:
    """The schedule of one episode's events (a fresh instance per episode)."""

    HELD_MESSAGE = "A new message from the customer arrived before this change was made"
    STRESS_MESSAGE = "the service is temporarily unavailable (503); the change was not made, try again"
    REFUSE_MESSAGE = "the request was refused by the service (502); nothing was changed"
    UNKNOWN_MESSAGE = "request timed out; the outcome is unknown"

    def __init__(self, scenario: Scenario, *, stress: bool) -> None:
        self._scenario = scenario
        self._stress = stress
        self._change_delivered = scenario.change is None
        self._stress_refused = not stress
        self._repeated = not stress
        self._first_write_done = False
        self._calls: Counter[str] = Counter()

    def change_due(self, turn: int) -> bool:
        """Whether a change scheduled for this turn arrives now."""
        change = self._scenario.change
        if not self._change_delivered and change and change.when == "turn" and change.turn == turn:
            self._change_delivered = True
            return True
        return False

    def before_write(self, tool: str) -> WriteDecision:
        """Decide what happens to a write of ``tool`` about to be sent."""
        change = self._scenario.change
        if not self._change_delivered and change and change.when == "before_first_write":
            self._change_delivered = True
            return WriteDecision.HOLD
        if not self._stress_refused:
            self._stress_refused = True
            return WriteDecision.STRESS_REFUSE
        self._calls[tool] += 1
        for fault in self._scenario.faults:
            if fault.tool == tool and fault.call == self._calls[tool]:
                return WriteDecision.REFUSE if fault.kind == "refuse" else WriteDecision.UNKNOWN
        return WriteDecision.EXECUTE

    def after_write(self, customer: Customer) -> list[str]:
        """Customer messages that follow a write carried out (a change, or the stress repeat)."""
        if self._first_write_done:
            return []
        self._first_write_done = True
        change = self._scenario.change
        if not self._change_delivered and change and change.when == "after_first_write":
            self._change_delivered = True
            return [customer.change()]
        if not self._repeated:
            self._repeated = True
            return [customer.repeat()]
        return []
