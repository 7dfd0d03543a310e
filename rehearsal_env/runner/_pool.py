"""A pool of Ray actors playing one run's batches, streamed back as they finish.

Each actor holds an :class:`~._worker.EpisodeWorker` (world, database, one env
per scenario), built once; every episode resets it. The driver keeps
``inflight`` batches queued on every actor, so an actor never waits for the
driver, and takes results back as they finish (``ray.wait``). An actor encodes
its batch as a finished Parquet part itself: the driver does no work per
episode, only a file write per batch.

A worker that dies takes its running call with it. Calls queued behind it
never started and are queued again as they were. The running call's episodes
are retried one per call, counted as tried once; an episode whose worker dies
again is recorded ``not_scored`` with cause ``worker`` and the reason. A worker
that cannot start when the pool starts ends the run with the error; a
replacement that dies while starting is started again with backoff
(:data:`REPLACEMENT_TRIES` times), then given up on: the run goes on with the
other workers (and stops with the error only when none is left).
"""

from __future__ import annotations

import os
import re
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..records import EpisodeRecord, encode_part
from ._plan import AgentFactory, EpisodeSpec, RunConfig
from ._resolved import ResolvedRun, resolve
from ._resume import Batch
from ._summary import SummaryRow, summary_row
from ._worker import RECOVERY_S, DatabaseUnavailable, EpisodeWorker

MAX_TRIES = 2
"""Times an episode is started before a dying worker makes it ``not_scored``."""
REPLACEMENT_TRIES = 4
"""Times a replacement worker is started (waiting 0.5, 1, 2 s between) before the pool gives up on it."""


@dataclass(frozen=True)
class Played:
    """What comes back for a batch (or for some of its episodes, after a worker died)."""

    rows: tuple[SummaryRow, ...]
    """What the summary reads of each episode, in order."""
    part: bytes | None
    """The whole batch as a Parquet part file (None when not asked for, or pieced together)."""
    records: tuple[EpisodeRecord, ...] | None
    """The records themselves (None when not asked for)."""


class _Actor:
    """The Ray actor's body (wrapped with ``ray.remote`` when a pool starts)."""

    def __init__(self, config: RunConfig, agent_factory: AgentFactory | None, recovery_s: float) -> None:
        self.worker = EpisodeWorker(resolve(config, agent_factory), recovery_s=recovery_s)  # resolved once per actor

    def ready(self) -> int:
        return os.getpid()

    def play(self, specs: Sequence[EpisodeSpec], encode: bool, keep: bool) -> Played:
        records = self.worker.play_batch(specs)
        return Played(tuple(summary_row(r) for r in records), encode_part(records) if encode else None,
                      tuple(records) if keep else None)


@dataclass(frozen=True)
class _Task:
    """One call's worth of episodes."""

    batch: Batch
    """The plan batch the episodes belong to."""
    specs: tuple[EpisodeSpec, ...]
    """The episodes, in plan order (all of the batch's, or one after a worker died)."""
    tries: int = 0
    """Times a worker died while these episodes were being played."""


@dataclass
class _Slot:
    """An actor and its calls not yet taken back, in submission order."""

    actor: Any
    """The Ray actor handle."""
    refs: list[Any] = field(default_factory=list)
    """Object refs of its queued and running calls."""
    ready: bool = True
    """Whether the actor has started (no call is queued on a replacement until it has)."""
    starts: int = 0
    """Failed starts of its current replacement."""


class RayPool:
    """``workers`` Ray actors playing batches of one run's episodes (Ray must be initialised).

    Args:
        config: The run's config.
        workers: Actors to start (each needs one CPU of the cluster).
        agent_factory: A picklable factory of fresh policies (None: the built-in ``config.agent``).
        inflight: Batches queued on each actor at a time.
        recovery_s: How long each actor tries to reopen a failed database (see :mod:`._worker`).
        resolved: The run already resolved in this process (resolved here when None); each actor resolves
            its own once.
    """

    def __init__(self, config: RunConfig, workers: int, *, agent_factory: AgentFactory | None = None,
                 inflight: int = 2, recovery_s: float = RECOVERY_S, resolved: ResolvedRun | None = None) -> None:
        import ray

        if workers < 1 or inflight < 1:
            raise ValueError(f"a Ray pool needs workers >= 1 and inflight >= 1, got {workers} and {inflight}")
        self.config = config
        self.inflight = inflight
        self.deaths = 0
        self.given_up: list[str] = []
        """Why each worker the pool gave up on (it died, and its replacements would not start) is gone."""
        self._run = resolved or resolve(config, agent_factory)  # the driver's own, for the records of lost episodes
        self._remote = ray.remote(num_cpus=1, max_restarts=0, max_task_retries=0)(_Actor)
        self._agent_factory = agent_factory
        self._recovery_s = recovery_s
        self._slots = [_Slot(self._spawn()) for _ in range(workers)]
        try:
            ray.get([s.actor.ready.remote() for s in self._slots])
        except ray.exceptions.RayError as exc:
            self.close()
            raise RuntimeError(f"the Ray workers could not start: {brief(exc)}; check that rehearsal_env "
                               "and the agent factory import on every node") from exc

    def _spawn(self) -> Any:
        return self._remote.remote(self.config, self._agent_factory, self._recovery_s)  # type: ignore[attr-defined]

    def __enter__(self) -> RayPool:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop every actor."""
        import ray

        for slot in self._slots:
            ray.kill(slot.actor, no_restart=True)
        self._slots = []

    def play(self, batches: Sequence[Batch], *, keep: bool = False) -> Iterator[tuple[Batch, Played]]:
        """Play ``batches``; yield each as soon as all its episodes are in (``keep``: with the records)."""
        import ray

        pieces: dict[int, dict[tuple[str, int], EpisodeRecord]] = {b.index: {} for b in batches}
        todo: deque[_Task] = deque(_Task(b, b.specs) for b in batches)
        calls: dict[Any, tuple[_Slot, _Task | None]] = {}
        try:
            while todo or calls:
                for slot in self._slots:
                    while slot.ready and todo and len(slot.refs) < self.inflight:
                        task = todo.popleft()
                        whole = task.specs == task.batch.specs
                        ref = slot.actor.play.remote(task.specs, whole, keep or not whole)
                        slot.refs.append(ref)
                        calls[ref] = (slot, task)
                ready, _ = ray.wait(list(calls), num_returns=1)
                slot, maybe = calls.pop(ready[0])
                if maybe is None:  # a replacement actor's ready() call
                    try:
                        _get(ready[0], "a replacement Ray worker could not start")
                    except (RuntimeError, ray.exceptions.RayError) as exc:
                        self._restart(slot, exc, calls)
                    else:
                        slot.ready, slot.starts = True, 0
                    continue
                try:
                    done = [(maybe, _get(ready[0]))]
                    slot.refs.remove(ready[0])
                except ray.exceptions.RayActorError as exc:
                    calls[ready[0]] = (slot, maybe)
                    done = self._lost(slot, exc, calls, todo)
                for task, played in done:
                    if task.specs == task.batch.specs:
                        del pieces[task.batch.index]
                        yield task.batch, played
                        continue
                    into = pieces[task.batch.index]
                    into.update(((r.scenario, r.repeat), r) for r in played.records or ())
                    if len(into) == len(task.batch.specs):
                        del pieces[task.batch.index]
                        records = tuple(into[(s.scenario, s.repeat)] for s in task.batch.specs)
                        yield task.batch, Played(tuple(summary_row(r) for r in records), None, records)
        finally:  # a caller that stopped early leaves calls queued; they run unread, before the next play's
            for slot in self._slots:
                slot.refs.clear()

    def _lost(self, slot: _Slot, exc: Exception, calls: dict[Any, tuple[_Slot, _Task | None]],
              todo: deque[_Task]) -> list[tuple[_Task, Played]]:
        """A worker died: keep what it finished, blame its running call, requeue the rest, replace it."""
        import ray

        self.deaths += 1
        refs, slot.refs = slot.refs, []
        ray.wait(refs, num_returns=len(refs), timeout=30)  # a dead actor's calls all resolve
        done: list[tuple[_Task, Played]] = []
        again: list[_Task] = []
        blamed = False
        for ref in refs:
            task = calls.pop(ref)[1]
            assert task is not None
            if blamed:
                again.append(task)
                continue
            try:
                done.append((task, _get(ref, timeout=0)))
                continue
            except ray.exceptions.RayActorError as err:
                cause: Exception = err
            except ray.exceptions.GetTimeoutError:  # never came back: it was running when the worker died
                cause = exc
            blamed = True
            if len(task.specs) > 1:
                again.extend(_Task(task.batch, (spec,), task.tries + 1) for spec in task.specs)
            elif task.tries + 1 < MAX_TRIES:
                again.append(_Task(task.batch, task.specs, task.tries + 1))
            else:
                reason = (f"the worker process died while playing this episode, on each of {MAX_TRIES} "
                          f"tries: {brief(cause)}")
                record = self._run.lost(task.specs[0], reason)
                done.append((task, Played((summary_row(record),), None, (record,))))
        todo.extendleft(reversed(again))
        ray.kill(slot.actor, no_restart=True)
        slot.actor, slot.ready = self._spawn(), False
        calls[slot.actor.ready.remote()] = (slot, None)
        return done

    def _restart(self, slot: _Slot, exc: BaseException, calls: dict[Any, tuple[_Slot, _Task | None]]) -> None:
        """A replacement died while starting: start it again after a pause, or give up on this worker."""
        import ray

        ray.kill(slot.actor, no_restart=True)
        slot.starts += 1
        if slot.starts >= REPLACEMENT_TRIES:
            self._slots.remove(slot)
            self.given_up.append(brief(exc))
            if not self._slots:
                raise RuntimeError(f"every Ray worker died and none could be started again "
                                   f"({REPLACEMENT_TRIES} tries each): {brief(exc)}") from exc
            return
        time.sleep(0.5 * 2 ** (slot.starts - 1))
        slot.actor = self._spawn()
        calls[slot.actor.ready.remote()] = (slot, None)


def _get(ref: Any, context: str | None = None, timeout: float | None = None) -> Any:
    """``ray.get``; an error raised by the episode code is raised as itself, as in a serial run."""
    import ray

    try:
        return ray.get(ref, timeout=timeout)
    except ray.exceptions.RayTaskError as exc:
        if isinstance(exc.cause, DatabaseUnavailable):
            raise exc.cause from None  # as raised, with the records it carries
        raise exc.as_instanceof_cause() from None
    except ray.exceptions.RayActorError as exc:
        if context:
            raise RuntimeError(f"{context}: {brief(exc)}") from exc
        raise


def brief(exc: BaseException) -> str:
    """A Ray error in one line (at most 400 characters): what died, and the error or the exit detail."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    lines = [line.strip() for line in text.splitlines() if line.strip()] or [type(exc).__name__]
    short = " ".join(lines)
    if "creation task" in lines[0] and len(lines) > 1:  # the actor's __init__ raised: its error is last
        short = f"{lines[0].split(',')[0]}: {lines[-1]}"
    elif detail := re.search(r"Worker exit type: (\S+) Worker exit detail: ([^.]*\.)", text):
        short = f"{lines[0]} ({detail[1]}: {detail[2]})"
    return short if len(short) <= 400 else short[:397] + "..."
