"""A world as a verifiers ``MultiTurnEnv`` whose rubric is our reward.

verifiers' legacy stack (``import verifiers as vf``: ``MultiTurnEnv``, ``setup_state``,
``env_response``, ``@vf.stop``, ``@vf.cleanup``, ``Rubric``) drives the conversation: each
model turn is a chat completion (over any OpenAI-compatible API), and ``env_response``
answers its tool calls. Here every tool call is one env step of the rollout's own
:class:`~rehearsal_env.integrations.Session` (a database per rollout in flight, pooled):

- the tool message is the tool result as the ``openai`` agent shows it (status, result or
  error, ``turns_left``); customer messages that arrived during the step follow as user
  messages; each reply's ``usage.total_tokens`` is reported with its first call, so
  efficiency is measured as for the ``openai`` agent;
- arguments that are not JSON reach the env as the raw text, a rejected attempt the model
  reads about (never a crash of the rollout);
- the episode's end (``finish``, ``give_up``, the turn limit) ends the rollout
  (``final_env_response``); a model turn without a tool call ends it too, the episode then
  settled with ``give_up`` (``STOPPED_REASON``), as in the TRL adapter;
- the rubric's one weighted function is the episode's reward under the profile (0.0 for a
  not-scored episode, which the ``not_scored`` metric flags); ``verified``,
  ``rule_violated`` and ``false_completion`` are metrics (weight 0). The verdict is in
  ``state["rehearsal"]`` as :func:`~rehearsal_env.episodes.ending_view` shows it (holdout: outcome, ending and
  reward only);
- every episode is recorded, sealed, into ``OUT/<world>-<profile>/`` (``out=``, default ``runs/verifiers``).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import verifiers as vf
from datasets import Dataset
from verifiers.types import Messages, State, ToolMessage, UserMessage

from ...agents import tool_content
from ...scenarios import Scenario, Split
from ...worlds import World, load_world
from .._prompt import system_prompt
from .._session import Session

DEFAULT_OUT = "runs/verifiers"
"""Where the episodes are recorded unless ``out=`` names another place."""
AGENT = "verifiers"
"""The agent name on the records unless ``agent=`` names another."""


def rows(world: World, split: Split | None, seeds: int = 1, instructions: str = "") -> list[dict[str, Any]]:
    """verifiers dataset rows: ``prompt`` (system message, the customer's request), ``answer`` (unused, empty)
    and ``info`` (JSON text: scenario, seed, the scenario's tool definitions)."""
    out = []
    for scenario in world.scenarios(split):
        tools = world.tools_for(scenario.role, offers_retry=scenario.offers_retry).values()
        tool_defs = [{"name": t.name, "description": t.description, "parameters": dict(t.parameters)} for t in tools]
        for seed in range(seeds):
            out.append({"prompt": [{"role": "system", "content": system_prompt(world, scenario, instructions)},
                                   {"role": "user", "content": scenario.request}],
                        "answer": "",
                        "info": json.dumps({"scenario": scenario.id, "seed": seed, "tool_defs": tool_defs})})
    return out


def _tokens(state: State) -> int | None:
    """The last reply's ``usage.total_tokens`` (None: the provider reported none), reported with its first call
    as the ``openai`` agent does."""
    trajectory = state.get("trajectory") or []
    usage = getattr(trajectory[-1].get("response"), "usage", None) if trajectory else None
    total = getattr(usage, "total_tokens", None)
    return total if isinstance(total, int) and not isinstance(total, bool) and total >= 0 else None


def _tool_body(observation: str) -> tuple[str, list[str]]:
    """The tool message (the result, as the openai agent shows it) and the customer messages of an observation."""
    obs = json.loads(observation)
    if "tool_result" not in obs and "turns_left" not in obs:  # a call after the end
        return tool_content(obs, None), []
    body = obs.get("tool_result") or {"status": obs.get("status"), "error": obs.get("error")}
    return tool_content(body, obs.get("turns_left")), [str(m) for m in obs.get("messages") or ()]


class RehearsalVerifiersEnv(vf.MultiTurnEnv):
    """A verifiers environment of one world's split (see the module doc)."""

    def __init__(self, world: World, split: Split | None = "train", profile: str | None = "rl", *,
                 eval_split: Split | None = None, seeds: int = 1, instructions: str = "", stress: bool = True,
                 out: str | None = DEFAULT_OUT, agent: str = AGENT, agent_version: str = "unversioned",
                 **kwargs: Any) -> None:
        self.world, self.split, self.profile, self.stress = world, split, profile, stress
        self._recording: dict[str, Any] = {"out": out, "agent": agent, "agent_version": agent_version}
        self._idle: list[Session] = []
        dataset = Dataset.from_list(rows(world, split, seeds, instructions))
        eval_dataset = Dataset.from_list(rows(world, eval_split, seeds, instructions)) if eval_split else dataset
        rubric = vf.Rubric(funcs=[self.reward, self.verified, self.rule_violated, self.false_completion,
                                  self.not_scored], weights=[1.0, 0.0, 0.0, 0.0, 0.0])
        turns = max((s.turn_limit for s in world.scenarios(split)), default=20) + 1
        super().__init__(dataset=dataset, eval_dataset=eval_dataset, rubric=rubric, max_turns=turns,
                         env_id=f"rehearsal-{world.name}", **kwargs)

    # -- the rollout ---------------------------------------------------------------
    def _scenario(self, state: State) -> tuple[Scenario, int]:
        info = state["info"]
        info = json.loads(info) if isinstance(info, str) else info
        return self.world.scenario(info["scenario"]), int(info.get("seed", 0))

    async def setup_state(self, state: State) -> State:
        scenario, seed = self._scenario(state)
        session = self._idle.pop() if self._idle else Session(self.world, profile=self.profile, stress=self.stress,
                                                                          **self._recording)
        await asyncio.to_thread(session.start, scenario, seed)
        state["rehearsal_session"] = session
        state["rehearsal"] = {"scenario": scenario.id, "split": scenario.split, "verdict": None, "reward": None}
        return state

    async def env_response(self, messages: Messages, state: State, **kwargs: Any) -> Messages:
        session: Session = state["rehearsal_session"]
        last = messages[-1]
        replies: list[Any] = []
        customer: list[str] = []
        tokens = _tokens(state)
        for n, call in enumerate(getattr(last, "tool_calls", None) or []):
            try:
                args: Any = json.loads(call.arguments) if call.arguments else {}
            except ValueError:
                args = call.arguments  # not JSON: the env rejects it and says why
            observation = await asyncio.to_thread(session.call, call.name, args, tokens if n == 0 else None)
            body, said = _tool_body(observation)
            replies.append(ToolMessage(role="tool", tool_call_id=call.id, content=body))
            customer += said
        replies += [UserMessage(role="user", content=text) for text in customer]
        if session.ended:
            await self._settle(state)
            state["final_env_response"] = replies
        return replies

    async def _settle(self, state: State) -> None:
        session: Session | None = state.get("rehearsal_session")
        if session is None or session.env is None:
            return
        await asyncio.to_thread(session.settle)
        state["rehearsal"].update(verdict=session.ending()["verdict"], reward=session.reward)

    @vf.stop
    async def episode_over(self, state: State) -> bool:
        session: Session | None = state.get("rehearsal_session")
        return session is not None and session.ended

    @vf.stop
    async def no_tool_called(self, state: State) -> bool:
        """The model answered without a tool call: the episode ends (settled with ``give_up``)."""
        if not state["trajectory"]:
            return False
        last = state["trajectory"][-1]["completion"][-1]
        if getattr(last, "role", None) == "assistant" and not getattr(last, "tool_calls", None):
            await self._settle(state)
            return True
        return False

    @vf.cleanup
    async def release_session(self, state: State) -> None:
        """Settle an episode the rollout left running (an error, a timeout), then return its database."""
        session: Session | None = state.pop("rehearsal_session", None)
        if session is None:
            return
        if state["rehearsal"]["verdict"] is None and session.env is not None:
            state["rehearsal_session"] = session
            await self._settle(state)
            state.pop("rehearsal_session", None)
        self._idle.append(session)

    # -- the rubric ------------------------------------------------------------------
    async def reward(self, state: State) -> float:
        """The episode's reward under the profile (0.0 when not scored; see ``not_scored``)."""
        value = state["rehearsal"]["reward"]
        return float(value) if value is not None else 0.0

    async def verified(self, state: State) -> float:
        verdict = state["rehearsal"]["verdict"] or {}
        return float(verdict.get("outcome") == "verified")

    async def rule_violated(self, state: State) -> float:
        verdict = state["rehearsal"]["verdict"] or {}
        return float(verdict.get("outcome") == "rule_violated")

    async def false_completion(self, state: State) -> float:
        verdict = state["rehearsal"]["verdict"] or {}
        return float(bool((verdict.get("metrics") or {}).get("false_completion")))

    async def not_scored(self, state: State) -> float:
        verdict = state["rehearsal"]["verdict"] or {}
        return float(verdict.get("outcome") == "not_scored")


def load_environment(world: str = "shop", split: Split | None = "train", profile: str | None = "rl",
                     **kwargs: Any) -> RehearsalVerifiersEnv:
    """The verifiers entry point: ``vf.load_environment("rehearsal_env.integrations.verifiers", world=...,
    split=...)``.

    Args:
        world: A world name.
        split: The split of the training dataset (``eval_split=`` sets the evaluation one; default the same).
        profile: The reward profile of the rubric's reward (None: the outcome reward 1 / 0 / -1).
        kwargs: ``eval_split``, ``seeds``, ``instructions``, ``stress``, ``out`` (where episodes are recorded),
            ``agent``, ``agent_version``, and verifiers' own options.
    """
    return RehearsalVerifiersEnv(load_world(world), split, profile, **kwargs)
