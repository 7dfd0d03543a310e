"""Agents that play a scenario's scripted solutions, and the null agent.

A *policy* is any callable ``(observation, info) -> action``. The scripted
player sends its solution's calls in order and reacts to trouble the way the
solution says (see :class:`~rehearsal_env.scenarios.Solution`): a retryable
refusal or a held write is sent again (or ignored), and an unknown outcome is
followed by ``retry_operation`` (or a careless repeat of the write).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..scenarios import Scenario, Solution, ToolCall

Policy = Callable[[str, dict[str, Any]], str]
"""``(observation, info) -> action``: the whole agent interface."""

HELD = "A new message from the customer arrived before this change was made"
MAX_RESENDS = 3


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
        assert self._last is not None
        status = result.get("status")
        held = result.get("error") == HELD
        if self._resends < MAX_RESENDS:
            if held or (status == "error" and result.get("retryable") and self.solution.on_refusal == "retry"):
                self._resends += 1
                return self._last
            if status == "unknown":
                self._resends += 1
                if self.solution.on_unknown == "retry_operation":
                    return ToolCall("retry_operation", {"operation_id": result["operation_id"]})
                return self._last
        return None

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
