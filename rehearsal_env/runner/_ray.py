"""Runs on Ray: episodes fanned out over actors, each with its own database, batches streamed back.

Each actor holds an :class:`~._worker.EpisodeWorker` (world, database, one env
per scenario), built once; every episode resets it. The driver keeps
``inflight`` batches queued on every actor so an actor never waits for the
driver, takes results back as they finish (``ray.wait``) and yields each batch
once all its episodes are in; the caller writes it as a part at once.

A worker that dies takes its running batch with it. Batches queued behind it
never started and are queued again as they were. The running batch's episodes
are retried one per call, counted as tried once; an episode whose worker dies
again is recorded ``not_scored`` with the reason. A worker that cannot start
ends the run with the error.
"""

from __future__ import annotations

import logging
import os
import re
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..records import EpisodeRecord, write_part
from ._progress import Progress
from ._resume import Batch, finish_run, start_run
from ._serial import AgentFactory, EpisodeSpec, RunConfig, world_for
from ._worker import EpisodeWorker, lost_record

MAX_TRIES = 2
"""Times an episode is started before a dying worker makes it ``not_scored``."""


class _Actor:
    """The Ray actor's body (wrapped with ``ray.remote`` when a pool starts)."""

    def __init__(self, config: RunConfig, agent_factory: AgentFactory | None) -> None:
        self.worker = EpisodeWorker(config, agent_factory)

    def ready(self) -> int:
        return os.getpid()

    def play(self, specs: Sequence[EpisodeSpec]) -> list[EpisodeRecord]:
        return self.worker.play_batch(specs)


@dataclass(frozen=True)
class _Task:
    """One call's worth of episodes."""

    batch: int
    """Index of the plan batch the episodes belong to."""
    specs: tuple[EpisodeSpec, ...]
    """The episodes, in plan order."""
    tries: int = 0
    """Times a worker died while these episodes were being played."""


@dataclass
class _Slot:
    """An actor and its calls not yet taken back, in submission order."""

    actor: Any
    """The Ray actor handle."""
    refs: list[Any] = field(default_factory=list)
    """Object refs of its queued and running calls."""


def connect(address: str | None, workers: int) -> bool:
    """Join ``address``, or start a local Ray with ``workers`` CPUs; True when this call started Ray.

    A Ray already initialised in this process is used as it is.
    """
    import ray

    started = False
    if not ray.is_initialized():
        ray.init(address=address, num_cpus=None if address else workers, include_dashboard=False,
                 log_to_driver=False, logging_level=logging.ERROR)
        started = True
    cpus = ray.cluster_resources().get("CPU", 0)
    if cpus < workers:
        if started:
            ray.shutdown()
        raise ValueError(f"--workers {workers} needs {workers} CPUs in the Ray cluster, which has {cpus:g}; "
                         "lower --workers or add nodes")
    return started


class RayPool:
    """``workers`` Ray actors playing batches of one run's episodes.

    Args:
        config: The run's config.
        workers: Actors to start (each needs one CPU of the cluster).
        agent_factory: A picklable factory of fresh policies (None: the built-in ``config.agent``).
        inflight: Batches queued on each actor at a time.
    """

    def __init__(self, config: RunConfig, workers: int, *, agent_factory: AgentFactory | None = None,
                 inflight: int = 2) -> None:
        import ray

        if workers < 1 or inflight < 1:
            raise ValueError(f"a Ray pool needs workers >= 1 and inflight >= 1, got {workers} and {inflight}")
        self.config = config
        self.inflight = inflight
        self._world = world_for(config)
        self._remote = ray.remote(num_cpus=1, max_restarts=0, max_task_retries=0)(_Actor)
        self._agent_factory = agent_factory
        self.deaths = 0
        self._slots = [_Slot(self._spawn()) for _ in range(workers)]
        try:
            ray.get([s.actor.ready.remote() for s in self._slots])
        except ray.exceptions.RayError as exc:
            self.close()
            raise RuntimeError(f"the Ray workers could not start: {_brief(exc)}; check that rehearsal_env "
                               "and the agent factory import on every node") from exc

    def _spawn(self) -> Any:
        return self._remote.remote(self.config, self._agent_factory)  # type: ignore[attr-defined]

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

    def play(self, batches: Sequence[Batch]) -> Iterator[tuple[Batch, list[EpisodeRecord]]]:
        """Play ``batches``; yield each with its records (in spec order) as soon as all are in."""
        import ray

        wanted = {b.index: b for b in batches}
        got: dict[int, dict[tuple[str, int], EpisodeRecord]] = {b.index: {} for b in batches}
        todo: deque[_Task] = deque(_Task(b.index, b.specs) for b in batches)
        calls: dict[Any, tuple[_Slot, _Task | None]] = {}

        def take(task: _Task, records: list[EpisodeRecord]) -> tuple[Batch, list[EpisodeRecord]] | None:
            into = got[task.batch]
            into.update(((r.scenario, r.repeat), r) for r in records)
            batch = wanted[task.batch]
            if len(into) < len(batch.specs):
                return None
            del got[task.batch]
            return batch, [into[(s.scenario, s.repeat)] for s in batch.specs]

        while todo or calls:
            for slot in self._slots:
                while todo and len(slot.refs) < self.inflight:
                    task = todo.popleft()
                    ref = slot.actor.play.remote(task.specs)
                    slot.refs.append(ref)
                    calls[ref] = (slot, task)
            ready, _ = ray.wait(list(calls), num_returns=1)
            slot, maybe = calls.pop(ready[0])
            if maybe is None:  # a replacement actor's ready() call
                _get(ready[0], "a replacement Ray worker could not start")
                continue
            try:
                records = _get(ready[0])
            except ray.exceptions.RayActorError as exc:
                calls[ready[0]] = (slot, maybe)
                done = self._lost(slot, exc, calls, todo)
            else:
                slot.refs.remove(ready[0])
                done = [(maybe, records)]
            for task, recs in done:
                finished = take(task, recs)
                if finished:
                    yield finished

    def _lost(self, slot: _Slot, exc: Exception, calls: dict[Any, tuple[_Slot, _Task | None]],
              todo: deque[_Task]) -> list[tuple[_Task, list[EpisodeRecord]]]:
        """A worker died: keep what it finished, blame its running call, requeue the rest, replace it."""
        import ray

        self.deaths += 1
        refs, slot.refs = slot.refs, []
        ray.wait(refs, num_returns=len(refs), timeout=30)
        done: list[tuple[_Task, list[EpisodeRecord]]] = []
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
                          f"tries: {_brief(cause)}")
                done.append((task, [lost_record(self.config, self._world, task.specs[0], reason)]))
        todo.extendleft(reversed(again))
        ray.kill(slot.actor, no_restart=True)
        slot.actor = self._spawn()
        calls[slot.actor.ready.remote()] = (slot, None)
        return done


def _get(ref: Any, context: str | None = None, timeout: float | None = None) -> Any:
    """``ray.get``; an error raised by the episode code is raised as itself, as in a serial run."""
    import ray

    try:
        return ray.get(ref, timeout=timeout)
    except ray.exceptions.RayTaskError as exc:
        raise exc.as_instanceof_cause() from None
    except ray.exceptions.RayActorError as exc:
        if context:
            raise RuntimeError(f"{context}: {_brief(exc)}") from exc
        raise


def _brief(exc: BaseException) -> str:
    """A Ray error in one line (at most 400 characters): what died, and the error or the exit detail."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    lines = [line.strip() for line in text.splitlines() if line.strip()] or [type(exc).__name__]
    brief = " ".join(lines)
    if "creation task" in lines[0] and len(lines) > 1:  # the actor's __init__ raised: its error is last
        brief = f"{lines[0].split(',')[0]}: {lines[-1]}"
    elif detail := re.search(r"Worker exit type: (\S+) Worker exit detail: ([^.]*\.)", text):
        brief = f"{lines[0]} ({detail[1]}: {detail[2]})"
    return brief if len(brief) <= 400 else brief[:397] + "..."


def run_on_ray(config: RunConfig, out_dir: str | Path, *, workers: int, address: str | None = None,
               agent_factory: AgentFactory | None = None, resume: bool = False, progress: bool = False,
               on_batch: Callable[[list[EpisodeRecord]], None] | None = None,
               inflight: int = 2, pool: RayPool | None = None) -> dict[str, Any]:
    """Run over ``workers`` Ray actors; write each batch as a part as it finishes, then ``summary.json``.

    The records are those of :func:`~rehearsal_env.runner.run` with the same config, in the same parts.
    A local Ray this call starts is shut down when it returns. ``pool``: warm actors of this config to
    use (and not close) instead of starting ``workers`` new ones (benchmarks).
    """
    out = Path(out_dir)
    state = start_run(config, out, resume=resume)
    if pool is not None and pool.config != state.config:
        raise ValueError("the given pool plays another config; make a RayPool of this run's config")
    bar = Progress(len(state.specs), done=state.recorded, enabled=progress)
    started = connect(address, workers) if state.pending and pool is None else False
    try:
        if state.pending:
            own = pool is None
            pool = pool or RayPool(state.config, workers, agent_factory=agent_factory, inflight=inflight)
            try:
                for batch, records in pool.play(state.pending):
                    write_part(out, records, batch.part)
                    bar.update(records)
                    if on_batch:
                        on_batch(records)
            finally:
                if own:
                    pool.close()
    finally:
        bar.close()
        if started:
            import ray

            ray.shutdown()
    return finish_run(state.config, out)
