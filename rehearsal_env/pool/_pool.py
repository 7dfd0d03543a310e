"""The pool's driver side: an async API over Ray actors that each hold many sessions.

A rollout worker (on Ray already, in its own event loop) calls :meth:`EnvPool.reset`, :meth:`EnvPool.step`
and :meth:`EnvPool.close` (or the batched :meth:`EnvPool.reset_many`, :meth:`EnvPool.step_many`) and awaits
them; each is one Ray call to the actor holding the session, never a network server of ours.

- **Placement**: the actors are started with a scheduling strategy (``SPREAD`` by default: across the
  cluster's nodes); a new session goes to the live actor with the fewest sessions.
- **Backpressure**: past ``actors * sessions_per_actor`` open sessions, or past a caller's share
  (``max_sessions_per_caller``), :meth:`EnvPool.reset` raises :class:`~._errors.PoolFull` at once (with a
  retry hint); nothing queues without bound and nothing hangs: each actor call is bounded by ``call_timeout_s``
  (an actor past it is killed and treated as dead).
- **Fairness**: a caller holds at most its share of the sessions and each session at most one call in flight,
  so a caller with many sessions cannot take more than its share of an actor's time (an actor serves calls
  in the order they arrive).
- **Dead actors** (its process or its node died): the driver keeps each session's last checkpoint (taken by the
  actor after the reset and after every step); the session is adopted by another live actor from it
  (:func:`rehearsal_env.restore`, the same episode continued) and the call that was in flight is sent again
  on the restored state. A session without a checkpoint is recorded ``not_scored`` (cause ``worker``) and the
  caller gets :class:`~._errors.SessionLost` with that record. A reset whose actor died is sent to another actor
  (no episode had started).
- **Records**: every ended episode is kept in the pool's run directory (:mod:`._records`).
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..runner import EpisodeSpec, RunConfig, resolve
from ..verdict import NotScoredCause
from ._actor import SessionActor, Turn
from ._errors import PoolFull, SessionClosed, SessionLost
from ._records import RunRecords

MOVES = 3
"""Times one call follows its session to another actor before the session is recorded lost."""


@dataclass(frozen=True)
class Opened:
    """A session just reset: its id (for :meth:`EnvPool.step`) and first observation."""

    session: str
    """The session's id."""
    scenario: str
    """The scenario played."""
    observation: str
    """The first observation."""
    info: dict[str, Any]
    """The env's info after the reset."""


@dataclass(frozen=True)
class Stepped:
    """One step's result, as ``env.step`` gives it, and whether the session moved to another actor first."""

    observation: str
    """The observation."""
    reward: float
    """The step's reward."""
    terminated: bool
    """The episode ended."""
    truncated: bool
    """The episode was cut at its turn limit."""
    info: dict[str, Any]
    """The env's info (``verdict`` once ended)."""
    continued: bool
    """The session's actor had died and the session was continued from its checkpoint on another one."""


@dataclass
class _Session:
    id: str
    caller: str
    spec: EpisodeSpec
    actor: int
    checkpoint: bytes | None = None
    busy: bool = False


class EnvPool:
    """Ray actors holding sessions of one run's world; see the module docstring.

    Args:
        config: The run (world, backend, stress, reward profile, run id; ``agent`` names the caller's agent
            on the records; ``batch_size`` records per part file).
        out: The run directory the pool's records go to (a previous run there is replaced).
        actors: Actors to start (Ray must be initialised, e.g. connected to the cluster).
        sessions_per_actor: Open sessions per actor before the pool refuses new ones.
        max_sessions_per_caller: Open sessions one caller may hold (default: all of them).
        strategy: Ray scheduling strategy of the actors (``SPREAD``: across nodes; ``DEFAULT``).
        call_timeout_s: The longest one actor call may take before its actor is killed and its sessions moved.
        num_cpus: CPUs each actor reserves.
    """

    def __init__(self, config: RunConfig, out: str | Path, *, actors: int = 2, sessions_per_actor: int = 64,
                 max_sessions_per_caller: int | None = None, strategy: str = "SPREAD",
                 call_timeout_s: float = 120.0, num_cpus: float = 1) -> None:
        import ray

        if actors < 1 or sessions_per_actor < 1:
            raise ValueError(f"a pool needs at least 1 actor and 1 session per actor; got actors={actors}, "
                             f"sessions_per_actor={sessions_per_actor}")
        if not ray.is_initialized():
            raise RuntimeError("EnvPool needs Ray: call ray.init() (or ray.init(address=...) to join a cluster) "
                               "first")
        self.config = config
        self.run = resolve(config)
        self.capacity = actors * sessions_per_actor
        self.max_per_caller = max_sessions_per_caller or self.capacity
        self.call_timeout_s = call_timeout_s
        remote = ray.remote(SessionActor)
        options: Any = remote.options  # type: ignore[attr-defined]
        self._handles: list[Any] = [options(scheduling_strategy=strategy, num_cpus=num_cpus, max_restarts=0)
                                    .remote(config) for _ in range(actors)]
        refs: list[Any] = [h.where.remote() for h in self._handles]
        self.where: list[tuple[str, int]] = ray.get(refs, timeout=call_timeout_s)
        """Each actor's Ray node id and process id."""
        self._alive = [True] * actors
        self._load = [0] * actors
        self._sessions: dict[str, _Session] = {}
        self._callers: Counter[str] = Counter()
        self._repeats: Counter[str] = Counter()
        self.records = RunRecords(self.run, Path(out))
        self.continued = 0
        """Sessions continued on another actor after theirs died."""
        self.lost: list[str] = []
        """Sessions recorded not scored (cause ``worker``) because their actor died without a checkpoint."""

    # -- the API -----------------------------------------------------------------------------------------
    async def reset(self, scenario: str, *, seed: int | None = None, caller: str = "default") -> Opened:
        """Open a session playing ``scenario`` (seed: the run's seed plus its repeat, unless given).

        Raises:
            PoolFull: every slot is taken, or ``caller`` holds its share (nothing was started).
            KeyError: the world has no such scenario.
        """
        self.run.world.scenario(scenario)  # an unknown scenario fails here, not on an actor
        if len(self._sessions) >= self.capacity:
            raise PoolFull(f"the pool holds {len(self._sessions)} of {self.capacity} sessions; close one or retry "
                           "later", caller=caller, retry_after_s=0.1)
        if self._callers[caller] >= self.max_per_caller:
            raise PoolFull(f"caller {caller!r} holds {self._callers[caller]} sessions, its share is "
                           f"{self.max_per_caller}; close one first", caller=caller, retry_after_s=0.1)
        repeat = self._repeats[scenario]
        self._repeats[scenario] += 1
        spec = EpisodeSpec(scenario, repeat, self.config.seed + repeat if seed is None else seed)
        session = _Session(uuid.uuid4().hex, caller, spec, self._least_loaded())
        self._open(session)
        for _ in range(MOVES):
            try:
                turn = await self._call(session, "reset", session.id, spec)
                session.checkpoint = turn.checkpoint
                return Opened(session.id, scenario, turn.observation, turn.info)
            except _ActorGone:
                self._place(session, self._least_loaded())  # no episode had started there: start it elsewhere
        raise self._lose(session, "every actor it was sent to died before its reset")

    async def step(self, session: str, action: str) -> Stepped:
        """One step of ``session``; an ended episode's record goes to the run directory and the session closes.

        Raises:
            SessionClosed: no such open session.
            SessionLost: its actor died and it had no checkpoint (recorded not scored, cause worker).
            RuntimeError: a step of this session is already in flight.
        """
        s = self._get(session)
        if s.busy:
            raise RuntimeError(f"session {session} has a call in flight; await it before the next step")
        s.busy = True
        try:
            continued = False
            for _ in range(MOVES):
                try:
                    turn = await self._call(s, "step", s.id, action)
                    return self._took(s, turn, continued)
                except _ActorGone:
                    await self._move(s)
                    continued = True
            raise self._lose(s, f"its actor died {MOVES} times while taking one step")
        finally:
            s.busy = False

    async def close(self, session: str) -> None:
        """End ``session``: an open episode is ended for its agent (``give_up``) and recorded; unknown: nothing."""
        s = self._sessions.get(session)
        if s is None:
            return
        for _ in range(MOVES):
            try:
                turn = await self._call(s, "close", s.id)
                if turn is not None:
                    self._took(s, turn, False)
                return
            except _ActorGone:
                await self._move(s)
        raise self._lose(s, f"its actor died {MOVES} times while it was being closed")

    async def reset_many(self, scenarios: Sequence[str], *, caller: str = "default") -> list[Opened | BaseException]:
        """:meth:`reset` for each scenario, concurrently; a refused or failed one gives its exception."""
        return list(await asyncio.gather(*(self.reset(s, caller=caller) for s in scenarios), return_exceptions=True))

    async def step_many(self, calls: Sequence[tuple[str, str]]) -> list[Stepped | BaseException]:
        """:meth:`step` for each ``(session, action)``: one actor call per actor for the whole batch; a session
        whose actor died is continued one by one. A call that fails gives its exception."""
        results: list[Stepped | BaseException | None] = [None] * len(calls)
        groups: dict[int, list[int]] = {}
        for i, (session, _) in enumerate(calls):
            s = self._sessions.get(session)
            if s is None or s.busy or not self._alive[s.actor]:
                continue
            groups.setdefault(s.actor, []).append(i)

        async def one_actor(actor: int, indexes: list[int]) -> None:
            sessions = [self._sessions[calls[i][0]] for i in indexes]
            for s in sessions:
                s.busy = True
            try:
                turns = await self._await(actor, "step_many", [calls[i] for i in indexes])
            except _ActorGone:
                return  # left for the one-by-one pass below
            finally:
                for s in sessions:
                    s.busy = False
            for i, s, turn in zip(indexes, sessions, turns, strict=True):
                results[i] = turn if isinstance(turn, BaseException) else self._took(s, turn, False)

        await asyncio.gather(*(one_actor(a, ix) for a, ix in groups.items()))
        rest = [i for i, r in enumerate(results) if r is None]
        done = await asyncio.gather(*(self.step(*calls[i]) for i in rest), return_exceptions=True)
        for i, r in zip(rest, done, strict=True):
            results[i] = r
        return [r for r in results if r is not None]

    def finish(self) -> dict[str, Any]:
        """Close open sessions (each ended for its agent and recorded), write the run's summary and seal it,
        stop the actors; return the summary."""
        loop = asyncio.new_event_loop()
        try:
            for session in list(self._sessions):
                loop.run_until_complete(self.close(session))
        finally:
            loop.close()
        summary = self.records.finish()
        self.shutdown()
        return summary

    def shutdown(self) -> None:
        """Stop the actors (without recording anything)."""
        import ray

        for handle, alive in zip(self._handles, self._alive, strict=True):
            if alive:
                ray.kill(handle)
        self._alive = [False] * len(self._alive)

    @property
    def open_sessions(self) -> int:
        """Sessions open now."""
        return len(self._sessions)

    # -- placement and death -----------------------------------------------------------------------------
    def _least_loaded(self) -> int:
        live = [i for i, alive in enumerate(self._alive) if alive]
        if not live:
            raise _NoActors()
        return min(live, key=lambda i: self._load[i])

    def _open(self, s: _Session) -> None:
        self._sessions[s.id] = s
        self._callers[s.caller] += 1
        self._load[s.actor] += 1

    def _place(self, s: _Session, actor: int) -> None:
        self._load[s.actor] -= 1
        s.actor = actor
        self._load[actor] += 1

    def _closed(self, s: _Session) -> None:
        if self._sessions.pop(s.id, None) is not None:
            self._callers[s.caller] -= 1
            self._load[s.actor] -= 1

    def _get(self, session: str) -> _Session:
        s = self._sessions.get(session)
        if s is None:
            raise SessionClosed(f"no open session {session!r} in this pool (never opened, or its episode ended); "
                                "open one with reset()")
        return s

    def _took(self, s: _Session, turn: Turn, continued: bool) -> Stepped:
        if turn.record is not None:
            self.records.add(s.spec, turn.record)
            self._closed(s)
        else:
            s.checkpoint = turn.checkpoint
        return Stepped(turn.observation, turn.reward, turn.terminated, turn.truncated, turn.info, continued)

    async def _call(self, s: _Session, method: str, *args: Any) -> Any:
        if not self._alive[s.actor]:
            raise _ActorGone()
        return await self._await(s.actor, method, *args)

    async def _await(self, actor: int, method: str, *args: Any) -> Any:
        import ray
        from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

        ref = getattr(self._handles[actor], method).remote(*args)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(ref.future()), self.call_timeout_s)
        except (TimeoutError, RayActorError, GetTimeoutError):
            if self._alive[actor]:
                self._alive[actor] = False
                ray.kill(self._handles[actor])  # a silent actor never answers later: its sessions move
            raise _ActorGone() from None
        except RayTaskError as exc:  # the env's own error, raised here as itself
            raise exc.as_instanceof_cause() from None

    async def _move(self, s: _Session) -> None:
        """Continue ``s`` on a live actor from its checkpoint; record it lost when it has none."""
        if s.checkpoint is None:
            raise self._lose(s, "its actor died and it had no checkpoint to continue from")
        for _ in range(MOVES):
            try:
                target = self._least_loaded()
            except _NoActors:
                break
            self._place(s, target)
            try:
                await self._call(s, "adopt", s.id, s.spec, s.checkpoint)
                self.continued += 1
                return
            except _ActorGone:
                continue
        raise self._lose(s, "its actor died and no live actor could take it over")

    def _lose(self, s: _Session, why: str) -> SessionLost:
        reason = f"the pool's actor holding this episode died: {why}"
        record = self.run.lost(s.spec, reason, NotScoredCause.WORKER)
        self.records.add(s.spec, record)
        self._closed(s)
        self.lost.append(s.id)
        return SessionLost(f"session {s.id} ({s.spec.scenario}) was lost and recorded not scored (cause worker): "
                           f"{why}", record)


class _ActorGone(Exception):
    """The actor a call went to is dead (or was killed for not answering)."""


class _NoActors(_ActorGone):
    """No live actor is left."""
