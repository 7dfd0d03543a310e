"""The ``openai`` agent: a model behind an OpenAI-compatible chat-completions API plays the episode.

The loop (one :class:`Conversation` per episode):

- **system message**: what every scenario shares first, this episode last (:mod:`._prompt`). The
  customer's messages arrive as **user** messages; ``info["tools"]`` are the request's ``tools``, sent
  with the profile's ``[provider]`` options (``tool_choice``, by default ``"auto"``; see :mod:`._profile`).
- **each tool call is one env step.** Parallel tool calls run one at a time, in
  order; each call id gets its ``role: "tool"`` answer (the tool result as JSON).
  When the episode ends mid-batch, the calls that never ran are answered
  ``{"status": "not_run"}`` in :meth:`Conversation.transcript`.
- **a reply with text and no tool call** goes to the customer as
  ``ask_customer(question=TEXT)`` while the scenario allows another customer
  contact (``Scenario.max_customer_contacts``, counting every ``ask_customer`` the
  agent sent); after that it is ``finish(message=TEXT)``: the model has said its
  last word to a customer it may not interrupt again.
- **malformed replies are rejected attempts**, never crashes, each with its *kind*
  (:data:`REJECTED_KINDS`, kept per turn in :attr:`Conversation.rejections` and stored in the record's
  trace as ``rejected_kind``): a call whose arguments are not JSON, or that names a tool the episode
  does not offer, stays in the chat history with a tool message saying what was wrong (the model did
  make that call). A reply that was cut off (by the provider at ``max_tokens``, or by the agent, see
  :mod:`._reply`) or had neither text nor a call is *not* put in the history: no call stands in for
  it. The env gets an action it rejects (tool ``""``, its ``args`` recording what the model said, its
  usage counted), and the next request alone ends with a user message from the environment saying what
  happened (:data:`NOTE_PREFIX`).
- **usage**: each reply's ``usage.total_tokens`` rides on the first action made from
  that reply (``"usage": {"tokens": N}``). A reply without usage reports nothing, so a
  provider that never reports usage leaves ``tokens`` null and ``efficiency``
  unmeasured (the external-mode caveat), and :attr:`ModelStats.replies_without_usage`
  counts the gaps.
- **a budget**: when the profile's ``max_model_calls`` for the episode are spent, the agent gives up
  (its own limit, so the episode is scored). A cut-off reply is a call.
- **the context**: a request whose prompt (estimated, :func:`._prompt.prompt_tokens`) plus
  ``max_tokens`` exceeds the profile's ``context`` is not sent: the agent gives up saying so.
- **a reply cut off** (``max_call_s``, ``max_tokens``): before the episode goes on, the agent waits until the
  server is idle (:mod:`._drain`), outside every call's time, and records the wait in the dropped action; other
  episodes of the process hold their next call meanwhile, so an abandoned reply is never charged to them.
- **provider failures**: see :mod:`._provider` (retries, then not scored with cause
  ``provider``; 401/403/404 stop the run; other 4xx end the episode as ``give_up``). Every try's time,
  failed ones and the waits between them included, counts in :attr:`ModelStats.latency_ms`.

:class:`OpenAIAgent` is a synchronous policy ``(observation, info) -> action``;
:class:`AsyncOpenAIAgent` has the same loop with ``await agent.act(observation,
info)``, for runs that keep many episodes in flight (``--concurrency``).
"""

from __future__ import annotations

import asyncio
import copy
import json
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Self

import openai

from ._drain import GATE, Drained, drain, drain_async, probe_body
from ._profile import AgentProfile
from ._prompt import given, prompt_tokens, system_prompt, tool_content, tools_text
from ._provider import (
    Endpoint,
    ProviderRefused,
    context_contradiction,
    exhausted,
    is_retryable,
    refusal,
    retry_delay,
)
from ._reply import CUT_OFF_TIME, CUT_OFF_TOKENS, ModelReply, complete, complete_async

MAX_RAW = 2000
"""Characters of a malformed reply kept in the rejected action."""
NOT_RUN = {"status": "not_run", "error": "the episode ended before this call ran"}
SEED_RANGE = 2**31
"""Provider seeds are ``(sampling.seed + the episode's reset seed) % SEED_RANGE`` (an OpenAI seed is an int32)."""
NOTE_PREFIX = "[From the environment, not the customer] "
"""How the one-request note about a dropped reply starts."""
REJECTED_KINDS = {
    "cut_off_length": "the provider ended the reply at max_tokens (finish_reason 'length'); nothing in it ran",
    CUT_OFF_TOKENS: "the streamed reply ran past the profile's max_tokens and the agent cut it off",
    CUT_OFF_TIME: "the reply ran past the profile's max_call_s while the provider answered; the agent cut it off",
    "malformed_json": "a tool call's arguments were not JSON",
    "unknown_tool": "a tool call named a tool this episode does not offer",
    "empty_reply": "the reply had neither text nor a tool call (or no choice at all)",
    "invalid_action": "the environment refused a call the agent passed on (arguments, role, ...; see the turn's "
                      "observation)",
}
"""Why a model's attempt was rejected: the record's ``Turn.rejected_kind``."""


@dataclass
class ModelStats:
    """What one episode's model calls cost."""

    calls: int = 0
    """Model calls that got a reply, cut-off replies included (a call retried three times counts once)."""
    latency_ms: float = 0.0
    """Wall time of every try, failed ones and the waits between tries included, in milliseconds."""
    retries: int = 0
    """Tries that failed and were retried."""
    tokens: int = 0
    """Tokens the provider reported (``usage.total_tokens``), summed."""
    replies_without_usage: int = 0
    """Replies that reported no usage (their tokens are unknown, not zero)."""
    latencies_ms: list[float] = field(default_factory=list)
    """Each call's wall time (its tries and waits), in order."""
    cut_offs: int = 0
    """Replies the agent cut off (past ``max_tokens`` or ``max_call_s``)."""
    drained_ms: float = 0.0
    """Time spent after this episode's cut-off replies waiting for the server to be idle (:mod:`._drain`);
    never part of ``latency_ms``."""
    held_ms: float = 0.0
    """Time this episode's calls waited, before they were sent, while another episode's cut-off reply was
    drained; never part of ``latency_ms``."""


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def reply_usage(reply: ModelReply) -> dict[str, int] | None:
    """The env action's ``usage`` for a reply: its total tokens, split into input and output where the provider
    split them (None: it reported none)."""
    if reply.tokens is None:
        return None
    if reply.input_tokens is None or reply.output_tokens is None:
        return {"tokens": reply.tokens}
    return {"tokens": reply.tokens, "input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens}


def action_text(tool: str, args: Any, usage: dict[str, int] | None) -> str:
    """The env action JSON (ASCII) for one call, with the reply's usage (:func:`reply_usage`) when given."""
    action: dict[str, Any] = {"tool": tool, "args": args}
    if usage is not None:
        action["usage"] = usage
    return json.dumps(action)


def dropped_action(kind: str, reply: ModelReply, server: dict[str, Any] | None = None) -> str:
    """The action that stands for a reply with no usable call: the env rejects it (no tool is named ``""``),
    after counting the reply's usage; its ``args`` record what the model said and why it was dropped, and for a
    reply the agent cut off, what waiting for the server found (``server``, :mod:`._drain`)."""
    said: dict[str, Any] = {"kind": kind, "text": reply.text[:MAX_RAW]}
    if server is not None:
        said["server"] = server
    if reply.calls:
        said["calls"] = [{"name": c["name"][:200], "arguments": c["arguments"][:MAX_RAW]} for c in reply.calls[:8]]
    return action_text("", {"dropped_reply": said}, reply_usage(reply))


@dataclass
class _Pending:
    """One env action made from the model's reply, waiting to be sent, and how to answer it."""

    action: str
    call_id: str | None
    """The tool call it answers (None: it came from plain text, or from a reply kept out of the history)."""
    problem: str | None = None
    """Why the agent knows the env will reject it (shown to the model with the env's answer)."""
    to_customer: bool = False
    kind: str | None = None
    """The rejected attempt's kind (:data:`REJECTED_KINDS`) when the agent knows it will be rejected."""


class Conversation:
    """One episode's chat: observations in, chat messages and env actions out (no I/O here).

    Args:
        profile: The agent profile (model, instructions, sampling, provider options).
        max_customer_contacts: How many ``ask_customer`` calls the scenario allows (plain text
            goes to the customer while fewer were sent).
    """

    def __init__(self, profile: AgentProfile, *, max_customer_contacts: int = 1) -> None:
        self.profile = profile
        self.max_customer_contacts = max_customer_contacts
        self.messages: list[dict[str, Any]] = []
        self.tools: list[dict[str, Any]] = []
        self.turn = 0
        """Env steps asked of this agent so far (the turn the current action is for)."""
        self.rejections: dict[int, str] = {}
        """The kind of each rejected attempt the agent made knowingly, by turn."""
        self._tool_names: set[str] = set()
        self._queue: list[_Pending] = []
        self._sent: _Pending | None = None
        self._note: str | None = None
        """Said to the model in the next request only (a dropped reply's problem); never in the history."""
        self._waiting: list[str] = []
        """Customer messages that arrived mid-batch; they follow the batch's tool messages."""
        self._contacts = 0
        self._episode_seed = 0
        """The episode's reset seed (``info["seed"]``), added to the profile's sampling seed."""

    # -- observations in ---------------------------------------------------------
    def next_action(self, observation: str, info: dict[str, Any]) -> str | None:
        """Take the env's observation; the next action of the current reply, or None: ask the model."""
        self.turn += 1
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
        self._episode_seed = int(info.get("seed") or 0)
        self.tools = list(info.get("tools") or [])
        self._tool_names = {t["function"]["name"] for t in self.tools}
        self.messages.append({"role": "system", "content": system_prompt(self.profile.instructions, info)})

    @property
    def system(self) -> str:
        """The system message (empty before the first observation)."""
        return str(self.messages[0]["content"]) if self.messages else ""

    def given(self) -> dict[str, tuple[str, str]]:
        """What the model was given, by content hash: ``{"system": (hash, text), "tools": (hash, JSON text)}``."""
        return given(self.system, self.tools)

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
        if sent.call_id is None:  # a dropped reply: the note says what happened, nothing goes in the history
            return
        if sent.problem is not None:
            body = {"status": body.get("status", "rejected"), "problem": sent.problem, "environment": body}
        self.messages.append({"role": "tool", "tool_call_id": sent.call_id, "content": tool_content(body, turns_left)})

    def _send(self, pending: _Pending) -> str:
        self._sent = pending
        if pending.kind is not None:
            self.rejections[self.turn] = pending.kind
        if pending.to_customer:
            self._contacts += 1
        elif pending.call_id is not None and pending.problem is None:
            if json.loads(pending.action).get("tool") == "ask_customer":
                self._contacts += 1
        return pending.action

    # -- the model's reply in ------------------------------------------------------
    def request(self) -> dict[str, Any]:
        """The JSON body of the next model call (``stream`` is added by the transport, :mod:`._reply`)."""
        messages = list(self.messages)
        if self._note is not None:
            messages.append({"role": "user", "content": NOTE_PREFIX + self._note})
        request: dict[str, Any] = {**self.profile.provider.request_params(bool(self.tools)),
                                   "model": self.profile.model, "messages": messages,
                                   **self.profile.sampling.request_params()}
        if "seed" in request:  # each repeat (reset with seed + k) samples its own replies, reproducibly
            request["seed"] = (request["seed"] + self._episode_seed) % SEED_RANGE
        if self.tools:
            request["tools"] = self.tools
        return request

    def wanted_tokens(self) -> int:
        """The next request's prompt tokens, estimated erring high (:func:`._prompt.prompt_tokens`), plus its
        ``max_tokens`` (0 when unset)."""
        return prompt_tokens(self.request()["messages"], self.tools) + (self.profile.sampling.max_tokens or 0)

    def over_context(self) -> str | None:
        """Why the next request does not fit the profile's ``context`` (None: it fits, or no context is set)."""
        context = self.profile.context
        if context is None:
            return None
        prompt = prompt_tokens(self.request()["messages"], self.tools)
        reply = self.profile.sampling.max_tokens or 0
        if prompt + reply <= context:
            return None
        return (f"the prompt does not fit the model's context: about {prompt} tokens (estimated, erring high; "
                f"system message {len(self.system)} characters, {len(self.tools)} tool schemas "
                f"{len(tools_text(self.tools))} characters) plus max_tokens {reply} is over the profile's context "
                f"of {context} tokens, so the agent gives up without sending it (a larger context, fewer tools or "
                "shorter policies would fit)")

    def take(self, reply: ModelReply, server: dict[str, Any] | None = None) -> str:
        """The first env action of the model's reply (the rest queue up behind it); ``server``: what waiting for
        the server after a cut-off reply found (recorded in the dropped action)."""
        self._note = None
        tokens = reply_usage(reply)
        if reply.cut is not None or reply.finish_reason == "length":
            kind = reply.cut or "cut_off_length"
            limit = (f"max_call_s ({self.profile.max_call_s} s)" if kind == CUT_OFF_TIME
                     else f"max_tokens ({self.profile.sampling.max_tokens})")
            return self._drop(kind, reply, f"your last reply ran past {limit} and was cut off, so nothing in it "
                                           "was run. Reply with one short, complete tool call.", server)
        if not reply.choices or (not reply.calls and not reply.text.strip()):
            return self._drop("empty_reply", reply, "your last reply had neither text nor a tool call. Reply with "
                                                    "one tool call.")
        entry: dict[str, Any] = {"role": "assistant", "content": reply.text}  # a string: llama.cpp refuses null
        if reply.calls:
            entry["tool_calls"] = [
                {"id": c["id"] or f"call_{len(self.messages)}_{n}", "type": "function",
                 "function": {"name": c["name"], "arguments": c["arguments"]}} for n, c in enumerate(reply.calls)]
        self.messages.append(entry)
        if reply.calls:
            self._queue = [self._call(c, tokens if n == 0 else None) for n, c in enumerate(entry["tool_calls"])]
        else:
            text = reply.text
            tool = "ask_customer" if self._contacts < self.max_customer_contacts else "finish"
            args = {"question": text} if tool == "ask_customer" else {"message": text}
            self._queue = [_Pending(action_text(tool, args, tokens), None, to_customer=tool == "ask_customer")]
        return self._send(self._queue.pop(0))

    def _drop(self, kind: str, reply: ModelReply, note: str, server: dict[str, Any] | None = None) -> str:
        self._note = note
        self._queue = []
        return self._send(_Pending(dropped_action(kind, reply, server), None, problem=note, kind=kind))

    def _call(self, call: dict[str, Any], tokens: dict[str, int] | None) -> _Pending:
        call_id, name, raw = call["id"], call["function"]["name"], call["function"]["arguments"]
        try:
            args = json.loads(raw) if raw.strip() else {}
        except ValueError as exc:
            return _Pending(action_text(name, raw[:MAX_RAW], tokens), call_id, kind="malformed_json",
                            problem=f"the arguments of {name!r} are not valid JSON ({exc}); nothing was run. "
                                    "Send the arguments as one JSON object")
        if name in self._tool_names:
            return _Pending(action_text(name, args, tokens), call_id)
        return _Pending(action_text(name, args, tokens), call_id, kind="unknown_tool",
                        problem=f"there is no tool {name!r}; nothing was run")

    def give_up(self, reason: str) -> str:
        """The action that ends the episode on the agent's own account (a refused request, a spent budget,
        a prompt over the context)."""
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


class _Agent:
    """What the synchronous and asynchronous agents share: the conversation, the stats and the limits."""

    def __init__(self, profile: AgentProfile, endpoint: Endpoint | None, max_customer_contacts: int) -> None:
        _agent_kwargs(profile)
        self.profile = profile
        self.endpoint = endpoint or Endpoint()
        self.conversation = Conversation(profile, max_customer_contacts=max_customer_contacts)
        self.stats = ModelStats()
        self._rng = random.Random()

    @property
    def rejections(self) -> dict[int, str]:
        """The kind of each rejected attempt the agent made knowingly, by turn (see :data:`REJECTED_KINDS`)."""
        return self.conversation.rejections

    def fork(self, *, seed: int | None = None) -> Self:
        """An independent agent in this one's state (its conversation and counts so far), on the same client, to
        play a fork of its episode (:meth:`rehearsal_env.RehearsalEnv.fork`).

        ``seed``: sample the fork's replies from here on with this sampling seed instead of the profile's (a fork
        that resamples only the agent, ``measure.py --noise-sources``); at temperature 0 a provider is greedy
        whatever the seed.
        """
        twin = copy.copy(self)
        twin.conversation = copy.deepcopy(self.conversation)
        twin.stats = copy.deepcopy(self.stats)
        twin._rng = random.Random()
        if seed is not None:
            twin.profile = replace(self.profile, sampling=replace(self.profile.sampling, seed=seed))
            twin.conversation.profile = twin.profile
        return twin

    def given(self) -> dict[str, tuple[str, str]]:
        """What the model was given in this episode (see :meth:`Conversation.given`)."""
        return self.conversation.given()

    @property
    def max_call_s(self) -> float:
        """The longest one call may run: the profile's ``max_call_s``, else the endpoint's timeout."""
        return self.profile.max_call_s or self.endpoint.timeout_s

    def _before_call(self, observation: str, info: dict[str, Any]) -> str | None:
        """The action to take without calling the model (None: call it)."""
        action = self.conversation.next_action(observation, info)
        if action is not None:
            return action
        if spent(self.profile, self.stats):
            return self.conversation.give_up(spent_reason(self.profile))
        too_long = self.conversation.over_context()
        if too_long is not None:
            return self.conversation.give_up(too_long)
        return None

    def _transport(self) -> dict[str, Any]:
        return {"stream": self.profile.provider.stream, "max_tokens": self.profile.sampling.max_tokens,
                "max_call_s": self.max_call_s}

    def _spent_time(self, started: float) -> float:
        elapsed = (time.perf_counter() - started) * 1000
        self.stats.latency_ms += elapsed
        return elapsed

    def _probe(self) -> dict[str, Any]:
        """The drain probe for this episode (its system message, 1 token)."""
        return probe_body(self.profile.model, self.conversation.system, self.conversation.tools,
                          json.loads(self.profile.provider.extra_body))

    def _drained(self, drained: Drained | None) -> dict[str, Any] | None:
        if drained is None:
            return None
        self.stats.drained_ms += drained.waited_ms
        return drained.to_dict()

    def _took(self, reply: ModelReply, elapsed: float, server: dict[str, Any] | None = None) -> str:
        """Count a call that got a reply (it took ``elapsed`` ms) and turn its reply into the next action."""
        self.stats.calls += 1
        self.stats.latencies_ms.append(elapsed)
        self.stats.cut_offs += reply.cut is not None
        if reply.tokens is not None:
            self.stats.tokens += reply.tokens
        else:
            self.stats.replies_without_usage += 1
        return self.conversation.take(reply, server)


class OpenAIAgent(_Agent):
    """A policy ``(observation, info) -> action`` played by a model over an OpenAI-compatible API.

    Args:
        profile: An ``openai`` agent profile (model, instructions, sampling, provider options).
        endpoint: Where the model is served and how calls are retried.
        max_customer_contacts: The scenario's ``max_customer_contacts`` (see the module docstring).
        client: A client to share between agents (default: one made from ``endpoint``).

    Raises (from a call):
        ProviderError: the provider failed after its retries (the episode is not scored).
        ProviderRefused: the provider refused the model, key or access (stop the run).
    """

    def __init__(self, profile: AgentProfile, endpoint: Endpoint | None = None, *, max_customer_contacts: int = 1,
                 client: openai.OpenAI | None = None) -> None:
        super().__init__(profile, endpoint, max_customer_contacts)
        self.client = client or self.endpoint.client()

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        action = self._before_call(observation, info)
        if action is not None:
            return action
        self.stats.held_ms += GATE.hold(str(self.client.base_url))  # another episode's cut-off reply drains
        started = time.perf_counter()
        tries = 0
        try:
            while True:
                tries += 1
                try:
                    reply = complete(self.client, self.conversation.request(), **self._transport())
                    break
                except openai.APIError as exc:
                    verdict = failed(self.endpoint, self.profile, self.stats, exc, tries, self._rng,
                                     wanted=self.conversation.wanted_tokens())
                    if isinstance(verdict, str):
                        return self.conversation.give_up(verdict)
                    time.sleep(verdict)
        finally:
            elapsed = self._spent_time(started)
        drained = drain(self.client, self._probe()) if reply.cut is not None else None
        return self._took(reply, elapsed, self._drained(drained))


def record_fields(agent: object, trace: Sequence[Any]) -> dict[str, Any]:
    """What a model agent adds to its episode's record (empty for any other agent): the trace with each rejected
    turn's ``rejected_kind`` (the agent's own, else ``invalid_action``: the env refused a call it passed on) and
    what the model was given, by content hash (``system_prompt_sha``, ``tools_sha``)."""
    if not isinstance(agent, _Agent):
        return {}
    kinds = agent.rejections
    parts = agent.given()
    return {"trace": tuple(replace(t, rejected_kind=kinds.get(t.turn, "invalid_action")) if t.rejected else t
                           for t in trace),
            "system_prompt_sha": parts["system"][0], "tools_sha": parts["tools"][0]}


def failed(endpoint: Endpoint, profile: AgentProfile, stats: ModelStats, exc: openai.APIError, tries: int,
           rng: random.Random, *, wanted: int) -> float | str:
    """After a failed try: seconds to wait, the give-up reason (a 4xx), or raise (exhausted; 401/403/404; a
    context refusal the profile's context contradicts). ``wanted``: the request's tokens, estimated erring high."""
    if is_retryable(exc) or not isinstance(exc, openai.APIStatusError):
        if tries > endpoint.max_retries:
            raise exhausted(endpoint, profile.model, exc, tries) from exc
        stats.retries += 1
        return retry_delay(endpoint, tries, exc, rng)
    contradicted = context_contradiction(endpoint, profile.model, exc, tries, wanted=wanted, context=profile.context)
    if contradicted is not None:
        raise contradicted from exc
    refused = refusal(endpoint, profile.model, exc)
    if isinstance(refused, ProviderRefused):
        raise refused from exc
    return refused


def spent(profile: AgentProfile, stats: ModelStats) -> bool:
    """Whether the profile's ``max_model_calls`` for this episode are spent."""
    return profile.max_model_calls is not None and stats.calls >= profile.max_model_calls


def spent_reason(profile: AgentProfile) -> str:
    return (f"the agent profile's max_model_calls ({profile.max_model_calls}) are spent; the agent stops "
            "(its own limit: scored)")


class AsyncOpenAIAgent(_Agent):
    """:class:`OpenAIAgent`'s loop with an :class:`openai.AsyncOpenAI` client: ``await agent.act(obs, info)``."""

    def __init__(self, profile: AgentProfile, endpoint: Endpoint | None = None, *, max_customer_contacts: int = 1,
                 client: openai.AsyncOpenAI | None = None) -> None:
        super().__init__(profile, endpoint, max_customer_contacts)
        self.client = client or self.endpoint.async_client()

    async def act(self, observation: str, info: dict[str, Any]) -> str:
        action = self._before_call(observation, info)
        if action is not None:
            return action
        self.stats.held_ms += await GATE.hold_async(str(self.client.base_url))
        started = time.perf_counter()
        tries = 0
        try:
            while True:
                tries += 1
                try:
                    reply = await complete_async(self.client, self.conversation.request(), **self._transport())
                    break
                except openai.APIError as exc:
                    verdict = failed(self.endpoint, self.profile, self.stats, exc, tries, self._rng,
                                     wanted=self.conversation.wanted_tokens())
                    if isinstance(verdict, str):
                        return self.conversation.give_up(verdict)
                    await asyncio.sleep(verdict)
        finally:
            elapsed = self._spent_time(started)
        drained = await drain_async(self.client, self._probe()) if reply.cut is not None else None
        return self._took(reply, elapsed, self._drained(drained))


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
