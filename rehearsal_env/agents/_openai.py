"""The ``openai`` agent: a model behind an OpenAI-compatible chat-completions API plays the episode.

The loop (one :class:`~._conversation.Conversation` per episode):

- **the chat**: :mod:`._conversation` (the system message, a tool call per env step, text to the customer,
  malformed replies as rejected attempts, usage on the first action of a reply).
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

from ._conversation import Conversation
from ._drain import GATE, Drained, drain, drain_async, probe_body
from ._profile import AgentProfile
from ._provider import (
    Endpoint,
    ProviderRefused,
    context_contradiction,
    exhausted,
    is_retryable,
    refusal,
    retry_delay,
)
from ._reply import ModelReply, complete, complete_async


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
        """The kind of each rejected attempt the agent made knowingly, by turn
        (:data:`._conversation.REJECTED_KINDS`)."""
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
