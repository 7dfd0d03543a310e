"""Runs on Ray: ``rehearsal run --workers N``; each finished batch is written as a part at once.

The actors (:class:`~._pool.RayPool`) send each batch back already encoded as
a Parquet part; this process only writes files (on a few threads, as fsync
waits), so it does not limit how many workers a run can use. The parts and
records are those of a serial run.

Joining a cluster (``--ray-address HOST:PORT``): nothing listening there fails
within :data:`CONNECT_TIMEOUT_S` with a message, never a hang. A cluster
started with ``ray start`` on Ray 2.60 with token authentication needs the same
``RAY_AUTH_MODE=token`` (and its token) in the driver's environment; the
message says so. A local Ray this run starts shares the driver's fate: a
watchdog (:mod:`._reaper`) kills its processes within a second of the driver's
death, so a killed driver leaves none behind (Ray's own fate sharing misses the
raylet's agents).
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..records import EpisodeRecord, next_part, write_part, write_part_bytes
from ._checkpoints import clear_checkpoints
from ._lock import run_lock
from ._plan import AgentFactory, RunConfig
from ._pool import Played, RayPool
from ._progress import Progress
from ._reaper import watch
from ._resume import Batch, begin_run, finish_run, start_run, stop_run
from ._retry import retry_written
from ._summary import SummaryRow, summary_row
from ._worker import RECOVERY_S, DatabaseUnavailable

WRITERS = 4
"""Threads writing parts (a write waits on fsync, so the driver keeps taking batches meanwhile)."""
CONNECT_TIMEOUT_S = 30.0
"""How long joining a Ray cluster at ``--ray-address`` may take before the run fails with a message."""


def _probe(address: str, timeout: float) -> None:
    """Fail fast when nothing listens at ``HOST:PORT`` (other address forms are left to Ray)."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "://" in address:
        return
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout).close()
    except OSError as exc:
        raise ConnectionError(f"no Ray cluster answers at --ray-address {address} ({exc}); start one with "
                              "`ray start --head` and pass the address it prints") from None


def _init_within(timeout: float, **kwargs: object) -> None:
    """``ray.init(**kwargs)``, failing after ``timeout`` seconds instead of hanging."""
    import ray  # loaded only by runs that use Ray (it takes seconds to import)

    failure: list[BaseException] = []

    def join() -> None:
        try:
            ray.init(**kwargs)  # type: ignore[arg-type]
        except BaseException as exc:  # handed to the caller's thread
            failure.append(exc)

    thread = threading.Thread(target=join, name="rehearsal-ray-init", daemon=True)
    thread.start()
    thread.join(timeout)
    address = kwargs.get("address")
    hint = ("; a cluster started by `ray start` with token authentication needs RAY_AUTH_MODE=token (and its "
            "token) in this environment too")
    if thread.is_alive():
        raise ConnectionError(f"could not join the Ray cluster at {address} within {timeout:g} s{hint}")
    if failure:
        raise ConnectionError(f"could not join the Ray cluster at {address}: "
                              f"{str(failure[0]).strip().splitlines()[0] if str(failure[0]).strip() else failure[0]!r}"
                              f"{hint}") from failure[0]


def connect(address: str | None, workers: int) -> bool:
    """Join ``address``, or start a local Ray with ``workers`` CPUs; True when this call started Ray.

    A Ray already initialised in this process is used as it is.

    Raises:
        ValueError: the cluster has fewer CPUs than ``workers``.
        ConnectionError: nothing answers at ``address``, or joining it took longer than
            :data:`CONNECT_TIMEOUT_S`.
    """
    import ray

    started = False
    if not ray.is_initialized():
        options = dict(include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
        if address:
            _probe(address, CONNECT_TIMEOUT_S / 3)
            _init_within(CONNECT_TIMEOUT_S, address=address, **options)
        else:
            ray.init(num_cpus=workers, **options)  # type: ignore[arg-type]
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
    return write_part_bytes(out, played.part, batch.part)


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
               inflight: int = 2, pool: RayPool | None = None, recovery_s: float = RECOVERY_S) -> dict[str, Any]:
    """Run over ``workers`` Ray actors; write each batch as a part as it finishes, then ``summary.json``.

    The records are those of :func:`~rehearsal_env.runner.run` with the same config, in the same parts.
    A local Ray this call starts is shut down when it returns. ``on_batch`` gets each batch's records
    (the actors then send records too). ``pool``: warm actors of this config to use (and not close)
    instead of starting ``workers`` new ones (benchmarks). ``recovery_s``: how long each worker tries
    to reopen a failed database before the run stops.

    Raises:
        RunLocked: another run holds ``out_dir``.
        RunStopped: a worker's database failed for good; ``summary.json`` covers what was recorded
            (the batches in flight are played again by ``--resume``).
        ConnectionError: the Ray cluster at ``address`` cannot be joined.
    """
    out = Path(out_dir)
    with run_lock(out, config.run_id):
        state = start_run(config, out, resume=resume, agent_factory=agent_factory)
        if pool is not None and pool.config != state.config:
            raise ValueError("the given pool plays another config; make a RayPool of this run's config")
        bar = Progress(len(state.specs), done=state.recorded, enabled=progress)
        started = connect(address, workers) if state.pending and pool is None else False
        dog = watch() if started and not address else None  # our local Ray ends with us, even if we are killed
        rows: list[SummaryRow] = []
        try:
            if state.pending:
                own = pool is None
                pool = pool or RayPool(state.config, workers, agent_factory=agent_factory, inflight=inflight,
                                       recovery_s=recovery_s, resolved=state.run)
                begin_run(state, out)  # the workers started: the run can start
                if not resume:
                    clear_checkpoints(config.checkpoints)  # a previous run's, in the same folder
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
                except DatabaseUnavailable as exc:
                    for w in writes:
                        w.result()
                    if exc.records:  # the failed batch's episodes played so far; a spare part number holds them
                        spare = max(next_part(out), -(-len(state.specs) // state.config.batch_size))
                        write_part(out, exc.records, spare)
                        rows.extend(summary_row(r) for r in exc.records)
                    stop_run(state, out, rows, exc)
                finally:
                    if own:
                        pool.close()
        finally:
            bar.close()
            if started:
                import ray

                ray.shutdown()
            if dog is not None:
                dog.stop()
        try:  # the not-scored episodes the actors recorded are retried here, each retry recorded (._retry)
            rows = retry_written(state.run, out, rows, recovery_s)
        except DatabaseUnavailable as exc:
            stop_run(state, out, rows, exc)
        clear_checkpoints(config.checkpoints)  # every episode is recorded
        return finish_run(state, out, rows)
