"""A world's scenarios as the Tinker cookbook's ``Env``, ``EnvGroupBuilder`` and ``RLDataset``.

The cookbook's rollout code (``tinker_cookbook.rl.rollouts.do_single_rollout`` / ``do_group_rollout``, and the
training loop over an ``RLDataset``) samples tokens from a ``TokenCompleter`` and hands them to ``Env.step``. Each
env here is the cookbook's own ``EnvFromMessageEnv`` (the renderer turns tokens into an assistant message and the
conversation back into tokens) around a :class:`RehearsalMessageEnv`, which:

- starts the scenario on a database in the snapshot state and opens with the served agent's system message, the
  role's tools declared the renderer's way (``create_conversation_prefix_with_tools``), and the customer's words;
- plays each assistant message as the ``openai`` agent would (:class:`~.._replies.ReplyPlayer`: each tool call one
  env step, text alone to the customer, an unparsable call a rejected attempt) and appends the results as ``tool``
  messages (the customer's answer to text as a ``user`` message), text as :func:`~.._prompt.tool_text` shows it;
- rewards each step: the turn's reward under ``rl_turns`` (the Gymnasium env's, summing to the episode's), the
  episode's reward on the last step otherwise (so ``TrajectoryGroup.get_total_rewards`` is the episode's reward);
  the last step's ``metrics`` carry ``verified`` and ``scored`` and its ``logs`` the outcome.

Every episode is recorded, sealed, into ``OUT/<world>-<profile>/`` (``out``, default ``runs/tinker``; written every
32 episodes, every 30 s and at exit); an episode a rollout leaves open (the cookbook stopped it on length) is ended for
the agent at the group's ``cleanup``, which keeps the sessions and their databases for the next group.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tinker_cookbook.renderers import Renderer
from tinker_cookbook.renderers.base import Message
from tinker_cookbook.rl.message_env import EnvFromMessageEnv, MessageEnv, MessageStepResult
from tinker_cookbook.rl.types import Env, EnvGroupBuilder, RLDataset, StopReason

from ...scenarios import Split
from ...worlds import load_world
from .._idle import give, take
from .._idle import world as _world
from .._prompt import opening_text, system_prompt
from .._replies import Call, ReplyPlayer
from .._session import Session

DEFAULT_OUT = "runs/tinker"
"""Where the episodes are recorded unless ``out=`` names another place (None: not recorded)."""
AGENT = "tinker"
"""The agent name on the records unless ``agent=`` names another."""


def _text(content: Any) -> str:
    """A renderer message's content as text (its text parts joined; thinking is not said to anyone)."""
    if isinstance(content, str):
        return content
    return "".join(str(p.get("text", "")) for p in content or () if isinstance(p, dict) and p.get("type") == "text")


class RehearsalMessageEnv(MessageEnv):  # type: ignore[misc]  # the cookbook's classes carry no types for mypy here
    """One episode of ``scenario`` at the message level (see the module doc)."""

    def __init__(self, session: Session, scenario: str, seed: int, renderer: Renderer) -> None:
        self.session, self.scenario, self.seed, self.renderer = session, scenario, seed, renderer
        self.player = ReplyPlayer(session)
        self.messages: list[Message] = []
        self.example_id = f"{session.world.name}/{scenario}#{seed}"
        self.episode_id: str | None = None
        """The episode this env started (None before ``initial_observation``)."""

    async def initial_observation(self) -> list[Message]:
        opening = await asyncio.to_thread(self.session.start, self.scenario, self.seed)
        self.episode_id = self.session.episode_id
        self.player.started()
        env = self.session.env
        assert env is not None  # start() just made it
        tools = [t["function"] for t in self.session.info["tools"]]
        prefix = self.renderer.create_conversation_prefix_with_tools(tools, system_prompt(self.session.world,
                                                                                          env.scenario))
        self.messages = [*prefix, Message(role="user", content=opening_text(opening))]
        return list(self.messages)

    async def step(self, message: Message) -> MessageStepResult:
        if self.episode_id is None or self.session.episode_id != self.episode_id:
            raise RuntimeError("step() before initial_observation() or after the group's cleanup(): this env's "
                               "episode is not running; make the group's envs again (make_envs)")
        calls = [Call(c.function.name, c.function.arguments) for c in message.get("tool_calls") or ()]
        calls += [Call("", {"unparsed_tool_call": u.raw_text[:4000], "error": u.error[:1000]})
                  for u in message.get("unparsed_tool_calls") or ()]
        turn = await asyncio.to_thread(self.player.play, _text(message.get("content")), calls)
        self.messages.append(message)
        ids = [c.id for c in message.get("tool_calls") or ()]
        for n, said in enumerate(turn.messages):
            reply = Message(role=said.role, content=said.content)  # type: ignore[typeddict-item]
            if said.role == "tool" and n < len(calls):
                reply["name"] = calls[n].name
                call_id = ids[n] if n < len(ids) else None
                if call_id:
                    reply["tool_call_id"] = call_id
            self.messages.append(reply)
        metrics: dict[str, float] = {}
        logs: dict[str, str | int | float] = {}
        if turn.done:
            verdict = self.session.verdict
            outcome = verdict.outcome.value if verdict is not None else "not_scored"
            metrics = {"verified": float(outcome == "verified"), "scored": float(turn.scored),
                       f"stop/{StopReason.COMPLETED}": 1.0}
            logs = {"outcome": outcome, "episode_id": str(self.session.episode_id)}
        reward = turn.reward if math.isfinite(turn.reward) else 0.0
        return MessageStepResult(reward=reward, episode_done=turn.done, next_messages=list(self.messages),
                                 metrics=metrics, logs=logs)


@dataclass
class RehearsalEnvGroupBuilder(EnvGroupBuilder):  # type: ignore[misc]
    """``group_size`` envs of one scenario and seed (a GRPO group); each owns a database (its own session)."""

    world: str
    """The world's name."""
    scenario: str
    """The scenario id."""
    renderer: Renderer
    """The renderer of the policy's model (``tinker_cookbook.renderers.get_renderer``)."""
    group_size: int = 1
    """How many envs (rollouts) the group has."""
    seed: int = 0
    """The episodes' seed."""
    profile: str | None = "rl"
    """The reward profile (``rl_turns``: a reward at every turn)."""
    out: str | None = DEFAULT_OUT
    """Where the episodes are recorded (None: not recorded)."""
    agent: str = AGENT
    """The agent's name on the records."""
    agent_version: str = "unversioned"
    """The agent's version on the records (e.g. the sampler checkpoint)."""
    sessions: list[Session] = field(default_factory=list, repr=False)
    """The sessions of the envs made (closed by :meth:`cleanup`)."""

    async def make_envs(self) -> Sequence[Env]:
        world = _world(self.world)
        envs = []
        for _ in range(self.group_size):
            session = take(world, profile=self.profile, out=self.out, agent=self.agent,
                           agent_version=self.agent_version)
            self.sessions.append(session)
            envs.append(EnvFromMessageEnv(self.renderer, RehearsalMessageEnv(session, self.scenario, self.seed,
                                                                             self.renderer)))
        return envs

    async def cleanup(self) -> None:
        """End every episode still open (``give_up``, recorded); the sessions wait for the next group
        (:mod:`~rehearsal_env.integrations._idle`)."""
        sessions, self.sessions = self.sessions, []
        for session in sessions:
            await asyncio.to_thread(give, session)

    def logging_tags(self) -> list[str]:
        return ["rehearsal", self.world]


class RehearsalDataset(RLDataset):  # type: ignore[misc]
    """The scenarios of one split as batches of :class:`RehearsalEnvGroupBuilder` (``seeds`` per scenario).

    Args:
        world: The world's name.
        split: ``train``, ``dev`` or ``holdout`` (None: every scenario).
        renderer: The policy model's renderer.
        batch_size: Groups per batch.
        group_size: Envs per group.
        seeds: Seeds per scenario (``0 .. seeds-1``).
        options: ``profile``, ``out``, ``agent``, ``agent_version`` of every group.
    """

    def __init__(self, world: str, split: Split | None, renderer: Renderer, *, batch_size: int = 8,
                 group_size: int = 4, seeds: int = 1, **options: Any) -> None:
        if batch_size < 1 or group_size < 1 or seeds < 1:
            raise ValueError(f"batch_size, group_size and seeds must be at least 1, got {batch_size}, {group_size} "
                             f"and {seeds}")
        scenarios = load_world(world).scenarios(split)
        if not scenarios:
            raise ValueError(f"world {world!r} has no scenarios in split {split!r}")
        self.builders = [RehearsalEnvGroupBuilder(world, s.id, renderer, group_size=group_size, seed=seed, **options)
                         for s in scenarios for seed in range(seeds)]
        self.batch_size = batch_size

    def get_batch(self, index: int) -> Sequence[EnvGroupBuilder]:
        if not 0 <= index < len(self):
            raise IndexError(f"batch {index} of a dataset of {len(self)} batches")
        return self.builders[index * self.batch_size:(index + 1) * self.batch_size]

    def __len__(self) -> int:
        return -(-len(self.builders) // self.batch_size)
