"""The session table: one live episode per session, each with its own database state.

Every method here does database work and is called off the event loop (a worker thread); a
session's lock makes its steps strictly sequential. ``step_index`` makes a step idempotent:
the response of every step taken is kept, so a retried index gets the same response and the
action is never applied twice; any other index is a :class:`StepConflict` naming the expected
one. Ended sessions free their database at once and leave a small tombstone (their final
state) so a late retry or ``GET`` still answers. Session ids are 128 random bits and never
reused.
"""

from __future__ import annotations

import contextlib
import json
import math
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from ..backends import Database, DatabaseError, open_database
from ..env import RehearsalEnv, parse_action
from ..provenance import provenance_of
from ..records import not_played_record, record_episode
from ..rewards import EXTERNAL_MODE
from ..scenarios import Scenario
from ..verdict import NotScoredCause, Verdict
from ..worlds import World
from ._keys import Scope
from ._recorder import Recorder, RunDir

GIVE_UP = "give_up"
TOMBSTONES = 10_000
"""Ended sessions remembered (their final state) for late retries and reads."""


class SessionError(Exception):
    """A request the session table refuses; ``status`` is the HTTP status to answer with."""

    status = 400

    def __init__(self, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.extra = extra


class NotFound(SessionError):
    status = 404


class Forbidden(SessionError):
    status = 403


class StepConflict(SessionError):
    status = 409


class AtCapacity(SessionError):
    status = 429


class EnvironmentFailed(SessionError):
    status = 503


@dataclass(frozen=True)
class Principal:
    """Who sends a request: a key's id and scope (``local`` without keys)."""

    key_id: str
    """The key's id; the owner of the episodes it starts."""
    scope: Scope
    """What it may do."""


@dataclass
class Session:
    """One episode over the API."""

    id: str
    owner: str
    world: World
    scenario: Scenario
    seed: int
    profile: str | None
    agent: str
    agent_version: str
    env: RehearsalEnv | None
    db: Database | None
    run_dir: RunDir | None
    last_used: float
    lock: threading.Lock = field(default_factory=threading.Lock)
    opening: str = ""
    """The first observation (answered again to a retried create)."""
    steps: int = 0
    """Steps taken; the next step's index."""
    last_response: dict[str, Any] | None = None
    """The last step's response body (answered again to a retry of that step)."""
    tokens_reported: bool = False
    verdict: Verdict | None = None
    reward: float | None = None
    reward_detail: dict[str, Any] | None = None
    ended_by: str | None = None

    @property
    def caveats(self) -> list[str]:
        """The external-mode caveat, until the agent reports tokens."""
        return [] if self.tokens_reported else [EXTERNAL_MODE]


def verdict_view(verdict: Verdict | None, reward: float | None, scope: Scope, split: str) -> dict[str, Any] | None:
    """The verdict as ``scope`` may read it: check results only for build-and-evaluate, never for holdout."""
    if verdict is None:
        return None
    body = verdict.to_dict()
    body["reward"] = reward
    if scope is not Scope.BUILD_AND_EVALUATE or split == "holdout":
        body.pop("checks")
    return body


class SessionTable:
    """Live sessions, their databases (pooled per world), reaping and recording."""

    def __init__(self, *, backend: str = "sqlite", backend_options: dict[str, Any] | None = None,
                 stress: bool = True, max_sessions: int = 1000, idle_timeout: float = 300.0,
                 recorder: Recorder | None = None, spare_databases: int | None = None) -> None:
        if max_sessions < 1 or idle_timeout <= 0:
            raise ValueError(f"expected max_sessions >= 1 and idle_timeout > 0, got {max_sessions} and {idle_timeout}")
        self.backend, self.backend_options, self.stress = backend, dict(backend_options or {}), stress
        self.max_sessions, self.idle_timeout, self.recorder = max_sessions, idle_timeout, recorder
        # An idle SQLite database is a full copy of the world in memory: keep few spare. A PostgreSQL
        # database lives in the server and costs a template clone to make: keep them all.
        self.spare = spare_databases if spare_databases is not None else (8 if backend == "sqlite" else max_sessions)
        self._live: dict[str, Session] = {}
        self._ended: OrderedDict[str, Session] = OrderedDict()
        self._requests: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._reserved = 0
        self._pool: dict[int, list[Database]] = {}
        self._lock = threading.Lock()
        self._opening = threading.Lock()
        self.started = 0
        self.reaped = 0

    # -- capacity ------------------------------------------------------------
    @property
    def live(self) -> int:
        return len(self._live)

    def retry_after(self) -> int:
        """Seconds until the first live session could be reaped (at least 1)."""
        with self._lock:
            oldest = min((s.last_used for s in self._live.values()), default=time.monotonic())
        return max(1, math.ceil(oldest + self.idle_timeout - time.monotonic()))

    def _acquire(self, world: World) -> Database:
        with self._lock:
            spare = self._pool.get(id(world))
            if spare:
                return spare.pop()
        with self._opening:  # one database opened at a time (PostgreSQL: the first builds the world's template)
            return open_database(world, self.backend, **self.backend_options)

    def _release(self, world: World, db: Database) -> None:
        with self._lock:
            spare = self._pool.setdefault(id(world), [])
            if len(spare) < self.spare:
                spare.append(db)
                return
        try:
            db.close()
        except DatabaseError:
            pass

    def warm(self, world: World) -> None:
        """Open one database of ``world`` and keep it spare (the snapshot or template is built now, not at the
        first episode)."""
        self._release(world, self._acquire(world))

    # -- lifecycle -------------------------------------------------------------
    def create(self, who: Principal, world: World, scenario: Scenario, *, seed: int, profile: str | None,
               agent: str, agent_version: str, request_id: str | None = None) -> Session:
        """Start an episode (a retried ``request_id`` gets the session it started); ``opening`` is its first
        observation.

        Raises:
            AtCapacity: ``max_sessions`` are live (``retry_after`` says when one may free).
            EnvironmentFailed: the database could not be opened or reset.
        """
        with self._lock:
            if request_id is not None and (who.key_id, request_id) in self._requests:
                known = self._requests[(who.key_id, request_id)]
                session = self._live.get(known) or self._ended.get(known)
                if session is not None:
                    return session
            if len(self._live) + self._reserved >= self.max_sessions:
                raise AtCapacity(f"expected a free session; all {self.max_sessions} are in use. Retry later, "
                                 f"or end finished episodes with DELETE /v1/episodes/ID")
            self._reserved += 1
        try:
            try:
                db = self._acquire(world)
            except DatabaseError as exc:
                self._not_played(world, scenario, seed, profile, agent, agent_version, f"no database: {exc}")
                raise EnvironmentFailed(f"the environment failed to open a database: {exc}") from exc
            try:
                env = RehearsalEnv(scenario, world, database=db, stress=self.stress, profile=profile)
                observation, _ = env.reset(seed=seed)
            except DatabaseError as exc:
                with contextlib.suppress(DatabaseError):
                    db.close()
                self._not_played(world, scenario, seed, profile, agent, agent_version, f"the reset failed: {exc}")
                raise EnvironmentFailed(f"the environment failed to reset the database: {exc}") from exc
            run_dir = self.recorder.run_dir(world.name, env.provenance()) if self.recorder else None
            session = Session(id=f"ep_{secrets.token_hex(16)}", owner=who.key_id, world=world, scenario=scenario,
                              seed=seed, profile=profile, agent=agent, agent_version=agent_version, env=env,
                              db=db, run_dir=run_dir, last_used=time.monotonic(), opening=observation)
            with self._lock:
                self._live[session.id] = session
                self.started += 1
                if request_id is not None:
                    self._requests[(who.key_id, request_id)] = session.id
                    while len(self._requests) > TOMBSTONES:
                        self._requests.popitem(last=False)
            return session
        finally:
            with self._lock:
                self._reserved -= 1

    def get(self, who: Principal, episode_id: str, *, play: bool = False) -> Session:
        """The session ``episode_id`` if ``who`` may read it (``play``: act on it).

        Raises:
            NotFound: no such session (never issued, or forgotten long after it ended).
            Forbidden: another key's episode (reading it needs build-and-evaluate; playing it, being its owner).
        """
        with self._lock:
            session = self._live.get(episode_id) or self._ended.get(episode_id)
        if session is None:
            raise NotFound(f"no episode {episode_id!r} on this server process; start one with POST /v1/episodes "
                           f"(with --workers N, send every request of an episode to the process that started it)")
        if session.owner != who.key_id and (play or who.scope is not Scope.BUILD_AND_EVALUATE):
            raise Forbidden(f"episode {episode_id!r} belongs to another key; "
                            + ("only its owner may play or end it" if play else
                               "reading other keys' episodes needs a build-and-evaluate key"))
        session.last_used = time.monotonic()
        return session

    def step(self, session: Session, step_index: int, action: str) -> dict[str, Any]:
        """Apply ``action`` as step ``step_index`` once; a retried index returns the stored response."""
        with session.lock:
            session.last_used = time.monotonic()
            if step_index == session.steps - 1 and session.last_response is not None:
                return session.last_response  # a retry: the same response, nothing applied again
            if session.env is None:
                raise StepConflict(f"episode {session.id} has ended ({session.ended_by}) after {session.steps} "
                                   f"steps; step {step_index} cannot be taken. Start a new episode",
                                   expected_step_index=None)
            if step_index != session.steps:
                raise StepConflict(f"expected step_index {session.steps}, got {step_index}; send the next step "
                                   f"with the step_index the last response gave (only the last step can be "
                                   f"retried)", expected_step_index=session.steps)
            env = session.env
            observation, reward, terminated, truncated, info = env.step(action)
            if not session.tokens_reported and info["status"] != "rejected":  # not rejected: it parsed
                session.tokens_reported = parse_action(action).tokens is not None
            body: dict[str, Any] = {"observation": observation, "reward": reward, "terminated": terminated,
                                    "truncated": truncated, "status": info["status"], "turn": info["turn"],
                                    "step_index": step_index + 1, "verdict": None, "reward_detail": None}
            if terminated or truncated:
                self._finish(session, "agent", reward, info)
                body["reward_detail"] = session.reward_detail
            body["caveats"] = session.caveats
            session.steps, session.last_response = step_index + 1, body
            session.last_used = time.monotonic()
            return body

    def end(self, session: Session, by: str = "delete") -> Session:
        """End an active session as ``gave_up`` (its checks still decide), record it, free its database."""
        with session.lock:
            if session.env is not None:
                reason = {"delete": "the client ended the episode (DELETE) before it ended",
                          "idle_timeout": f"the client sent nothing for {self.idle_timeout:g} s; the server "
                                          f"ended the episode"}[by]
                env = session.env
                _, reward, _, _, info = env.step(json.dumps({"tool": GIVE_UP, "args": {"reason": reason}}))
                self._finish(session, by, reward, info)
        return session

    def reap(self, now: float | None = None) -> int:
        """End every session idle past the timeout (skipping one busy with a request); return how many."""
        now = time.monotonic() if now is None else now
        with self._lock:
            idle = [s for s in self._live.values() if now - s.last_used > self.idle_timeout]
        count = 0
        for session in idle:
            if session.lock.acquire(blocking=False):
                session.lock.release()
                if session.env is not None and time.monotonic() - session.last_used > self.idle_timeout:
                    self.end(session, "idle_timeout")
                    count += 1
        self.reaped += count
        return count

    def close(self) -> None:
        """End every live session as not scored (the server stops: the environment, not the agent), record them,
        and close every database."""
        with self._lock:
            live = list(self._live.values())
        for session in live:
            with session.lock:
                if session.env is not None:
                    self._abandon(session)
        with self._lock:
            pools, self._pool = self._pool, {}
        for spare in pools.values():
            for db in spare:
                try:
                    db.close()
                except DatabaseError:
                    pass

    # -- ending ---------------------------------------------------------------
    def _finish(self, session: Session, by: str, reward: float, info: dict[str, Any]) -> None:
        """Record the ended episode, return its database to the pool, keep its tombstone (holding the lock)."""
        env = session.env
        assert env is not None
        session.verdict = info["verdict"]
        session.reward = reward if session.verdict is not None and session.verdict.outcome_reward is not None else None
        session.reward_detail = info.get("reward_detail")
        session.ended_by = by
        if self.recorder is not None and session.run_dir is not None:
            record = record_episode(env.episode, run_id=session.run_dir.run_id, agent=session.agent,
                                    agent_version=session.agent_version, repeat=0, seed=session.seed,
                                    backend=self.backend, stress=self.stress, provenance=session.run_dir.provenance)
            self.recorder.add(session.run_dir, record)
        self._free(session)

    def _abandon(self, session: Session) -> None:
        session.ended_by = "server_shutdown"
        if self.recorder is not None and session.run_dir is not None:
            self.recorder.add(session.run_dir, not_played_record(
                session.scenario, run_id=session.run_dir.run_id, agent=session.agent,
                agent_version=session.agent_version, repeat=0, seed=session.seed, backend=self.backend,
                stress=self.stress, provenance=session.run_dir.provenance,
                reason="the server stopped before the episode ended"))
        self._free(session)

    def _not_played(self, world: World, scenario: Scenario, seed: int, profile: str | None, agent: str,
                    agent_version: str, reason: str) -> None:
        """Record an episode whose database could not be had: not scored, the database's failure."""
        if self.recorder is None:
            return
        run_dir = self.recorder.run_dir(world.name, provenance_of(world, profile))
        self.recorder.add(run_dir, not_played_record(
            scenario, run_id=run_dir.run_id, agent=agent, agent_version=agent_version, repeat=0, seed=seed,
            backend=self.backend, stress=self.stress, provenance=run_dir.provenance,
            reason=f"the environment failed before the first turn: {reason}", cause=NotScoredCause.DATABASE))

    def _free(self, session: Session) -> None:
        env, db = session.env, session.db
        session.env, session.db = None, None
        if env is not None:
            env.close()
        if db is not None:
            self._release(session.world, db)
        with self._lock:
            self._live.pop(session.id, None)
            self._ended[session.id] = session
            while len(self._ended) > TOMBSTONES:
                self._ended.popitem(last=False)
