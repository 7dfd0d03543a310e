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
:class:`~rehearsal_env.agents.ProfileError` stops the run; any other exception
of the agent is its own bug, a rejected attempt that takes a turn. An episode
not scored because its database failed makes that slot reopen its database
(once; if that fails, the run stops with the error, as it does serially).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from ..agents import AsyncOpenAIAgent, ModelAgents, ProfileError
from ..backends import Database, DatabaseError, open_database
from ..env import RehearsalEnv
from ..records import EpisodeRecord
from ..verdict import NotScoredCause, NotScoredError
from ..worlds import World
from ._plan import EpisodeSpec, RunConfig

T = TypeVar("T")
RecordOf = Callable[[EpisodeSpec, RehearsalEnv, Any], EpisodeRecord]
"""Makes the record of a finished episode: (spec, env, agent) -> record."""
LostOf = Callable[[EpisodeSpec, BaseException], EpisodeRecord]
"""Makes the not-scored record of an episode that could not start (its database, or another part, failed)."""
EnvOf = Callable[[Database, str], RehearsalEnv]
"""Makes the env of a scenario id on a slot's database."""


class _Slot:
    """One episode at a time: a database, its envs and the thread they run on."""

    def __init__(self, config: RunConfig, world: World, env_of: EnvOf) -> None:
        self.thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="episode-slot")
        self._open = lambda: open_database(world, config.backend, **config.backend_options)
        self.db: Database = self.thread.submit(self._open).result()
        self._env_of = env_of
        self._envs: dict[str, RehearsalEnv] = {}

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
            env = self._envs[scenario_id] = self._env_of(self.db, scenario_id)
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
    """Plays batches with up to ``concurrency`` episodes in flight (see the module docstring).

    Args:
        config: The run's config.
        world: The run's world.
        agents: The model agent factory.
        env_of: Makes an env of a scenario on a slot's database.
        record_of: Makes the record of a finished episode.
        lost_of: Makes the record of an episode that could not start.
    """

    def __init__(self, config: RunConfig, world: World, agents: ModelAgents, *, env_of: EnvOf,
                 record_of: RecordOf, lost_of: LostOf) -> None:
        if config.concurrency < 1:
            raise ValueError(f"expected concurrency >= 1, got {config.concurrency}")
        self.config, self.world, self.agents = config, world, agents
        self._record_of = record_of
        self._lost_of = lost_of
        self._slots = [_Slot(config, world, env_of) for _ in range(config.concurrency)]

    def play_batch(self, specs: Sequence[EpisodeSpec]) -> list[EpisodeRecord]:
        """Every episode of ``specs``, as records in that order."""
        return asyncio.run(self._play_all(list(specs)))

    async def _play_all(self, specs: list[EpisodeSpec]) -> list[EpisodeRecord]:
        client = self.agents.endpoint.async_client()  # one per loop: an async client belongs to its loop
        records: list[EpisodeRecord | None] = [None] * len(specs)
        queue: asyncio.Queue[int] = asyncio.Queue()
        for i in range(len(specs)):
            queue.put_nowait(i)

        async def drain(slot: _Slot) -> None:
            while not queue.empty():
                i = queue.get_nowait()
                record = records[i] = await self._play(slot, specs[i], client)
                if record.not_scored_cause == NotScoredCause.DATABASE.value:
                    await slot.run(slot.reopen)  # the next episode gets a working database, as serially

        try:
            await asyncio.gather(*(drain(slot) for slot in self._slots[:max(1, len(specs))]))
        finally:
            await client.close()
        return [r for r in records if r is not None]

    async def _play(self, slot: _Slot, spec: EpisodeSpec, client: Any) -> EpisodeRecord:
        env = await slot.run(slot.env, spec.scenario)
        agent: AsyncOpenAIAgent = self.agents.async_agent(env.scenario, client)
        try:
            observation, info = await slot.run(lambda: env.reset(seed=spec.seed))
        except (DatabaseError, NotScoredError) as exc:
            return self._lost_of(spec, exc)
        while True:
            try:
                action = await agent.act(observation, info)
            except ProfileError:
                raise
            except NotScoredError as exc:
                step = await slot.run(env.abort, exc.cause, f"{exc.cause.value} failed: {exc}")
            except Exception as exc:  # the agent's own bug: a rejected attempt that takes a turn
                step = await slot.run(env.policy_failed, exc)
            else:
                step = await slot.run(env.step, action)
            observation, _, terminated, truncated, info = step
            if terminated or truncated:
                break
        return await slot.run(self._record_of, spec, env, agent)

    def close(self) -> None:
        for slot in self._slots:
            slot.close()
