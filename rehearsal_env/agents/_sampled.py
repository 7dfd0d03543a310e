"""The scripted server's sampled solver: replies that vary with the request's seed, as a sampled model's do.

The scripted model server (:mod:`.testing`) plays a scenario's reference and, for a model customer
(:mod:`._customer`), answers from the facts in its brief. Both are greedy: one conversation, one reply. Given a
:class:`Sampled`, a request sent at a temperature above 0 draws its reply from a generator seeded by the
request's ``seed`` and the conversation so far, so one seed and one conversation give one reply on any machine,
and another seed may give another (a request with no seed draws from the server's own counter, as a provider
without a seed does). What a draw can change, each with a chance :class:`Sampled` declares:

- **the agent slips**: instead of its next call it ends the episode (the reference's last call, ``finish``),
  claiming done before its work is (chance ``agent`` per call);
- **the customer does not know**: it answers :data:`~._customer.DONT_KNOW` to a question its facts answer, or to
  a request to confirm (chance ``customer`` per answer); an agent that hears that gives up (``finish``);
- **an outage**: any request may be answered HTTP 503 (chance ``outage``), whatever its temperature: what a
  run records not scored (cause ``provider``) once the agent's retries are spent;
- **the agent confirms first**: where the reference asks the customer nothing, the sampled agent's first call
  asks the customer to confirm the request (:data:`CONFIRM`), so that a customer is a source of variation in
  every world; that exchange is left out of what the reference is replayed from.

These are the noise sources of ``measure.py --noise-sources`` (:mod:`rehearsal_env.measure._noiserun`), whose
sizes are known here by construction.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ._customer import BRIEF, DONT_KNOW

CUSTOMER_BRIEF = BRIEF.split("\n", 1)[0]
"""The first line of a model customer's system message: how the server knows a customer's request."""
CONFIRM = "Before I change anything, could you confirm what you need done?"
"""The sampled agent's first question where the reference asks the customer nothing."""
CONFIRMED = "Yes, that's what I need, please go ahead."
"""The customer's answer to a request to confirm that no fact of its answers."""
_FACT = re.compile(r"^- about (.*?): (.*)$", re.MULTILINE)


@dataclass(frozen=True)
class Sampled:
    """The chances of the sampled solver's variations (see the module docstring), each in ``[0, 1]``."""

    agent: float = 0.0
    """Chance per agent call that it ends the episode instead (claiming done)."""
    customer: float = 0.0
    """Chance per customer answer that it says it does not know."""
    outage: float = 0.0
    """Chance per request, at any temperature, of an HTTP 503: drawn from the server's own generator in the order
    requests arrive, not from the request (an outage is not the model's doing, and not reproducible by a seed)."""

    def __post_init__(self) -> None:
        for name in ("agent", "customer", "outage"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
                raise ValueError(f"Sampled.{name} is a chance, a number from 0 to 1; got {value!r}")

    @classmethod
    def parse(cls, text: str) -> Sampled:
        """``agent=0.1,customer=0.3,outage=0.05`` (any may be left out).

        Raises:
            ValueError: another key, or a value that is not a chance.
        """
        values: dict[str, float] = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            key, eq, value = part.partition("=")
            if not eq or key.strip() not in ("agent", "customer", "outage"):
                raise ValueError(f"expected agent=CHANCE,customer=CHANCE,outage=CHANCE; got {part!r} in {text!r}")
            try:
                values[key.strip()] = float(value)
            except ValueError:
                raise ValueError(f"expected a number from 0 to 1 for {key.strip()}; got {value!r}") from None
        return cls(**values)


def draw(body: dict[str, Any], fallback: int, what: str) -> float | None:
    """A uniform draw in ``[0, 1)`` for ``what`` of this request, from its seed (else ``fallback``) and its whole
    conversation (so that two scenarios' draws are independent); None when the request is greedy (temperature 0
    or none)."""
    temperature = body.get("temperature")
    if not isinstance(temperature, int | float) or temperature <= 0:
        return None
    seed = body.get("seed")
    said = [[m.get("role"), m.get("content"), [[(c.get("function") or {}).get(k) for k in ("name", "arguments")]
                                               for c in m.get("tool_calls") or ()]]
            for m in body.get("messages") or []]  # what was said, not the server's call ids
    key = json.dumps([what, seed if isinstance(seed, int) else f"unseeded-{fallback}", said], default=str)
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2**64


def is_customer(messages: Sequence[dict[str, Any]]) -> bool:
    """Whether a conversation is a model customer's (its system message is the customer's brief)."""
    return bool(messages) and messages[0].get("role") == "system" \
        and str(messages[0].get("content")).startswith(CUSTOMER_BRIEF)


def customer_answer(messages: Sequence[dict[str, Any]], slip: bool) -> str:
    """What the customer answers the last question: the first fact of its brief whose keyword the question holds
    (as the scripted customer answers), else :data:`CONFIRMED` to a request to confirm, else :data:`DONT_KNOW`;
    :data:`DONT_KNOW` too when it ``slip``s."""
    question = next((str(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "").lower()
    for keyword, reply in _FACT.findall(str(messages[0].get("content"))):
        if keyword.lower() in question:
            return DONT_KNOW if slip else reply
    return CONFIRMED if "confirm" in question and not slip else DONT_KNOW


def asked(messages: Sequence[dict[str, Any]]) -> dict[str, str]:
    """The agent's ``ask_customer`` calls so far: call id -> question."""
    out: dict[str, str] = {}
    for m in messages:
        for call in m.get("tool_calls") or ():
            function = call.get("function") or {}
            if function.get("name") == "ask_customer":
                try:
                    question = json.loads(function.get("arguments") or "{}").get("question", "")
                except (json.JSONDecodeError, AttributeError):
                    question = ""
                out[str(call.get("id"))] = str(question)
    return out


def heard_dont_know(messages: Sequence[dict[str, Any]]) -> bool:
    """Whether a customer answered one of the agent's questions with :data:`DONT_KNOW`."""
    questions = asked(messages)
    return any(m.get("role") == "tool" and str(m.get("tool_call_id")) in questions
               and DONT_KNOW in str(m.get("content")) for m in messages)


def without_confirmation(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation less the :data:`CONFIRM` exchange (what the reference is replayed from)."""
    confirm = {i for i, q in asked(messages).items() if q == CONFIRM}
    return [m for m in messages if not (m.get("role") == "tool" and str(m.get("tool_call_id")) in confirm)]


def confirms_first(messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]], reference_asks: bool) -> bool:
    """Whether the sampled agent's next call is :data:`CONFIRM`: the reference asks nothing, the agent may ask,
    and it has asked nothing yet."""
    offered = any((t.get("function") or {}).get("name") == "ask_customer" for t in tools)
    return offered and not reference_asks and not asked(messages)

