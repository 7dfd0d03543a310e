"""A model's whole reply played as env steps, the way the ``openai`` agent plays it.

TRL and OpenEnv hand an adapter one tool call at a time; SkyRL and verl hand it the model's text, and the Tinker
cookbook a parsed assistant message. :class:`ReplyPlayer` turns either into env steps on a
:class:`~rehearsal_env.integrations.Session` with the ``openai`` agent's rules (``rehearsal_env/agents/_openai.py``):

- each tool call is one step, in order; once the episode ended, the calls left are answered
  :data:`~._session.ENDED` (nothing runs);
- a reply with text and no call goes to the customer as ``ask_customer(question=TEXT)`` while the scenario allows
  another contact (``max_customer_contacts``, counting every ``ask_customer`` sent), and is ``finish(message=TEXT)``
  after that;
- a reply with neither text nor a call, and a call whose arguments are not JSON, are rejected attempts judged by
  the env (never an exception);
- text is read with the local model server's own parser (``<tool_call>`` blocks, :mod:`rehearsal_env.agents`'
  ChatML reader), so a model trains on the format ``rehearsal models serve`` reads from it.

Each step's answer is what the served agent reads: a tool call's result as its tool message
(:func:`~._prompt.tool_text`), and the customer's answer to a text reply as a user message. The turn's reward is
the sum of its steps' rewards under a profile that pays one at every turn (``rl_turns``); otherwise the episode's
reward on the turn that ended it and 0 before (0 too for an episode not scored: :attr:`Turn.scored` says which).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..agents import NOTE_PREFIX, parse_reply, tools_block
from ._prompt import opening_text, system_prompt, tool_text
from ._session import Session

MAX_REPLY_CHARS = 200_000
"""Most characters of a reply read (a longer one is cut here before parsing: agents' text is bounded)."""
EMPTY_NOTE = "your last reply had neither text nor a tool call. Reply with one tool call."
"""What the model reads after a reply with nothing in it (the ``openai`` agent's note)."""
MAX_RAW = 4_000
"""Most characters of unparsable arguments or dropped text carried into the rejected action's record."""


@dataclass(frozen=True)
class Call:
    """One tool call of a reply."""

    name: str
    """The tool the model named (any text: the env judges it)."""
    arguments: Any
    """The arguments as the model sent them: JSON text (parsed here) or an already parsed object."""


@dataclass(frozen=True)
class Message:
    """One message the model reads after its reply."""

    role: str
    """``tool`` (a call's result) or ``user`` (the customer's answer to a text reply)."""
    content: str
    """The text, as the served agent shows it."""


@dataclass(frozen=True)
class Turn:
    """What one reply did."""

    messages: tuple[Message, ...]
    """The messages the model reads next, one per step, in order."""
    reward: float
    """The turn's reward (see the module doc)."""
    done: bool
    """Whether the episode has ended."""
    scored: bool
    """False only for an ended episode that was not scored (the environment failed, never the agent)."""


def prompt(session: Session, opening: str, *, tools_in_system: bool) -> list[dict[str, str]]:
    """The episode's first messages as the served agent sends them: the system message (with the role's tools as
    ``rehearsal models serve`` shows them to a local model when ``tools_in_system``, for a trainer whose chat
    template is given no tools) and the customer's opening words (:func:`~._prompt.opening_text` of ``opening``)."""
    env = session.env
    if env is None:
        raise RuntimeError("no episode: start one on the session before asking for its prompt")
    system = system_prompt(session.world, env.scenario)
    if tools_in_system:
        system = "\n\n".join(p for p in (system, tools_block(list(session.info["tools"]))) if p)
    return [{"role": "system", "content": system}, {"role": "user", "content": opening_text(opening)}]


def text_calls(text: str) -> tuple[str, list[Call]]:
    """``(content, calls)`` of a model's text: each well-formed ``<tool_call>`` block's calls."""
    content, calls = parse_reply(text[:MAX_REPLY_CHARS])
    return content, [Call(c["function"]["name"], c["function"]["arguments"]) for c in calls]


class ReplyPlayer:
    """Replies of one episode after another of ``session``, played as env steps (see the module doc)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self._contacts = 0

    def started(self) -> None:
        """A new episode started on the session: no customer contact spent yet."""
        self._contacts = 0

    def play_text(self, text: str) -> Turn:
        """Play a reply given as the model's text."""
        content, calls = text_calls(text)
        return self.play(content, calls)

    def play(self, content: str, calls: Sequence[Call]) -> Turn:
        """Play a reply given as its text ``content`` and its tool ``calls``."""
        session = self.session
        steps: list[tuple[str, dict[str, Any] | str]] = []
        if calls:
            steps = [(c.name, _arguments(c.arguments)) for c in calls]
        elif content.strip():
            limit = session.env.scenario.max_customer_contacts if session.env is not None else 0
            if self._contacts < limit:
                steps = [("ask_customer", {"question": content})]
            else:
                steps = [("finish", {"message": content})]
        else:
            steps = [("", {"dropped_reply": {"kind": "empty_reply", "text": content[:MAX_RAW]}})]
        messages: list[Message] = []
        reward = 0.0
        for tool, args in steps:
            if tool == "ask_customer" and not session.ended:
                self._contacts += 1
            observation = session.call(tool, args)
            reward += session.last_reward if session.shaped else 0.0
            messages.extend(_read(observation, calls=bool(calls), tool=tool))
        done = session.ended
        if done and not session.shaped:
            reward = session.reward or 0.0
        return Turn(tuple(messages), reward, done, scored=not done or session.reward is not None)


def _read(observation: str, *, calls: bool, tool: str) -> list[Message]:
    """What the served agent puts in the chat for one step: a call's tool message; the customer's answer to text
    (a user message); for a reply with nothing in it, the environment's note; then the customer's own messages."""
    if calls:
        return [Message("tool", tool_text(observation))]
    obs = json.loads(observation)
    result = obs.get("tool_result") or {}
    if tool == "":
        return [Message("user", NOTE_PREFIX + EMPTY_NOTE)]
    answer = (result.get("result") or {}).get("answer") if result.get("status") == "ok" else None
    said = [Message("user", str(m)) for m in obs.get("messages") or ()]
    if tool == "finish" and not said:
        return []
    return [Message("user", answer if isinstance(answer, str) else tool_text(observation)), *said]


def _arguments(raw: Any) -> dict[str, Any] | str:
    """A call's arguments as an object; text that is not a JSON object goes to the env as text (rejected there)."""
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw) if raw.strip() else {}
        except ValueError:
            return raw[:MAX_RAW]
        return parsed if isinstance(parsed, dict) else raw[:MAX_RAW]
    return str(raw)[:MAX_RAW]
