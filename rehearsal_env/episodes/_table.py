"""The session table: one live episode per session, each with its own database state.

Every method does database work off the event loop; a session's lock makes its steps strictly
sequential. ``step_index`` makes a step idempotent: a retried index gets the stored response and
the action is never applied twice; any other index is a :class:`StepConflict` naming the
expected one. Ended sessions free their database at once and leave a tombstone (their final
state) for a late retry or ``GET``. Session ids are 128 random bits, never reused. A key holds
at most ``per_key`` live sessions; the idle timer runs from a session's last step (reads do not
keep it alive). Every open episode is ended the same way, by its agent's ``give_up`` and judged:
on ``DELETE``, on the idle timer and when the server stops, so parking an episode gains nothing.
"""

from __future__ import annotations

import contextlib
import json
import math
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Protocol

from ..backends import Database, DatabaseError
from ..env import RehearsalEnv, reported_tokens
from ..provenance import provenance_of
from ..runner import take_turn
from ..scenarios import Scenario
from ..verdict import NotScoredCause
from ..worlds import World
from ._checkpoints import CheckpointSeal
from ._keys import Scope
from ._places import Places
from ._pool import DatabasePool
from ._recorder import Recorder
from ._session import EnvironmentFailed, Forbidden, NotFound, Principal, Session, StepConflict
from ._view import detail_view, end_reward, step_reward_view

GIVE_UP = "give_up"
TOMBSTONES = 10_000
"""Ended sessions remembered (their final state) for late retries and reads."""
ENDINGS = {
    "delete": "the client ended the episode (DELETE) before it ended",
    "idle_timeout": "the client sent no step for {idle:g} s; the server ended the episode",
    "server_shutdown": "the server stopped while the episode was open; an open episode counts as given up",
    "replaced": "the trainer started another episode on this environment before this one ended",
    "process_exit": "the trainer's process ended while the episode was open; an open episode counts as given up",
    "closed": "the trainer closed its environment while the episode was open; an open episode counts as given up",
}
"""Why an open episode was ended for its agent (the ``give_up`` reason in its trace), by ``ended_by``."""


class Journal(Protocol):
    """What a ``--workers N`` worker journals of its open episodes (so another can record them if it dies)."""

    def opened(self, session: Session) -> None: ...

    def ended(self, session: Session) -> None: ...


class SessionTable:
    """Live sessions, their databases (pooled per world), quotas, reaping and recording."""

    def __init__(self, *, backend: str = "sqlite", backend_options: dict[str, Any] | None = None,
                 stress: bool = True, max_sessions: int = 1000, idle_timeout: float = 300.0,
                 recorder: Recorder | None = None, spare_databases: int | None = None,
                 per_key: int | None = None, seal: CheckpointSeal | None = None) -> None:
        if max_sessions < 1 or idle_timeout <= 0 or (per_key is not None and per_key < 1):
            raise ValueError(f"expected max_sessions >= 1, per_key >= 1 and idle_timeout > 0, got {max_sessions}, "
                             f"{per_key} and {idle_timeout}")
        self.backend, self.stress = backend, stress
        self.max_sessions, self.idle_timeout, self.recorder = max_sessions, idle_timeout, recorder
        self.per_key = per_key or max_sessions
        spare = spare_databases if spare_databases is not None else (8 if backend == "sqlite" else max_sessions)
        self.pool = DatabasePool(backend, dict(backend_options or {}), spare)
        self._live: dict[str, Session] = {}
        self._ended: OrderedDict[str, Session] = OrderedDict()
        self._requests: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._places = Places(max_sessions, self.per_key)  # live sessions and those being opened
        self._lock = threading.Lock()
        self.started = 0
        self.reaped = 0
        self.new_id: Callable[[], str] = lambda: f"ep_{secrets.token_hex(16)}"  # ids naming their owner: _ids
        self.journal: Journal | None = None  # what a --workers N worker journals of its open episodes
        self.seal = seal or CheckpointSeal()
        """Wraps the checkpoints this table hands out; a restore opens only what it wrapped."""

    @property
    def live(self) -> int:
        return len(self._live)

    def retry_after(self, key_id: str | None = None) -> int:
        """Seconds until the first live session (of ``key_id``) could be reaped (at least 1; call holding the
        table's lock)."""
        steps = [s.last_step for s in self._live.values() if key_id is None or s.owner == key_id]
        oldest = min(steps, default=time.monotonic())
        return max(1, math.ceil(oldest + self.idle_timeout - time.monotonic()))

    def _unreserve(self, key_id: str) -> None:
        with self._lock:
            self._places.give(key_id)

    def create(self, who: Principal, world: World, scenario: Scenario, *, seed: int, profile: str | None,
               agent: str, agent_version: str, request_id: str | None = None) -> Session:
        """Start an episode (a retried ``request_id`` gets the session it started); ``opening`` is its first
        observation.

        Raises:
            AtCapacity: ``max_sessions`` are live, or this key holds its ``per_key`` (``retry_after`` says when
                one may free).
            EnvironmentFailed: the database could not be opened or reset (recorded not scored, cause database).
        """
        with self._lock:
            if request_id is not None and (who.key_id, request_id) in self._requests:
                known = self._requests[(who.key_id, request_id)]
                session = self._live.get(known) or self._ended.get(known)
                if session is not None:
                    return session
            self._places.take(who.key_id, self.retry_after)

        def reset(db: Database) -> tuple[RehearsalEnv, str, dict[str, Any]]:
            env = RehearsalEnv(scenario, world, database=db, stress=self.stress, reward_profile=profile)
            return env, *env.reset(seed=seed)

        def failed(reason: str) -> None:
            self._not_played(who, world, scenario, seed, profile, agent, agent_version, reason)

        session = self._admit(who, reset, failed, world=world, scenario=scenario, seed=seed, profile=profile,
                              agent=agent, agent_version=agent_version)
        if request_id is not None:
            with self._lock:
                self._requests[(who.key_id, request_id)] = session.id
                while len(self._requests) > TOMBSTONES:
                    self._requests.popitem(last=False)
        return session

    def branch(self, who: Principal, parent: Session | None, make: Callable[[Database], RehearsalEnv], *,
               world: World, scenario: Scenario, seed: int, profile: str | None, agent: str, agent_version: str,
               steps: int = 0) -> Session:
        """A new live session of ``who`` (one of its key's places) whose env ``make`` builds on a database of
        the pool: a fork of ``parent``'s episode, or a restored checkpoint (``parent`` None).

        Raises:
            AtCapacity: no free place (see :meth:`create`).
            EnvironmentFailed: no database could be had.
        """
        with self._lock:
            self._places.take(who.key_id, self.retry_after)

        def build(db: Database) -> tuple[RehearsalEnv, str, dict[str, Any]]:
            with parent.lock if parent is not None else contextlib.nullcontext():
                return make(db), "", {}

        session = self._admit(who, build, None, world=world, scenario=scenario, seed=seed, profile=profile,
                              agent=agent, agent_version=agent_version, steps=steps)
        assert session.env is not None
        session.env.episode.id = session.id
        return session

    def _admit(self, who: Principal, build: Callable[[Database], tuple[RehearsalEnv, str, dict[str, Any]]],
               failed: Callable[[str], None] | None, *, world: World, scenario: Scenario, seed: int,
               profile: str | None, agent: str, agent_version: str, steps: int = 0) -> Session:
        """A session on a database of the pool, its env made by ``build`` (the env, its first observation and the
        reset's ``info``), in
        the place :meth:`_reserve` held for ``who`` (freed if anything fails; ``failed(reason)`` records why)."""
        created = False
        try:
            try:
                db = self.pool.acquire(world)
            except DatabaseError as exc:
                if failed is not None:
                    failed(f"no database: {exc}")
                raise EnvironmentFailed(f"the environment failed to open a database: {exc}") from exc
            try:
                env, opening, info = build(db)
            except DatabaseError as exc:
                with contextlib.suppress(DatabaseError):
                    db.close()
                if failed is not None:
                    failed(f"the reset failed: {exc}")
                raise EnvironmentFailed(f"the environment failed to reset the database: {exc}") from exc
            except BaseException:
                self.pool.release(world, db)
                raise
            try:  # a run directory or journal entry that cannot be written gives the database back
                run_dir = self.recorder.run_dir(world.name, env.provenance()) if self.recorder else None
                session = Session(id=self.new_id(), owner=who.key_id, world=world, scenario=scenario,
                                  seed=seed, profile=profile, agent=agent, agent_version=agent_version, env=env,
                                  db=db, run_dir=run_dir, last_step=time.monotonic(), opening=opening, steps=steps,
                                  opening_info=info)
                env.episode.id = session.id  # its record carries the id the client knows
                if self.journal is not None:
                    self.journal.opened(session)
            except BaseException:
                self.pool.release(world, db)
                raise
            with self._lock:
                self._live[session.id] = session
                self.started += 1
                created = True
            return session
        finally:
            if not created:
                self._unreserve(who.key_id)

    def get(self, who: Principal, episode_id: str, *, play: bool = False) -> Session:
        """The session ``episode_id`` if ``who`` may read it (``play``: act on it). Reading never resets the
        idle timer.

        Raises:
            NotFound: no such session (never issued, or forgotten long after it ended).
            Forbidden: another key's episode (reading it needs build-and-evaluate; playing it, being its owner).
        """
        with self._lock:
            session = self._live.get(episode_id) or self._ended.get(episode_id)
        if session is None:
            raise NotFound(f"no episode {episode_id[:80]!r} on this server; start one with POST /v1/episodes")
        if session.owner != who.key_id and (play or who.scope is not Scope.BUILD_AND_EVALUATE):
            raise Forbidden(f"episode {episode_id!r} belongs to another key; "
                            + ("only its owner may play or end it" if play else
                               "reading other keys' episodes needs a build-and-evaluate key"))
        return session

    def step(self, session: Session, step_index: int, action: str) -> dict[str, Any]:
        """Apply ``action`` as step ``step_index`` once; a retried index returns the stored response."""
        with session.lock:
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
            session.last_step = time.monotonic()
            observation, reward, terminated, truncated, info = take_turn(session.env, action)  # the runners' turn
            reward = step_reward_view(reward, info, session.scenario.split)
            if not session.tokens_reported and info["status"] != "rejected":  # not rejected: it parsed
                session.tokens_reported = reported_tokens(action) is not None
            body: dict[str, Any] = {"observation": observation, "reward": reward, "terminated": terminated,
                                    "truncated": truncated, "status": info["status"], "turn": info["turn"],
                                    "step_index": step_index + 1, "verdict": None, "reward_detail": None}
            if terminated or truncated:
                self._finish(session, "agent", reward, info)
                body["reward_detail"] = detail_view(session.reward_detail, session.scenario.split)
            body["caveats"] = session.caveats
            session.steps, session.last_response = step_index + 1, body
            session.last_step = time.monotonic()
            return body

    def end(self, session: Session, by: str = "delete") -> Session:
        """End an open session for its agent (``give_up``; its checks still decide), record it, free it."""
        with session.lock:
            if session.env is not None:
                reason = ENDINGS[by].format(idle=self.idle_timeout)
                _, reward, _, _, info = session.env.step(json.dumps({"tool": GIVE_UP, "args": {"reason": reason}}))
                self._finish(session, by, reward, info)
        return session

    def abort(self, session: Session, cause: NotScoredCause, reason: str) -> Session:
        """End an open session not scored because ``cause`` (a part no agent input can fail) failed; record it."""
        with session.lock:
            if session.env is not None:
                _, reward, _, _, info = session.env.abort(cause, reason)
                self._finish(session, cause.value, reward, info)
        return session

    def reap(self, now: float | None = None) -> int:
        """End every session with no step for the idle timeout (skipping one busy stepping); return how many."""
        now = time.monotonic() if now is None else now
        with self._lock:
            idle = [s for s in self._live.values() if now - s.last_step > self.idle_timeout]
        count = 0
        for session in idle:
            if session.lock.acquire(blocking=False):
                session.lock.release()
                if session.env is not None and time.monotonic() - session.last_step > self.idle_timeout:
                    self.end(session, "idle_timeout")
                    count += 1
        self.reaped += count
        return count

    def close(self) -> None:
        """The server stops: end every open session as given up and judged (like DELETE and the idle timer,
        whether or not its agent acted: leaving an episode open never keeps it out), record them, and close
        every database."""
        with self._lock:
            live = list(self._live.values())
        for session in live:
            self.end(session, "server_shutdown")
        self.pool.close()

    # -- ending ---------------------------------------------------------------
    def _finish(self, session: Session, by: str, reward: float, info: dict[str, Any]) -> None:
        """Record the ended episode, return its database to the pool, keep its tombstone (holding its lock)."""
        env = session.env
        assert env is not None
        session.verdict = info["verdict"]
        scored = session.verdict is not None and session.verdict.outcome_reward is not None
        session.reward = end_reward(reward, info) if scored else None
        session.reward_detail = info.get("reward_detail")
        session.ended_by = by
        if self.recorder is not None and session.run_dir is not None:
            self.recorder.add_played(session.run_dir, env.episode, agent=session.agent,
                                     agent_version=session.agent_version, seed=session.seed, key_id=session.owner)
        if self.journal is not None:
            self.journal.ended(session)
        self._free(session)

    def _not_played(self, who: Principal, world: World, scenario: Scenario, seed: int, profile: str | None,
                    agent: str, agent_version: str, reason: str) -> None:
        """Record an episode whose database could not be had: not scored, the database's failure."""
        if self.recorder is None:
            return
        run_dir = self.recorder.run_dir(world.name, provenance_of(world, profile))
        self.recorder.add_not_played(run_dir, scenario, agent=agent, agent_version=agent_version, seed=seed,
                                     key_id=who.key_id, cause=NotScoredCause.DATABASE,
                                     reason=f"the environment failed before the first turn: {reason}")

    def _free(self, session: Session) -> None:
        env, db = session.env, session.db
        session.env, session.db = None, None
        if env is not None:
            env.close()
        if db is not None:
            self.pool.release(session.world, db)
        with self._lock:
            if self._live.pop(session.id, None) is not None:
                self._places.give(session.owner)
            self._ended[session.id] = session
            while len(self._ended) > TOMBSTONES:
                self._ended.popitem(last=False)
