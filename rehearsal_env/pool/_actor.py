"""The pool's actor: many sessions of one world in one process, databases opened once and reset per episode.

Each session holds one database of the actor's while its episode is open; a database given back is
reset and reused by the next session (the episodes floor's :class:`~rehearsal_env.episodes.DatabasePool`, the one
pool every host of episodes uses: a database is always handed out in the world's snapshot state, so a session
adopted from a checkpoint starts from the snapshot plus the checkpoint's own delta), so an actor opens at most as
many databases as it ever held sessions at once. After a reset and after every step that does not end the
episode the actor returns the env's checkpoint (:meth:`~rehearsal_env.RehearsalEnv.checkpoint`), which
the pool's driver keeps: if this actor dies, another one continues the session from it
(:meth:`SessionActor.adopt`). An episode that ends returns its record, made by the run's
:class:`~rehearsal_env.runner.RecordStamp` exactly as the runner makes it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from ..backends import Database
from ..env import RehearsalEnv, restore
from ..episodes import DatabasePool
from ..records import EpisodeRecord
from ..runner import EpisodeSpec, ResolvedRun, RunConfig, resolve

_KEEP_ALL = 1 << 30
"""The actor keeps every database it opened until it shuts down (its envs are cached per database)."""
GIVE_UP = json.dumps({"tool": "give_up", "args": {"reason": "the caller closed the session before it ended"}})
"""The action that ends a session its caller closes before the end (judged by its checks, as a served one)."""


@dataclass(frozen=True)
class Turn:
    """What a reset or a step of a session gives back to the pool's driver."""

    observation: str
    """The observation."""
    reward: float
    """The step's reward (0.0 after a reset)."""
    terminated: bool
    """The episode ended."""
    truncated: bool
    """The episode was cut at its turn limit."""
    info: dict[str, Any]
    """The env's info."""
    checkpoint: bytes | None
    """The env's checkpoint after this turn (None once the episode ended)."""
    record: EpisodeRecord | None
    """The episode's record once it ended (None before)."""


@dataclass
class _Live:
    env: RehearsalEnv
    db: Database
    spec: EpisodeSpec


class SessionActor:
    """The actor's body (``ray.remote`` wraps it when a pool starts); one per process, many sessions each."""

    def __init__(self, config: RunConfig) -> None:
        self.run: ResolvedRun = resolve(config)  # the world, its provenance and the record stamp, once
        self._databases = DatabasePool(config.backend, dict(config.backend_options), spare=_KEEP_ALL)
        self._envs: dict[tuple[int, str], RehearsalEnv] = {}
        self._live: dict[str, _Live] = {}

    def where(self) -> tuple[str, int]:
        """The Ray node id this actor runs on, and its process id."""
        import ray

        return ray.get_runtime_context().get_node_id(), os.getpid()

    def sessions(self) -> int:
        """Sessions open on this actor."""
        return len(self._live)

    def _database(self) -> Database:
        return self._databases.acquire(self.run.world)

    def _give_back(self, db: Database) -> None:
        self._databases.release(self.run.world, db)

    def _env(self, db: Database, scenario: str) -> RehearsalEnv:
        key = (id(db), scenario)
        env = self._envs.get(key)
        if env is None or env.db is not db:  # not yet, or made on a database closed since (its id reused)
            env = self._envs[key] = self.run.env(db, scenario)
        return env

    def reset(self, session: str, spec: EpisodeSpec) -> Turn:
        """Open ``session`` for the episode ``spec`` on a free database: its first observation and checkpoint."""
        db = self._database()
        env = self._env(db, spec.scenario)
        try:
            observation, info = env.reset(seed=spec.seed)
        except BaseException:
            self._give_back(db)
            raise
        self._live[session] = _Live(env, db, spec)
        return Turn(observation, 0.0, False, False, info, env.checkpoint(), None)

    def step(self, session: str, action: str) -> Turn:
        """One turn of ``session``; the record and a freed database when the episode ends."""
        live = self._live[session]
        observation, reward, terminated, truncated, info = live.env.step(action)
        if terminated or truncated:
            record = self.run.record(live.spec, live.env.episode)
            self._end(session)
            return Turn(observation, reward, terminated, truncated, info, None, record)
        return Turn(observation, reward, False, False, info, live.env.checkpoint(), None)

    def step_many(self, calls: list[tuple[str, str]]) -> list[Turn | BaseException]:
        """:meth:`step` for each ``(session, action)`` in order; a call that raises gives its exception."""
        out: list[Turn | BaseException] = []
        for session, action in calls:
            try:
                out.append(self.step(session, action))
            except Exception as exc:  # handed back to that call's caller alone
                out.append(exc)
        return out

    def adopt(self, session: str, spec: EpisodeSpec, checkpoint: bytes) -> None:
        """Take over ``session`` from a dead actor: its episode restored from ``checkpoint`` (the same episode,
        continued) on a database of this actor's."""
        db = self._database()
        try:
            config = self.run.config
            env = restore(checkpoint, world=self.run.world, backend=config.backend, resume=True, database=db,
                          customer=self.run.customer(self.run.world.scenario(spec.scenario)),
                          **config.backend_options)
        except BaseException:
            self._give_back(db)
            raise
        self._live[session] = _Live(env, db, spec)

    def close(self, session: str) -> Turn | None:
        """End ``session``: an open episode is ended for its agent (``give_up``, judged) and its record
        returned; an unknown or ended session gives None."""
        if session not in self._live:
            return None
        return self.step(session, GIVE_UP)

    def _end(self, session: str) -> None:
        live = self._live.pop(session)
        if self._envs.get((id(live.db), live.spec.scenario)) is not live.env:
            live.env.close()  # a restored env of its own; the database stays ours
        self._give_back(live.db)

    def shutdown(self) -> None:
        """Close every database (the actor is about to go)."""
        for session in list(self._live):
            self._end(session)
        self._envs.clear()
        self._databases.close()
