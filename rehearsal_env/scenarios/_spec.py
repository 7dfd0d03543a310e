"""Scenario specs: the customer's request, events during the work, checks and solutions.

Everything here is a frozen dataclass; a world produces its scenarios from
templates and seeded parameters (see each world's ``scenarios`` module), and
:func:`rehearsal_env.scenarios.load_scenarios` reads the same specs from TOML.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..checks import Check

Split = Literal["train", "dev", "holdout"]
SPLITS: tuple[Split, ...] = ("train", "dev", "holdout")


@dataclass(frozen=True)
class ToolCall:
    """One action: a tool name and its arguments."""

    tool: str
    """The tool's name."""
    args: Mapping[str, Any] = field(default_factory=dict)
    """The arguments, as JSON values."""

    def to_action(self) -> str:
        """The action text an env's ``step`` takes."""
        return json.dumps({"tool": self.tool, "args": dict(self.args)}, sort_keys=True)


@dataclass(frozen=True)
class Solution:
    """A scripted way to play a scenario: calls in order, and how to react to trouble.

    The reactions make one script valid whatever the stress layer and faults do:
    a call refused with a retryable error is sent again (or ignored); a write
    held because the customer's message arrived first is sent again (the script
    already has the final request's call) or skipped (the script's next calls
    follow the new message); after an unknown outcome the player either re-sends
    safely with ``retry_operation`` (careful) or repeats the write (careless).
    """

    name: str
    """``reference`` or ``wrong:<what-it-does-wrong>``."""
    calls: tuple[ToolCall, ...]
    """The calls to make, in order (ending with ``finish`` or ``give_up``)."""
    on_refusal: Literal["retry", "ignore"] = "retry"
    """After a retryable error: send the call again, or move on as if it worked."""
    on_unknown: Literal["retry_operation", "repeat"] = "retry_operation"
    """After an unknown outcome: ``retry_operation(operation_id)``, or repeat the write."""
    on_held: Literal["resend", "continue"] = "resend"
    """After a held write: send the same call again, or go on with the next call."""


@dataclass(frozen=True)
class RequestChange:
    """The customer changes the request during the work."""

    when: Literal["before_first_write", "after_first_write", "turn"]
    """When the new message arrives (``turn``: at the start of turn ``turn``)."""
    message: str
    """What the customer says; the goal checks belong to this final request."""
    turn: int | None = None
    """The turn, when ``when == "turn"``."""

    def __post_init__(self) -> None:
        if self.when not in ("before_first_write", "after_first_write", "turn"):
            raise ValueError(f"RequestChange.when must be before_first_write, after_first_write or turn; "
                             f"got {self.when!r}")
        if (self.when == "turn") != (isinstance(self.turn, int) and self.turn >= 1):
            raise ValueError(f"RequestChange(when={self.when!r}) got turn={self.turn!r}: give turn=N "
                             "(N >= 1) exactly when when='turn'")


@dataclass(frozen=True)
class Fault:
    """Something that goes wrong on purpose, on the ``call``-th executed call of ``tool``."""

    tool: str
    """The write tool the fault hits."""
    kind: Literal["refuse", "unknown_outcome"]
    """``refuse``: not carried out, status error. ``unknown_outcome``: carried out, status unknown."""
    call: int = 1
    """Which call of the tool (1 = the first that passes the held-write and stress-layer gates)."""

    def __post_init__(self) -> None:
        if self.kind not in ("refuse", "unknown_outcome"):
            raise ValueError(f"Fault.kind must be 'refuse' or 'unknown_outcome'; got {self.kind!r}")
        if self.call < 1:
            raise ValueError(f"Fault.call counts calls of {self.tool!r} from 1; got {self.call}")


@dataclass(frozen=True)
class Scenario:
    """One task for an agent (the console calls it a job)."""

    id: str
    """Unique within the world, e.g. ``refund-item-0007``."""
    world: str
    """The world's registered name."""
    split: Split
    """``train``, ``dev`` or ``holdout``."""
    role: str
    """The role the agent plays; it decides the tools."""
    category: str
    """What kind of work (refund, cancellation, address, email, ticket, question, ...)."""
    request: str
    """What the customer asks at reset."""
    goal_checks: tuple[Check, ...]
    """Checks that the final request was done."""
    hard_rules: tuple[Check, ...]
    """Checks for things that must never happen."""
    reference: Solution
    """A solution that is verified."""
    wrong: tuple[Solution, ...] = ()
    """Named careless solutions; none may be verified."""
    turn_limit: int = 20
    """Steps before the episode is truncated."""
    facts: tuple[tuple[str, str], ...] = ()
    """What the customer knows: (keyword in a question, answer)."""
    change: RequestChange | None = None
    """A change of request during the work, if any."""
    faults: tuple[Fault, ...] = ()
    """Faults injected into tool calls."""
    max_customer_contacts: int = 1
    """``ask_customer`` calls allowed before they count as unnecessary interruptions."""
    scope: tuple[str, ...] = ()
    """What the scenario may change: ``"table"`` or one row ``"table#key"`` (empty: a read-only
    question). The framework's ``final_answers`` and ``service_requests`` are never judged for scope."""
    answer_sql: str | None = None
    """Question scenarios: the oracle, one read-only SELECT whose single value is the right answer."""
    answer_tolerance: float = 0.0
    """Largest absolute difference accepted between a numeric answer and the oracle (0: exact)."""
    method: str | None = None
    """Required method: ``aggregate`` (the answer came out of a query where the database aggregated),
    ``lookup`` (the answer was read from a tool result) or None (not judged)."""
    required_actions: tuple[str, ...] = ()
    """Tool calls that must succeed: ``"tool"``, or ``"first<then"`` (``first`` succeeds before ``then`` runs)."""
    forbidden_actions: tuple[str, ...] = ()
    """Tools that must never be called in this scenario."""
    turn_budget: int | None = None
    """Turns a good solution needs (None: the reference solution's calls plus 2)."""
    tool_call_budget: int | None = None
    """Tool calls a good solution needs (None: the reference solution's calls plus 2)."""
    token_budget: int | None = None
    """Tokens a good solution needs, when the agent reports tokens (None: 2,000 per budgeted turn)."""
    scope_is_goal: bool = False
    """A change outside ``scope`` fails a goal check, as a whole-state hash would (imported worlds set it).
    The world adds that check to ``goal_checks`` (see ``rehearsal_env.importers``); the verdict reads only checks."""

    @property
    def offers_retry(self) -> bool:
        """Whether ``retry_operation`` is available (scenarios with an unknown-outcome fault)."""
        return any(f.kind == "unknown_outcome" for f in self.faults)

    @property
    def final_request(self) -> str:
        return self.change.message if self.change else self.request

    def solution(self, name: str) -> Solution:
        """The reference or a named wrong solution (``wrong:...``)."""
        for sol in (self.reference, *self.wrong):
            if sol.name == name:
                return sol
        known = ", ".join(s.name for s in (self.reference, *self.wrong))
        raise KeyError(f"scenario {self.id!r} has no solution {name!r}; it has: {known}")


def scenario_dict(scenario: Scenario) -> dict[str, Any]:
    """A JSON-able description (for ``rehearsal world show`` and fingerprints)."""
    from dataclasses import asdict

    return asdict(scenario)
