"""What happens to a write before it reaches the application, and the customer messages around it.

The events layer is the only place that decides this, from the scenario (its
change of request and its faults) and the stress-layer switch. One instance
serves one episode.

**A write**, before it runs, meets these gates in this order (the first that
applies decides; nothing after it is consulted or consumed):

1. *held*. The customer's change of request arrives with this step (a change
   scheduled ``before_first_write`` arrives with the first write the agent
   sends; one scheduled at ``turn`` N arrives at the start of turn N, whatever
   the action) and no write has been carried out yet. The agent wrote this
   call before it could read the new message, so it is not carried out: the
   agent gets exactly :data:`HELD_MESSAGE` (status ``error``, no operation id,
   nothing to retry) and the change in the same observation's messages.
2. *stress refusal* (stress layer on). The first write that is not held is
   refused once with a transient, retryable error; it never reached the
   application. This is not a fault: every episode has it.
3. *scenario faults*. Calls of each tool that pass gates 1 and 2 are numbered
   1, 2, ...; a :class:`~rehearsal_env.scenarios.Fault` on call N of the tool
   either refuses it (``refuse``: not carried out, retryable error) or carries
   it out and hides the result (``unknown_outcome``: status ``unknown``,
   :data:`UNKNOWN_MESSAGE`). An unknown outcome only hides a write the
   application carried out; if the application refuses that call the agent
   sees the refusal and no fault is counted.
4. Otherwise the write is carried out.

``retry_operation`` is not a new write: it meets none of these gates (see
:mod:`._journal`), except that a retry which would carry an operation out for
the first time is held like any write when the change arrives in the same step.

**After a write** (:meth:`Events.after_write`):

- a change scheduled ``after_first_write`` arrives with the first write the
  application carried out, whether the agent saw ``ok`` or ``unknown``;
- the stress layer's repeat: the customer repeats the current request once,
  with the first write the agent *saw* succeed (status ``ok``, including a
  ``retry_operation`` that returned the result), unless that same step
  brought the change. A careful agent does not do the work twice.

Messages queue in an outbox that the episode drains into each observation.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from enum import Enum
from typing import Any

from ..scenarios import Scenario
from ._customer import Customer

HELD_MESSAGE = "A new message from the customer arrived before this change was made"
"""Exactly what the agent gets instead of the result of a held write."""
STRESS_MESSAGE = "the service is temporarily unavailable (503); the change was not made, try again"
"""The stress layer's one transient refusal."""
REFUSE_MESSAGE = "the request was refused by the service (502); nothing was changed"
"""A ``refuse`` fault."""
UNKNOWN_MESSAGE = "request timed out; the outcome is unknown"
"""An ``unknown_outcome`` fault (the write was carried out)."""


class WriteDecision(Enum):
    """What the events layer decided for one write."""

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

    HELD_MESSAGE = HELD_MESSAGE
    STRESS_MESSAGE = STRESS_MESSAGE
    REFUSE_MESSAGE = REFUSE_MESSAGE
    UNKNOWN_MESSAGE = UNKNOWN_MESSAGE

    def __init__(self, scenario: Scenario, customer: Customer, *, stress: bool) -> None:
        self._scenario = scenario
        self._customer = customer
        self._change_turn: int | None = None
        """The turn the change arrived (None: not yet, or the scenario has none)."""
        self._stress_refusal_due = stress
        self._repeat_due = stress
        self._applied = False
        """Whether the application has carried out a write this episode."""
        self._calls: Counter[str] = Counter()
        self._outbox: list[str] = []

    # -- the change of request -------------------------------------------------
    @property
    def change_arrived(self) -> bool:
        """Whether the customer has changed the request by now."""
        return self._change_turn is not None

    def _deliver_change(self, turn: int) -> None:
        self._change_turn = turn
        self._outbox.append(self._customer.change())

    def start_turn(self, turn: int) -> None:
        """Start of a step: a change scheduled for this turn arrives now, whatever the action is."""
        change = self._scenario.change
        if change and change.when == "turn" and not self.change_arrived and turn >= (change.turn or 0):
            self._deliver_change(turn)

    # -- writes ----------------------------------------------------------------
    def before_write(self, tool: str, turn: int) -> WriteDecision:
        """Decide what happens to a write of ``tool`` sent at ``turn`` (gates 1-4 of the module docstring)."""
        change = self._scenario.change
        if change and change.when == "before_first_write" and not self.change_arrived:
            self._deliver_change(turn)
        if self.holds(turn):
            return WriteDecision.HOLD
        if self._stress_refusal_due:
            self._stress_refusal_due = False
            return WriteDecision.STRESS_REFUSE
        self._calls[tool] += 1
        for fault in self._scenario.faults:
            if fault.tool == tool and fault.call == self._calls[tool]:
                return WriteDecision.REFUSE if fault.kind == "refuse" else WriteDecision.UNKNOWN
        return WriteDecision.EXECUTE

    def holds(self, turn: int) -> bool:
        """Whether a write carried out at ``turn`` would be held: the change arrived with this step and
        nothing was carried out yet (gate 1; a ``before_first_write`` change arrives in :meth:`before_write`)."""
        return self._change_turn == turn and not self._applied

    def after_write(self, turn: int, *, applied: bool, seen_ok: bool) -> None:
        """A write step finished: ``applied`` by the application now, ``seen_ok`` by the agent."""
        change = self._scenario.change
        if applied and not self._applied:
            self._applied = True
            if change and change.when == "after_first_write" and not self.change_arrived:
                self._deliver_change(turn)
        if seen_ok and self._repeat_due and self._change_turn != turn:
            self._repeat_due = False
            self._outbox.append(self._customer.repeat())

    # -- forks and checkpoints -------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """Everything this schedule has decided so far, as JSON-able values (see :meth:`load_state`)."""
        return {"change_turn": self._change_turn, "stress_refusal_due": self._stress_refusal_due,
                "repeat_due": self._repeat_due, "applied": self._applied, "calls": dict(self._calls),
                "outbox": list(self._outbox)}

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Continue from :meth:`state` of another instance of the same scenario (the messages not yet
        drained included)."""
        self._change_turn = None if state["change_turn"] is None else int(state["change_turn"])
        self._stress_refusal_due = bool(state["stress_refusal_due"])
        self._repeat_due = bool(state["repeat_due"])
        self._applied = bool(state["applied"])
        self._calls = Counter({str(k): int(v) for k, v in state["calls"].items()})
        self._outbox = [str(m) for m in state["outbox"]]

    # -- messages ----------------------------------------------------------------
    def drain(self) -> list[str]:
        """The customer messages that arrived since the last call, oldest first."""
        out, self._outbox = self._outbox, []
        return out
