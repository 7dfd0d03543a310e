"""A world's scenarios as a verl agent loop (``verl.experimental.agent_loop.AgentLoopBase``).

verl's ``AgentLoopWorker.generate_sequences`` runs, for each row of a batch, the agent loop its ``agent_name`` names
(``hydra.utils.instantiate`` of the registry entry, then ``await loop.run(sampling_params, **row)``) and pads what
it returns into the training batch. :class:`RehearsalAgentLoop` (registered by :func:`register`, default name
``rehearsal``):

- starts the row's ``scenario`` (``world``, ``seed``; top level or in ``extra_info``) on a database in the snapshot
  state, and builds the prompt with verl's own Continuous Token builder from the served agent's messages (system
  message, customer's opening words) and the role's tool schemas, so the chat template declares the tools;
- asks the rollout server for each turn (``server_manager.generate``: token ids in, token ids and log-probs out, never
  re-tokenized: verl's builder merges the ids), plays the decoded text as the ``openai`` agent would
  (:class:`~.._replies.ReplyPlayer`: each ``<tool_call>`` one env step, text alone to the customer) and appends the
  results as ``tool`` messages (the customer's answer to text as a ``user`` message), masked 0 for the loss;
- ends at the episode's end; a turn limit (``max_assistant_turns``) or the response budget (``response_length``)
  reached first ends it for the agent (``give_up``, :data:`~.._prompt.STOPPED_REASON`), judged;
- returns ``reward_score``: the episode's reward under the profile (verl puts it on the last token; an episode not
  scored gives 0 and ``extra_fields["scored"] = False``), with ``extra_fields["turn_scores"]`` each turn's reward
  (under ``rl_turns`` they sum to ``reward_score``), ``verdict`` (:func:`~rehearsal_env.episodes.ending_view`) and
  ``episode_id``.

Each loop records its episode, sealed, into ``OUT/<world>-<profile>/`` (``register(out=...)``, default
``runs/verl``); the loops of a worker process share one recorder (written every 32 episodes, every 30 s and at exit)
and keep their sessions and databases between rows (:mod:`~rehearsal_env.integrations._idle`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import (
    AgentLoopBase,
    AgentLoopMetrics,
    AgentLoopOutput,
    _agent_loop_registry,
)

from ...worlds import World, load_world
from .._idle import give, take
from .._idle import world as _world
from .._replies import ReplyPlayer, prompt
from .._session import Session

NAME = "rehearsal"
"""The agent loop's default name (the rows' ``agent_name``)."""
DEFAULT_OUT = "runs/verl"
"""Where the episodes are recorded unless ``register(out=...)`` names another place (None: not recorded)."""
AGENT = "verl"
"""The agent name on the records unless ``register(agent=...)`` names another."""

class RehearsalAgentLoop(AgentLoopBase):  # type: ignore[misc]  # verl ships no type information
    """One episode per ``run`` (see the module doc)."""

    def __init__(self, *args: Any, profile: str | None = "rl", out: str | None = DEFAULT_OUT, agent: str = AGENT,
                 agent_version: str = "unversioned", backend: str = "sqlite", stress: bool = True,
                 tools: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.profile, self.out, self.agent, self.agent_version = profile, out, agent, agent_version
        self.backend, self.stress = backend, stress
        multi_turn = self.rollout_config.multi_turn
        self.max_assistant_turns = int(multi_turn.get("max_assistant_turns") or 0)
        self.response_length = int(self.rollout_config.response_length)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        nested = kwargs.get("extra_info")
        row = {**(dict(nested) if isinstance(nested, Mapping) else {}), **kwargs}
        if not row.get("world") or not row.get("scenario"):
            raise ValueError(f"a rehearsal agent loop needs the row's 'world' and 'scenario' (top level or in "
                             f"extra_info), got {sorted(row)}; build the rows with "
                             "rehearsal_env.integrations.verl.dataset_rows")
        world = _world(str(row["world"]))
        session = take(world, profile=self.profile, backend=self.backend, stress=self.stress, out=self.out,
                       agent=self.agent, agent_version=self.agent_version)
        try:
            return await self._play(session, str(row["scenario"]).rpartition("/")[2], int(row.get("seed", 0)),
                                    sampling_params)
        finally:
            await asyncio.to_thread(give, session)

    async def _play(self, session: Session, scenario: str, seed: int, sampling_params: dict[str, Any]
                    ) -> AgentLoopOutput:
        opening = await asyncio.to_thread(session.start, scenario, seed)
        player = ReplyPlayer(session)
        messages: list[dict[str, Any]] = list(prompt(session, opening, tools_in_system=False))
        tools = list(session.info["tools"])
        ids = await self.ct_build_initial_tokens(messages, tools=tools)
        start = len(ids)
        mask: list[int] = []
        logprobs: list[float] = []
        turn_scores: list[float] = []
        request_id, turns = uuid4().hex, 0
        metrics: dict[str, Any] = {}
        while True:
            out = await self.server_manager.generate(request_id=request_id, prompt_ids=ids,
                                                     sampling_params=sampling_params)
            turns += 1
            merged, mask, merged_logprobs = await self.ct_merge_assistant_token(
                ids, out.token_ids, mask, logprobs if (logprobs or out.log_probs) else None,
                assistant_logprobs=out.log_probs or None)
            ids = merged.token_ids
            if merged_logprobs is not None:
                logprobs = list(merged_logprobs)
            tokenizer: Any = self.tokenizer
            text = tokenizer.decode(out.token_ids, skip_special_tokens=True)
            turn = await asyncio.to_thread(player.play_text, text)
            turn_scores.append(turn.reward)
            messages.append({"role": "assistant", "content": text})
            if turn.done:
                break
            if len(mask) >= self.response_length or (self.max_assistant_turns and turns >= self.max_assistant_turns):
                break
            before = list(messages)
            messages += [{"role": m.role, "content": m.content} for m in turn.messages]
            merged, new_mask, merged_logprobs = await self.ct_merge_context_msg(
                before, messages, ids, mask, logprobs or None, tools=tools)
            if len(new_mask) >= self.response_length:
                break
            ids, mask = merged.token_ids, new_mask
            if logprobs:
                logprobs = list(merged_logprobs or [])
        if not session.ended:  # the trainer's budget ran out first: ended for the agent, judged
            await asyncio.to_thread(session.settle)
            turn_scores.append(session.last_reward if session.shaped else 0.0)
        reward = session.reward
        if not session.shaped:
            turn_scores[-1] = reward or 0.0
        limit = self.response_length
        return AgentLoopOutput(
            prompt_ids=ids[:start], response_ids=ids[start:][:limit], response_mask=mask[:limit],
            response_logprobs=logprobs[:limit] if logprobs else None,
            reward_score=reward if reward is not None else 0.0, num_turns=len(messages) - 1,
            metrics=AgentLoopMetrics(**metrics),
            extra_fields={"turn_scores": turn_scores, "scored": reward is not None,
                          "verdict": session.ending()["verdict"], "episode_id": session.episode_id})


def register(name: str = NAME, **options: Any) -> str:
    """Register :class:`RehearsalAgentLoop` in verl's agent loop registry under ``name`` with ``options``
    (``profile``, ``out``, ``agent``, ``agent_version``, ``backend``, ``stress``: each loop's keyword arguments);
    return the name (the rows' ``agent_name``)."""
    unknown = set(options) - {"profile", "out", "agent", "agent_version", "backend", "stress"}
    if unknown:
        raise ValueError(f"unknown options {sorted(unknown)}; expected profile, out, agent, agent_version, backend "
                         "or stress")
    _agent_loop_registry[name] = {"_target_": f"{__name__}.RehearsalAgentLoop", **options}
    return name


def dataset_rows(world: str | World, split: Any = "train", *, seeds: int = 1, agent_name: str = NAME
                 ) -> list[dict[str, Any]]:
    """One verl row per scenario of ``split`` and seed: ``prompt`` (a placeholder: the loop builds the real one),
    ``agent_name``, ``data_source``, and ``extra_info`` with the ``world``, ``scenario``, ``seed`` and ``split``."""
    if seeds < 1:
        raise ValueError(f"seeds must be at least 1, got {seeds}")
    w = load_world(world) if isinstance(world, str) else world
    return [{"data_source": f"rehearsal-env/{w.name}", "agent_name": agent_name,
             "prompt": [{"role": "user", "content": f"(scenario {s.id}: the agent loop builds the prompt)"}],
             "extra_info": {"world": w.name, "scenario": s.id, "seed": seed, "split": s.split}}
            for s in w.scenarios(split) for seed in range(seeds)]
