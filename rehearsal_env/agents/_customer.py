"""A customer played by a model over an OpenAI-compatible API (``--customer openai:MODEL``).

It implements :class:`rehearsal_env.env.Customer`. *When* the customer speaks stays
the env's decision (the events layer delivers the change of request and the
stress layer's repeat on the scenario's schedule, and holds writes); *what* the
task is stays the scenario's: the opening request, the change of request and the
repeat are the scenario's own words, so the goal checks keep meaning what they
say. The model writes only the answers to ``ask_customer`` (and to the agent's
plain-text replies, which arrive as ``ask_customer``), from a brief that holds:

- the request, and the change of request once it has arrived (never before);
- the facts it knows (the scenario's ``facts``): it shares a fact only when the
  question asks for it, and says it does not know anything else;
- the conversation so far in this episode.

A provider failure after the retries, or any refused request but 401/403/404
(which stop the run, :class:`~._provider.ProviderRefused`), is a
:class:`~._provider.ProviderError` (not scored, cause ``provider``): the customer
is part of the instrument, never the agent's fault. A reply without text answers the scripted
customer's "don't know" line, so the agent's episode never depends on a model's
empty reply.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import openai

from ..env import ScriptedCustomer
from ..scenarios import Scenario
from ._conversation import SEED_RANGE
from ._openai import ModelStats
from ._profile import AgentProfile, Sampling
from ._provider import Endpoint, ProviderError, ProviderRefused, exhausted, is_retryable, refusal, retry_delay

DONT_KNOW = "Sorry, I don't know that."

BRIEF = """You are a customer writing to a support desk. Stay in character; answer in one or two short sentences.
Your request: {request}
{changed}Facts you know (share one only when the question asks for it; never volunteer them):
{facts}
If you are asked something none of these facts answers, say you don't know. Never invent order numbers, \
amounts, emails or other facts. Never do the agent's work or tell it which tool to use."""


class ModelCustomer:
    """The customer of one scenario, its answers written by a model (one instance per env; reset by ``opening``).

    Args:
        scenario: The scenario whose customer it plays.
        profile: An ``openai`` profile for the customer's model (or use :meth:`for_model`).
        endpoint: Where the model is served.
        client: A client to share (default: one made from ``endpoint``).
    """

    def __init__(self, scenario: Scenario, profile: AgentProfile, endpoint: Endpoint | None = None, *,
                 client: openai.OpenAI | None = None) -> None:
        if not profile.model:
            raise ValueError(f"expected a customer profile with a model, got {profile.ref!r}")
        self.scenario = scenario
        self.profile = profile
        self.endpoint = endpoint or Endpoint()
        self.client = client or self.endpoint.client()
        self.stats = ModelStats()
        self._script = ScriptedCustomer(scenario)
        self._changed = False
        self._history: list[dict[str, Any]] = []
        self._rng = random.Random()
        self._episode_seed = 0
        """The episode's reset seed, added to the profile's sampling seed (as the agent's is)."""

    @classmethod
    def for_model(cls, scenario: Scenario, model: str, endpoint: Endpoint | None = None, *,
                  sampling: Sampling | None = None, client: openai.OpenAI | None = None) -> ModelCustomer:
        """The customer of ``--customer openai:MODEL`` (temperature 0 unless ``sampling`` says otherwise)."""
        return cls(scenario, AgentProfile(name=f"customer:{model}", model=model,
                                          sampling=sampling or Sampling(temperature=0.0)), endpoint, client=client)

    # -- the Customer protocol ---------------------------------------------------------
    def begin_episode(self, seed: int) -> None:
        """Told by the env before each opening: the episode's reset seed, added to the sampling seed."""
        self._episode_seed = seed

    def opening(self) -> str:
        self._changed = False
        self._history = []
        self.stats = ModelStats()
        request = self._script.opening()
        self._history.append({"role": "assistant", "content": request})
        return request

    def change(self) -> str:
        message = self._script.change()
        self._changed = True
        self._history.append({"role": "assistant", "content": message})
        return message

    def repeat(self) -> str:
        message = self._script.repeat()
        self._history.append({"role": "assistant", "content": message})
        return message

    def answer(self, question: str) -> str:
        self._history.append({"role": "user", "content": question})
        self._history.append({"role": "assistant", "content": self._reply()})
        return str(self._history[-1]["content"])

    def _reply(self) -> str:
        reply = self._complete([{"role": "system", "content": self.brief()}, *self._history])
        return reply.strip() or DONT_KNOW

    # -- forks and checkpoints -----------------------------------------------------------
    def customer_state(self) -> dict[str, Any]:
        """What this customer remembers of the conversation (for forks and checkpoints)."""
        return {"changed": self._changed, "history": [dict(m) for m in self._history],
                "script": self._script.customer_state(), "episode_seed": self._episode_seed}

    def load_customer_state(self, state: Mapping[str, Any]) -> None:
        """Continue from :meth:`customer_state` of a customer of the same scenario."""
        self._changed = bool(state["changed"])
        self._history = [{"role": str(m["role"]), "content": str(m["content"])} for m in state["history"]]
        self._script.load_customer_state(state["script"])
        self._episode_seed = int(state.get("episode_seed", 0))

    def fork(self) -> ModelCustomer:
        """An independent customer in this one's state, on the same model and client."""
        twin = ModelCustomer(self.scenario, self.profile, self.endpoint, client=self.client)
        twin.load_customer_state(self.customer_state())
        return twin

    def resample(self, seed: int) -> None:
        """Sample this customer's answers from here on with ``seed`` (a fork that resamples only the customer,
        ``measure.py --noise-sources``); at temperature 0 nothing changes."""
        self.profile = replace(self.profile, sampling=replace(self.profile.sampling, seed=seed))

    # -- the model -------------------------------------------------------------------------
    def brief(self) -> str:
        """The system message: the request (and the change once it has arrived) and the facts."""
        s = self.scenario
        changed = f"You have since changed your request: {s.change.message}\n" if self._changed and s.change else ""
        facts = "\n".join(f"- about {keyword}: {reply}" for keyword, reply in s.facts) or "- (none beyond your request)"
        return BRIEF.format(request=s.request, changed=changed, facts=facts)

    def _sampling(self) -> dict[str, Any]:
        params = self.profile.sampling.request_params()
        if "seed" in params:  # each repeat (reset with seed + k) samples its own answers, reproducibly
            params["seed"] = (params["seed"] + self._episode_seed) % SEED_RANGE
        return params

    def _complete(self, messages: list[dict[str, Any]]) -> str:
        started = time.perf_counter()
        tries = 0
        while True:
            tries += 1
            try:
                completion = self.client.chat.completions.create(
                    model=self.profile.model, messages=messages,  # type: ignore[arg-type]
                    **self._sampling())
                break
            except openai.APIError as exc:
                if is_retryable(exc) or not isinstance(exc, openai.APIStatusError):
                    if tries > self.endpoint.max_retries:
                        raise exhausted(self.endpoint, self.profile.model, exc, tries) from exc
                    self.stats.retries += 1
                    time.sleep(retry_delay(self.endpoint, tries, exc, self._rng))
                    continue
                refused = refusal(self.endpoint, self.profile.model, exc)
                if isinstance(refused, ProviderRefused):
                    raise refused from exc
                # the customer is part of the instrument: its refused request is never the agent's fault
                raise ProviderError(f"the customer's model refused the request ({exc}); the episode is not scored",
                                    tries=tries, status=exc.status_code) from exc
        elapsed = (time.perf_counter() - started) * 1000
        self.stats.calls += 1
        self.stats.latency_ms += elapsed
        self.stats.latencies_ms.append(elapsed)
        usage = getattr(completion, "usage", None)
        if usage is not None and isinstance(getattr(usage, "total_tokens", None), int):
            self.stats.tokens += usage.total_tokens
        else:
            self.stats.replies_without_usage += 1
        choices = completion.choices or []
        return (choices[0].message.content or "") if choices else ""
