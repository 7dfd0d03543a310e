"""The simulated customer: scripted from the scenario, deterministic.

It states the request at reset, answers ``ask_customer`` from the facts the
scenario gives it (and says it does not know otherwise), may change the
request once at a scheduled point, and (stress layer) repeats the request once
after the agent's first change succeeds. An LLM-backed customer can implement
the same :class:`Customer` protocol.
"""

from __future__ import annotations

from typing import Protocol

from ..scenarios import Scenario

DONT_KNOW = "Sorry, I don't know that. Everything I know is in my messages."


class Customer(Protocol):
    """What the env needs from a customer."""

    def opening(self) -> str:
        """The request, stated at reset."""
        ...

    def answer(self, question: str) -> str:
        """The reply to ``ask_customer(question)``."""
        ...

    def change(self) -> str:
        """The message that changes the request (only called when the scenario has one)."""
        ...

    def repeat(self) -> str:
        """The stress layer's repeat of the current request."""
        ...


class ScriptedCustomer:
    """Answers from the scenario's facts by keyword; never improvises."""

    def __init__(self, scenario: Scenario) -> None:
        self._scenario = scenario
        self._changed = False

    def opening(self) -> str:
        self._changed = False
        return self._scenario.request

    def answer(self, question: str) -> str:
        text = question.lower()
        for keyword, reply in self._scenario.facts:
            if keyword.lower() in text:
                return reply
        return DONT_KNOW

    def change(self) -> str:
        assert self._scenario.change is not None
        self._changed = True
        return self._scenario.change.message

    def repeat(self) -> str:
        current = self._scenario.final_request if self._changed else self._scenario.request
        return f"Hi again, just making sure this is being handled: {current}"
