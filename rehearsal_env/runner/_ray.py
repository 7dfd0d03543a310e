"""Runs on Ray: ``rehearsal run --workers N``; each finished batch is written as a part at once.

The actors (:class:`~._pool.RayPool`) send each batch back already encoded as
a Parquet part; this process only writes files (on a few threads, as fsync
waits), so it does not limit how many workers a run can use. The parts and
records are those of a serial run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..records import EPISODES_DIR, EpisodeRecord, write_bytes_atomic, write_part
from ._plan import AgentFactory, RunConfig
from ._pool import Played, RayPool
from ._progress import Progress
from ._resume import Batch, finish_run, start_run
from ._summary import SummaryRow

WRITERS = 4
"""Threads writing parts (a write waits on fsync, so the driver keeps taking batches meanwhile)."""


def connect(address: str | None, workers: int) -> bool:
    """Join ``address``, or start a local Ray with ``workers`` CPUs; True when this call started Ray.

    A Ray already initialised in this process is used as it is.

    Raises:
        ValueError: the cluster has fewer CPUs than ``workers``.
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


def write_played(out: Path, batch: Batch, played: Played) -> Path:
    """Write a played batch as its part: the actor's encoded bytes as they are, else the records."""
    if played.part is None:
        return write_part(out, played.records or (), batch.part)
    path = out / EPISODES_DIR / f"part-{batch.part:05d}.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(path, played.part)
    return path


def _unfinished(writes: list[Future[Path]]) -> list[Future[Path]]:
    """The writes still running; a finished write that failed raises its error here."""
    running = []
    for write in writes:
        if write.done():
            write.result()
        else:
            running.append(write)
    return running


def run_on_ray(config: RunConfig, out_dir: str | Path, *, workers: int, address: str | None = None,
               agent_factory: AgentFactory | None = None, resume: bool = False, progress: bool = False,
               on_batch: Callable[[list[EpisodeRecord]], None] | None = None,
               inflight: int = 2, pool: RayPool | None = None) -> dict[str, Any]:
    """Run over ``workers`` Ray actors; write each batch as a part as it finishes, then ``summary.json``.

    The records are those of :func:`~rehearsal_env.runner.run` with the same config, in the same parts.
    A local Ray this call starts is shut down when it returns. ``on_batch`` gets each batch's records
    (the actors then send records too). ``pool``: warm actors of this config to use (and not close)
    instead of starting ``workers`` new ones (benchmarks).
    """
    out = Path(out_dir)
    state = start_run(config, out, resume=resume)
    if pool is not None and pool.config != state.config:
        raise ValueError("the given pool plays another config; make a RayPool of this run's config")
    bar = Progress(len(state.specs), done=state.recorded, enabled=progress)
    started = connect(address, workers) if state.pending and pool is None else False
    rows: list[SummaryRow] = []
    try:
        if state.pending:
            own = pool is None
            pool = pool or RayPool(state.config, workers, agent_factory=agent_factory, inflight=inflight)
            bar.start()
            writes: list[Future[Path]] = []
            try:
                with ThreadPoolExecutor(WRITERS, thread_name_prefix="rehearsal-parts") as writer:
                    for batch, played in pool.play(state.pending, keep=on_batch is not None):
                        writes = _unfinished(writes)
                        writes.append(writer.submit(write_played, out, batch, played))
                        rows.extend(played.rows)
                        bar.update([r.outcome for r in played.rows])
                        if on_batch:
                            on_batch(list(played.records or ()))
                for w in writes:
                    w.result()
            finally:
                if own:
                    pool.close()
    finally:
        bar.close()
        if started:
            import ray

            ray.shutdown()
    return finish_run(state, out, rows)
