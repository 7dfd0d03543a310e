"""Many episodes in flight in one worker: ``--concurrency N`` for a model agent.

A model call takes hundreds of milliseconds; an env step takes well under one.
So a worker with a model agent keeps up to N episodes going at once: one asyncio
loop drives N :class:`~rehearsal_env.agents.AsyncOpenAIAgent` episodes over one
:class:`openai.AsyncOpenAI` client, and while one waits for its model the
others step. Each of the N *slots* has its own database (an env resets its
database, so two episodes never share one) and its own thread: every reset,
step and record of a slot runs on that thread, so the loop never blocks on the
database, and a model-played customer (a synchronous call inside ``env.step``)
waits on its slot's thread, not on the loop.

Records are the same as a serial run's, in the batch's order. A policy that
raises :class:`~rehearsal_env.verdict.NotScoredError` (the model provider failed
after its retries) ends its episode not scored with that cause;
:class:`~rehearsal_env.agents.ProviderRefused` stops the run; any other exception
of the agent is its own bug, a rejected attempt that takes a turn. An episode
not scored because its database failed makes that slot reopen its database
(once; if that fails, the run stops with the error, as it does serially).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from ..agents import AsyncOpenAIAgent, ModelAgents
from ..backends import Database, DatabaseError, open_database
from ..env import RehearsalEnv, failure
from ..records import EpisodeRecord
from ..verdict import NotScoredCause, NotScoredError
from ._plan import EpisodeSpec
from ._play import Answer, EpisodeResult, advance, episode_turns
from ._resolved import ResolvedRun

T = TypeVar("T")


class _Slot:
    """One episode at a time: a database, its envs and the thread they run on."""

    def __init__(self, run: ResolvedRun) -> None:
        self.thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="episode-slot")
        self._run = run
        self.db: Database = self.thread.submit(self._open).result()
        self._envs: dict[str, RehearsalEnv] = {}

    def _open(self) -> Database:
        return open_database(self._run.world, self._run.config.backend, **self._run.config.backend_options)

    def reopen(self) -> None:
        """Close a failed database and open a new one (on the slot's thread; raises when it cannot)."""
        self._envs.clear()
        try:
            self.db.close()
        except (DatabaseError, NotScoredError, OSError):
            pass
        self.db = self._open()

    def env(self, scenario_id: str) -> RehearsalEnv:
        env = self._envs.get(scenario_id)
        if env is None:
            env = self._envs[scenario_id] = self._run.env(self.db, scenario_id)
        return env

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.thread, fn, *args)

    def close(self) -> None:
        self._envs.clear()
        try:
            self.thread.submit(self.db.close).result()
        except DatabaseError:
            pass
        self.thread.shutdown(wait=True)


class InFlight:
    """Plays batches of a resolved run with up to ``concurrency`` episodes in flight (see the module docstring).

    Args:
        run: The run, resolved; its agent must be a model (``run.model_agents``).
    """

    def __init__(self, run: ResolvedRun) -> None:
        if run.config.concurrency < 1:
            raise ValueError(f"expected concurrency >= 1, got {run.config.concurrency}")
        if run.model_agents is None:
            raise ValueError(f"episodes in flight need a model agent, got agent {run.config.agent!r}")
        self.run = run
        self.agents: ModelAgents = run.model_agents
        self._slots = [_Slot(run) for _ in range(run.config.concurrency)]

    def play_batch(self, specs: Sequence[EpisodeSpec],
                   on_record: Callable[[EpisodeRecord], None] | None = None) -> list[EpisodeRecord]:
        """Every episode of ``specs``, as records in that order; ``on_record`` is given each record as its
        episode ends."""
        return asyncio.run(self._play_all(list(specs), on_record))

    async def _play_all(self, specs: list[EpisodeSpec],
                        on_record: Callable[[EpisodeRecord], None] | None = None) -> list[EpisodeRecord]:
        client = self.agents.endpoint.async_client()  # one per loop: an async client belongs to its loop
        records: list[EpisodeRecord | None] = [None] * len(specs)
        queue: asyncio.Queue[int] = asyncio.Queue()
        for i in range(len(specs)):
            queue.put_nowait(i)

        async def drain(slot: _Slot) -> None:
            while not queue.empty():
                i = queue.get_nowait()
                record = records[i] = await self._play(slot, specs[i], client)
                if on_record is not None:
                    on_record(record)
                if record.not_scored_cause in (NotScoredCause.DATABASE.value, NotScoredCause.SANDBOX.value):
                    await slot.run(slot.reopen)  # the next episode gets a working database, as serially

        try:
            await asyncio.gather(*(drain(slot) for slot in self._slots[:max(1, len(specs))]))
        finally:
            await client.close()
        return [r for r in records if r is not None]

    async def _play(self, slot: _Slot, spec: EpisodeSpec, client: Any) -> EpisodeRecord:
        """One episode: the loop body of :func:`~._play.episode_turns`, each turn on the slot's thread."""
        env = await slot.run(slot.env, spec.scenario)
        agent: AsyncOpenAIAgent = self.agents.async_agent(env.scenario, client)
        turns = episode_turns(env, spec.seed)
        try:
            observation, info = await slot.run(next, turns)
        except (DatabaseError, NotScoredError) as exc:
            cause, reason = failure(exc)
            return self.run.lost(spec, f"the episode could not start: {reason}", cause)
        while True:
            answer: Answer
            try:
                answer = await agent.act(observation, info)
            except Exception as exc:  # judged by take_turn, as serially
                answer = exc
            turn = await slot.run(advance, turns, answer)
            if isinstance(turn, EpisodeResult):
                return await slot.run(self.run.record, spec, turn.episode, agent)
            observation, info = turn

    def close(self) -> None:
        for slot in self._slots:
            slot.close()
