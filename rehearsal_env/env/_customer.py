"""The simulated customer: scripted from the scenario, deterministic.

The customer is the other side of the conversation. Per episode it

- states the request when the episode starts (:meth:`Customer.opening`);
- answers ``ask_customer(question)`` from the facts the scenario gives it: the
  first fact whose keyword occurs in the question (case-insensitive) answers,
  and a question no fact matches gets :data:`DONT_KNOW` (it never improvises);
- changes the request once, when the events layer (:mod:`._events`) says the
  scheduled moment has come (:meth:`Customer.change`);
- repeats the current request once after the agent's first change succeeds,
  when the stress layer is on (:meth:`Customer.repeat`).

*When* a message arrives is decided by the events layer, never by the
customer, so an LLM-backed customer can implement :class:`Customer` and keep
the scenario's schedule: it only has to write the words. A customer with a
``begin_episode(seed)`` method is told each episode's reset seed before its
opening (a sampled model customer samples each repeat its own way, as the
agent does).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ..scenarios import Scenario

DONT_KNOW = "Sorry, I don't know that. Everything I know is in my messages."
"""The scripted customer's answer to a question none of its facts covers."""
REPEAT_PREFIX = "Hi again, just making sure this is being handled: "
"""How the scripted customer's repeat of the request starts (the current request follows)."""


class Customer(Protocol):
    """What the env needs from a customer; one instance may serve many episodes."""

    def opening(self) -> str:
        """Start a new conversation (forget the last one) and return the request."""
        ...

    def answer(self, question: str) -> str:
        """The reply to ``ask_customer(question)``."""
        ...

    def change(self) -> str:
        """The message that changes the request (called at most once per episode, only with a change)."""
        ...

    def repeat(self) -> str:
        """The stress layer's repeat of the current request (the changed one after a change)."""
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
        if self._scenario.change is None:
            raise RuntimeError(f"scenario {self._scenario.id!r} has no change of request; the events layer "
                               "asked for one (expected a RequestChange on the scenario)")
        self._changed = True
        return self._scenario.change.message

    def repeat(self) -> str:
        current = self._scenario.final_request if self._changed else self._scenario.request
        return REPEAT_PREFIX + current

    def customer_state(self) -> dict[str, Any]:
        """What this customer remembers of the conversation (for forks and checkpoints)."""
        return {"changed": self._changed}

    def load_customer_state(self, state: Mapping[str, Any]) -> None:
        """Continue from :meth:`customer_state` of a customer of the same scenario."""
        self._changed = bool(state["changed"])

    def fork(self) -> ScriptedCustomer:
        """An independent customer in this one's state."""
        twin = ScriptedCustomer(self._scenario)
        twin._changed = self._changed
        return twin
