"""Agents that play a scenario's scripted solutions, and the null agent.

A *policy* is any callable ``(observation, info) -> action``. The scripted
player sends its solution's calls in order and reacts to trouble in the last
tool result the way the solution says (see :class:`~rehearsal_env.scenarios.Solution`):

- a held write (exactly :data:`~rehearsal_env.env._events.HELD_MESSAGE`):
  ``on_held="resend"`` sends the same call again, ``"continue"`` goes on with
  the next call (the script follows the held call with what the new message asks);
- a retryable refusal (the stress layer's, or a ``refuse`` fault):
  ``on_refusal="retry"`` sends the call again, ``"ignore"`` moves on as if it worked;
- an unknown outcome: ``on_unknown="retry_operation"`` re-sends it safely with
  ``retry_operation(operation_id)``, ``"repeat"`` repeats the write (careless).

At most :data:`MAX_RESENDS` reactions follow one scripted call; then the
player moves on. The scripted player does not read customer messages: a
script is written for the scenario's schedule.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..env._events import HELD_MESSAGE
from ..scenarios import Scenario, Solution, ToolCall

Policy = Callable[[str, dict[str, Any]], str]
"""``(observation, info) -> action``: the whole agent interface."""

HELD = HELD_MESSAGE
MAX_RESENDS = 5
"""Reactions (re-sends, retries) allowed after one scripted call."""


class ScriptedAgent:
    """Plays one :class:`Solution`; a fresh instance per episode."""

    def __init__(self, solution: Solution) -> None:
        self.solution = solution
        self._next = 0
        self._last: ToolCall | None = None
        self._resends = 0

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        result = json.loads(observation).get("tool_result")
        call = self._react(result) if result and self._last else None
        if call is None:
            call = self._advance()
        self._last = call
        return call.to_action()

    def _react(self, result: dict[str, Any]) -> ToolCall | None:
        """The reaction to the last tool result, or None to go on with the script."""
        assert self._last is not None
        if self._resends >= MAX_RESENDS:
            return None
        sol = self.solution
        status = result.get("status")
        if status == "error" and result.get("error") == HELD_MESSAGE:
            again = sol.on_held == "resend"
        elif status == "error" and result.get("retryable"):
            again = sol.on_refusal == "retry"
        elif status == "unknown":
            if sol.on_unknown == "retry_operation":
                self._resends += 1
                return ToolCall("retry_operation", {"operation_id": result["operation_id"]})
            again = True
        else:
            again = False
        if not again:
            return None
        self._resends += 1
        return self._last

    def _advance(self) -> ToolCall:
        self._resends = 0
        if self._next >= len(self.solution.calls):
            return ToolCall("give_up", {"reason": "the script has no more steps"})
        call = self.solution.calls[self._next]
        self._next += 1
        return call


class NullAgent:
    """Says it is done at once, having done nothing."""

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        return ToolCall("finish", {"message": "Done."}).to_action()


BUILTIN_AGENTS = ("reference", "null", "wrong:<name>")


def make_agent(name: str, scenario: Scenario) -> Policy:
    """A fresh built-in policy for one episode of ``scenario``.

    Args:
        name: ``reference``, ``null``, or ``wrong:<name>`` (one of the scenario's wrong solutions).

    Raises:
        KeyError: an unknown agent, or a wrong solution the scenario does not have.
    """
    if name == "null":
        return NullAgent()
    if name == "reference" or name.startswith("wrong:"):
        return ScriptedAgent(scenario.solution(name))
    raise KeyError(f"unknown agent {name!r}; built-in agents are {', '.join(BUILTIN_AGENTS)}")
