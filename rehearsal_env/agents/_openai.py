"""The ``openai`` agent: a model behind an OpenAI-compatible chat-completions API plays the episode.

The loop (one :class:`Conversation` per episode):

- **system message**: the scenario, world and role, the world's policies, then the
  profile's instructions. The customer's messages arrive as **user** messages;
  ``info["tools"]`` are the request's ``tools``.
- **each tool call is one env step.** Parallel tool calls run one at a time, in
  order; each call id gets its ``role: "tool"`` answer (the tool result as JSON).
  When the episode ends mid-batch, the calls that never ran are answered
  ``{"status": "not_run"}`` in :meth:`Conversation.transcript`.
- **a reply with text and no tool call** goes to the customer as
  ``ask_customer(question=TEXT)`` while the scenario allows another customer
  contact (``Scenario.max_customer_contacts``, counting every ``ask_customer`` the
  agent sent); after that it is ``finish(message=TEXT)``: the model has said its
  last word to a customer it may not interrupt again.
- **malformed replies are rejected attempts**, never crashes: arguments that are not
  JSON (sent as ``{"tool": NAME, "args": "<the raw text>"}``), an unknown tool (sent
  as named, so the env answers with a did-you-mean), a reply cut off at ``max_tokens``
  (``finish_reason == "length"``: nothing in it runs; its first call, or its text, is
  sent with the raw text as ``args``), and a reply with neither text nor a call. The
  env rejects each one and the model reads why in the tool message.
- **usage**: each reply's ``usage.total_tokens`` rides on the first action made from
  that reply (``"usage": {"tokens": N}``). A reply without usage reports nothing, so a
  provider that never reports usage leaves ``tokens`` null and ``efficiency``
  unmeasured (the external-mode caveat), and :attr:`ModelStats.replies_without_usage`
  counts the gaps.
- **a budget**: when the profile's ``max_model_calls`` for the episode are spent, the agent gives up
  (its own limit, so the episode is scored).
- **provider failures**: see :mod:`._provider` (retries, then not scored with cause
  ``provider``; 401/403/404 stop the run; other 4xx end the episode as ``give_up``).

:class:`OpenAIAgent` is a synchronous policy ``(observation, info) -> action``;
:class:`AsyncOpenAIAgent` has the same loop with ``await agent.act(observation,
info)``, for runs that keep many episodes in flight (``--concurrency``).
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from dataclasses import dataclass, field
from typing import Any

import openai
from openai import RequestOptions
from openai.types.chat import ChatCompletion

from ._profile import AgentProfile
from ._provider import Endpoint, ProfileError, exhausted, is_retryable, refusal, retry_delay

CHAT_PATH = "/chat/completions"
AUTHORIZED: RequestOptions = {"security": {"bearer_auth": True}}
"""The request is posted as the plain JSON it already is: ``chat.completions.create`` would walk every message
and tool schema through the SDK's typed-parameter transform first (about 15 ms a call with a world's tools,
the whole cost of a call against a fast local server), which changes nothing in a plain-JSON body."""
MAX_RAW = 2000
"""Characters of a malformed reply kept in the rejected action."""
INVALID_REPLY = "invalid_reply"
"""The name of the call that stands for a reply with no usable call (cut off, empty) in the chat history and
in its rejected action; its ``args`` are text, so the env rejects it whatever tools the world has."""
NOT_RUN = {"status": "not_run", "error": "the episode ended before this call ran"}


@dataclass
class ModelStats:
    """What one episode's model calls cost."""

    calls: int = 0
    """Completed model calls (a call retried three times counts once)."""
    latency_ms: float = 0.0
    """Wall time of those calls, retries and their waits included, in milliseconds."""
    retries: int = 0
    """Tries that failed and were retried."""
    tokens: int = 0
    """Tokens the provider reported (``usage.total_tokens``), summed."""
    replies_without_usage: int = 0
    """Replies that reported no usage (their tokens are unknown, not zero)."""
    latencies_ms: list[float] = field(default_factory=list)
    """Each completed call's wall time, in order."""


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def action_text(tool: str, args: Any, tokens: int | None) -> str:
    """The env action JSON (ASCII) for one call, with the reply's usage when given."""
    action: dict[str, Any] = {"tool": tool, "args": args}
    if tokens is not None:
        action["usage"] = {"tokens": tokens}
    return json.dumps(action)


@dataclass
class _Pending:
    """One env action made from the model's reply, waiting to be sent, and how to answer it."""

    action: str
    call_id: str | None
    """The tool call it answers (None: it came from plain text)."""
    problem: str | None = None
    """Why the agent knows the env will reject it (shown to the model with the env's answer)."""
    to_customer: bool = False


class Conversation:
    """One episode's chat: observations in, chat messages and env actions out (no I/O here).

    Args:
        profile: The agent profile (model, instructions, sampling).
        max_customer_contacts: How many ``ask_customer`` calls the scenario allows (plain text
            goes to the customer while fewer were sent).
    """

    def __init__(self, profile: AgentProfile, *, max_customer_contacts: int = 1) -> None:
        self.profile = profile
        self.max_customer_contacts = max_customer_contacts
        self.messages: list[dict[str, Any]] = []
        self.tools: list[dict[str, Any]] = []
        self._tool_names: set[str] = set()
        self._queue: list[_Pending] = []
        self._sent: _Pending | None = None
        self._waiting: list[str] = []
        """Customer messages that arrived mid-batch; they follow the batch's tool messages."""
        self._contacts = 0
        self._ended = False

    # -- observations in ---------------------------------------------------------
    def next_action(self, observation: str, info: dict[str, Any]) -> str | None:
        """Take the env's observation; the next action of the current reply, or None: ask the model."""
        obs = json.loads(observation)
        if not self.messages:
            self._start(info)
        else:
            self._answer(obs.get("tool_result"), obs.get("turns_left"))
        self._waiting.extend(str(m) for m in obs.get("messages") or ())
        if self._queue:
            return self._send(self._queue.pop(0))
        self.messages.extend({"role": "user", "content": m} for m in self._waiting)
        self._waiting = []
        return None

    def _start(self, info: dict[str, Any]) -> None:
        self.tools = list(info.get("tools") or [])
        self._tool_names = {t["function"]["name"] for t in self.tools}
        lines = [f"You are working on scenario {info.get('scenario')} of world {info.get('world')}, "
                 f"as the role {info.get('role')}. The customer's messages arrive as user messages; act with "
                 "the tools, one call at a time."]
        policies = info.get("policies") or []
        if policies:
            lines += ["", "Policies:"] + [f"- {p}" for p in policies]
        if self.profile.instructions:
            lines += ["", self.profile.instructions]
        self.messages.append({"role": "system", "content": "\n".join(lines)})

    def _answer(self, result: dict[str, Any] | None, turns_left: Any) -> None:
        sent, self._sent = self._sent, None
        if sent is None:
            return
        body = dict(result or {})
        body.pop("tool", None)
        if sent.to_customer:
            answer = (body.get("result") or {}).get("answer") if body.get("status") == "ok" else None
            self.messages.append({"role": "user", "content": answer if isinstance(answer, str) else _dumps(body)})
            return
        if sent.problem is not None:
            body = {"status": body.get("status", "rejected"), "problem": sent.problem, "environment": body}
        body["turns_left"] = turns_left
        assert sent.call_id is not None
        self.messages.append({"role": "tool", "tool_call_id": sent.call_id, "content": _dumps(body)})

    def _send(self, pending: _Pending) -> str:
        self._sent = pending
        if json.loads(pending.action).get("tool") == "ask_customer":
            self._contacts += 1
        return pending.action

    # -- the model's reply in ------------------------------------------------------
    def request(self) -> dict[str, Any]:
        """The keyword arguments of ``chat.completions.create`` for the next model call."""
        request: dict[str, Any] = {"model": self.profile.model, "messages": list(self.messages),
                                   **self.profile.sampling.request_params()}
        if self.tools:
            request["tools"] = self.tools
        return request

    def take(self, completion: Any) -> str:
        """The first env action of the model's reply (the rest queue up behind it)."""
        usage = getattr(completion, "usage", None)
        tokens = getattr(usage, "total_tokens", None) if usage is not None else None
        tokens = tokens if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 0 else None
        choices = getattr(completion, "choices", None) or []
        if not choices:
            return self._no_choice(tokens)
        choice = choices[0]
        message = choice.message
        text = message.content or ""
        calls = list(message.tool_calls or [])
        cut_off = choice.finish_reason == "length"
        entry: dict[str, Any] = {"role": "assistant", "content": text}  # a string: llama.cpp refuses null
        ids = []
        if calls:
            entry["tool_calls"] = []
            for n, call in enumerate(calls):
                call_id = getattr(call, "id", None) or f"call_{len(self.messages)}_{n}"
                ids.append(call_id)
                fn = getattr(call, "function", None)
                entry["tool_calls"].append({"id": call_id, "type": "function", "function": {
                    "name": getattr(fn, "name", "") or "", "arguments": getattr(fn, "arguments", "") or ""}})
        self.messages.append(entry)
        if cut_off:
            self._queue = self._cut_off(entry, ids, text, tokens)
        elif calls:
            self._queue = [self._call(c, ids[n], tokens if n == 0 else None) for n, c in enumerate(entry["tool_calls"])]
        elif text.strip():
            tool = "ask_customer" if self._contacts < self.max_customer_contacts else "finish"
            args = {"question": text} if tool == "ask_customer" else {"message": text}
            self._queue = [_Pending(action_text(tool, args, tokens), None, to_customer=tool == "ask_customer")]
        else:
            self._queue = self._empty(entry, tokens)
        return self._send(self._queue.pop(0))

    def _no_choice(self, tokens: int | None) -> str:
        self.messages.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_empty", "type": "function", "function": {"name": INVALID_REPLY, "arguments": ""}}]})
        return self._send(_Pending(action_text(INVALID_REPLY, "", tokens), "call_empty",
                                   problem="the reply had no choices; reply with one tool call"))

    def _call(self, call: dict[str, Any], call_id: str, tokens: int | None) -> _Pending:
        name, raw = call["function"]["name"], call["function"]["arguments"]
        try:
            args = json.loads(raw) if raw.strip() else {}
        except ValueError as exc:
            return _Pending(action_text(name, raw[:MAX_RAW], tokens), call_id,
                            problem=f"the arguments of {name!r} are not valid JSON ({exc}); nothing was run. "
                                    "Send the arguments as one JSON object")
        problem = None if name in self._tool_names else f"there is no tool {name!r}; nothing was run"
        return _Pending(action_text(name, args, tokens), call_id, problem=problem)

    def _cut_off(self, entry: dict[str, Any], ids: list[str], text: str, tokens: int | None) -> list[_Pending]:
        problem = ("your reply was cut off at max_tokens (finish_reason 'length'), so nothing in it was run; "
                   "reply with one short, complete tool call")
        if not ids:
            entry["content"] = ""
            entry["tool_calls"] = [{"id": f"call_{len(self.messages)}_cut", "type": "function",
                                    "function": {"name": INVALID_REPLY, "arguments": text[:MAX_RAW]}}]
            ids = [entry["tool_calls"][0]["id"]]
        first = entry["tool_calls"][0]["function"]
        pending = [_Pending(action_text(first["name"], first["arguments"][:MAX_RAW], tokens), ids[0], problem=problem)]
        for call_id in ids[1:]:  # answered at once: one rejected step stands for the whole cut-off reply
            self.messages.append({"role": "tool", "tool_call_id": call_id,
                                  "content": _dumps({"status": "not_run", "problem": problem})})
        return pending

    def _empty(self, entry: dict[str, Any], tokens: int | None) -> list[_Pending]:
        call_id = f"call_{len(self.messages)}_empty"
        entry["tool_calls"] = [{"id": call_id, "type": "function",
                                "function": {"name": INVALID_REPLY, "arguments": ""}}]
        return [_Pending(action_text(INVALID_REPLY, "", tokens), call_id,
                         problem="the reply had neither text nor a tool call; reply with one tool call")]

    def give_up(self, reason: str) -> str:
        """The action that ends the episode when the provider refused the request (a 4xx, see :mod:`._provider`)."""
        self.messages.append({"role": "assistant", "content": reason})
        self._sent = None
        return action_text("give_up", {"reason": reason}, None)

    # -- the end ---------------------------------------------------------------------
    def transcript(self) -> list[dict[str, Any]]:
        """The chat so far, with every tool call answered (calls the episode never ran: ``not_run``)."""
        out = list(self.messages)
        for pending in ([self._sent] if self._sent else []) + self._queue:
            if pending.call_id is not None:
                out.append({"role": "tool", "tool_call_id": pending.call_id, "content": _dumps(NOT_RUN)})
        return out


def _agent_kwargs(profile: AgentProfile) -> None:
    if profile.agent != "openai" or not profile.model:
        raise ValueError(f"expected an openai profile with a model, got profile {profile.ref!r} "
                         f"(agent {profile.agent!r}, model {profile.model!r})")


class OpenAIAgent:
    """A policy ``(observation, info) -> action`` played by a model over an OpenAI-compatible API.

    Args:
        profile: An ``openai`` agent profile (model, instructions, sampling).
        endpoint: Where the model is served and how calls are retried.
        max_customer_contacts: The scenario's ``max_customer_contacts`` (see the module docstring).
        client: A client to share between agents (default: one made from ``endpoint``).

    Raises (from a call):
        ProviderError: the provider failed after its retries (the episode is not scored).
        ProfileError: the provider refused the model, key or access (stop the run).
    """

    def __init__(self, profile: AgentProfile, endpoint: Endpoint | None = None, *, max_customer_contacts: int = 1,
                 client: openai.OpenAI | None = None) -> None:
        _agent_kwargs(profile)
        self.profile = profile
        self.endpoint = endpoint or Endpoint()
        self.client = client or self.endpoint.client()
        self.conversation = Conversation(profile, max_customer_contacts=max_customer_contacts)
        self.stats = ModelStats()
        self._rng = random.Random()

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        action = self.conversation.next_action(observation, info)
        if action is not None:
            return action
        if spent(self.profile, self.stats):
            return self.conversation.give_up(spent_reason(self.profile))
        started = time.perf_counter()
        tries = 0
        while True:
            tries += 1
            try:
                completion = self.client.post(CHAT_PATH, body=self.conversation.request(), cast_to=ChatCompletion,
                                              options=AUTHORIZED)
                break
            except openai.APIError as exc:
                verdict = self._failed(exc, tries)
                if isinstance(verdict, str):
                    return self.conversation.give_up(verdict)
                time.sleep(verdict)
        return self._took(completion, started)

    def _failed(self, exc: openai.APIError, tries: int) -> float | str:
        """Seconds to wait before the next try, or the give-up reason; raises when the call cannot go on."""
        return failed(self.endpoint, self.profile, self.stats, exc, tries, self._rng)

    def _took(self, completion: Any, started: float) -> str:
        return took(self.conversation, self.stats, completion, started)


def failed(endpoint: Endpoint, profile: AgentProfile, stats: ModelStats, exc: openai.APIError, tries: int,
           rng: random.Random) -> float | str:
    """After a failed try: seconds to wait, the give-up reason (a 4xx), or raise (exhausted; 401/403/404)."""
    if is_retryable(exc) or not isinstance(exc, openai.APIStatusError):
        if tries > endpoint.max_retries:
            raise exhausted(endpoint, profile.model, exc, tries) from exc
        stats.retries += 1
        return retry_delay(endpoint, tries, exc, rng)
    refused = refusal(endpoint, profile.model, exc)
    if isinstance(refused, ProfileError):
        raise refused from exc
    return refused


def spent(profile: AgentProfile, stats: ModelStats) -> bool:
    """Whether the profile's ``max_model_calls`` for this episode are spent."""
    return profile.max_model_calls is not None and stats.calls >= profile.max_model_calls


def spent_reason(profile: AgentProfile) -> str:
    return (f"the agent profile's max_model_calls ({profile.max_model_calls}) are spent; the agent stops "
            "(its own limit: scored)")


def took(conversation: Conversation, stats: ModelStats, completion: Any, started: float) -> str:
    """Count a completed call and turn its reply into the next action."""
    elapsed = (time.perf_counter() - started) * 1000
    stats.calls += 1
    stats.latency_ms += elapsed
    stats.latencies_ms.append(elapsed)
    usage = getattr(completion, "usage", None)
    tokens = getattr(usage, "total_tokens", None) if usage is not None else None
    if isinstance(tokens, int) and not isinstance(tokens, bool):
        stats.tokens += tokens
    else:
        stats.replies_without_usage += 1
    return conversation.take(completion)


class AsyncOpenAIAgent:
    """:class:`OpenAIAgent`'s loop with an :class:`openai.AsyncOpenAI` client: ``await agent.act(obs, info)``."""

    def __init__(self, profile: AgentProfile, endpoint: Endpoint | None = None, *, max_customer_contacts: int = 1,
                 client: openai.AsyncOpenAI | None = None) -> None:
        _agent_kwargs(profile)
        self.profile = profile
        self.endpoint = endpoint or Endpoint()
        self.client = client or self.endpoint.async_client()
        self.conversation = Conversation(profile, max_customer_contacts=max_customer_contacts)
        self.stats = ModelStats()
        self._rng = random.Random()

    async def act(self, observation: str, info: dict[str, Any]) -> str:
        action = self.conversation.next_action(observation, info)
        if action is not None:
            return action
        if spent(self.profile, self.stats):
            return self.conversation.give_up(spent_reason(self.profile))
        started = time.perf_counter()
        tries = 0
        while True:
            tries += 1
            try:
                completion = await self.client.post(CHAT_PATH, body=self.conversation.request(),
                                                    cast_to=ChatCompletion, options=AUTHORIZED)
                break
            except openai.APIError as exc:
                verdict = failed(self.endpoint, self.profile, self.stats, exc, tries, self._rng)
                if isinstance(verdict, str):
                    return self.conversation.give_up(verdict)
                await asyncio.sleep(verdict)
        return took(self.conversation, self.stats, completion, started)


class ModelAgents:
    """Makes a fresh ``openai`` agent per episode, all sharing one client per process (picklable for Ray).

    Args:
        profile: An ``openai`` agent profile.
        endpoint: Where the model is served.
    """

    def __init__(self, profile: AgentProfile, endpoint: Endpoint | None = None) -> None:
        _agent_kwargs(profile)
        self.profile = profile
        self.endpoint = endpoint or Endpoint()
        self._client: openai.OpenAI | None = None
        self._async_client: openai.AsyncOpenAI | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"profile": self.profile, "endpoint": self.endpoint, "_client": None, "_async_client": None}

    def __call__(self, scenario: Any) -> OpenAIAgent:
        """A synchronous policy for one episode of ``scenario``."""
        if self._client is None:
            self._client = self.endpoint.client()
        return OpenAIAgent(self.profile, self.endpoint, client=self._client,
                           max_customer_contacts=scenario.max_customer_contacts)

    def async_agent(self, scenario: Any, client: openai.AsyncOpenAI | None = None) -> AsyncOpenAIAgent:
        """An asynchronous agent for one episode of ``scenario``.

        An async client belongs to the event loop it first ran on: pass one made for the running loop
        (``endpoint.async_client()``); without one, the factory keeps one for the first loop that asks.
        """
        if client is None:
            if self._async_client is None:
                self._async_client = self.endpoint.async_client()
            client = self._async_client
        return AsyncOpenAIAgent(self.profile, self.endpoint, client=client,
                                max_customer_contacts=scenario.max_customer_contacts)
