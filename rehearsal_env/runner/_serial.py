"""Running serially in this process: plan, play the batches on one worker, write parts, summarize.

The shared plan lives in :mod:`._plan`, playing an episode in :mod:`._play`;
this module is only the serial loop. The run holds the directory's lock
(:mod:`._lock`) throughout; a database that fails and cannot be reopened stops
the run with a summary of what was recorded (:class:`~._resume.RunStopped`).
Records are written as episodes end, at most ``flush_s`` seconds late (:mod:`._flush`), so a run stopped
in the middle of a slow batch can be measured as far as it went.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..records import EpisodeRecord, next_part
from ._checkpoints import clear_checkpoints
from ._flush import FLUSH_S, PartFlusher
from ._lock import run_lock
from ._plan import AgentFactory, RunConfig
from ._progress import Progress
from ._resume import RunState, RunStopped, begin_run, finish_run, start_run, stop_run
from ._retry import play_retries, recount, retryable
from ._summary import SummaryRow, summary_row
from ._worker import RECOVERY_S, DatabaseUnavailable, EpisodeWorker


def _close_stopped(state: RunState, out: Path, played: list[SummaryRow], parts: PartFlusher | None) -> None:
    """A run stopped mid-batch: write ``summary.json`` over the episodes on disk and seal them, so that
    ``measure.py`` reads the run as far as it went (``--resume`` finishes it and seals again)."""
    written = [*played, *(summary_row(r) for r in (parts.flushed if parts is not None else ()))]
    if not written:
        return
    try:
        finish_run(state, out, written)
    except Exception:  # noqa: BLE001 - the error that stopped the run is the one to raise
        pass


def run(config: RunConfig, out_dir: str | Path, *, agent_factory: AgentFactory | None = None,
        on_batch: Callable[[list[EpisodeRecord]], None] | None = None, resume: bool = False,
        progress: bool = False, recovery_s: float = RECOVERY_S, flush_s: float = FLUSH_S) -> dict[str, Any]:
    """Run serially in this process, write records and ``summary.json`` to ``out_dir``; return the summary.

    ``resume`` continues the run in ``out_dir`` (its ``run.json``), playing only unrecorded episodes;
    ``progress`` draws a progress line on a terminal's stderr; ``recovery_s``: how long to try reopening
    a failed database before the run stops; ``flush_s``: the longest a finished episode's record waits before
    it is written (:mod:`._flush`).

    Raises:
        RunLocked: another run holds ``out_dir``.
        RunStopped: the database failed for good; ``summary.json`` covers what was recorded.
    """
    out = Path(out_dir)
    with run_lock(out, config.run_id):
        state = start_run(config, out, resume=resume, agent_factory=agent_factory)
        worker = EpisodeWorker(state.run, recovery_s=recovery_s)  # opens the database: the run can start
        begin_run(state, out)
        if not resume:
            clear_checkpoints(config.checkpoints)  # a previous run's, in the same folder
        bar = Progress(len(state.specs), done=state.recorded, enabled=progress)
        played: list[SummaryRow] = []
        planned = max([-(-len(state.specs) // state.config.batch_size), *(b.part + 1 for b in state.pending)])

        def spare() -> int:  # a part number no batch of the plan uses, after every part written
            return max(planned, next_part(out))

        bar.start()
        parts: PartFlusher | None = None
        lost: list[EpisodeRecord] = []  # not scored for a part that may work on another try: retried at the end
        try:
            for batch in state.pending:
                parts = PartFlusher(out, batch.specs, batch.part, spare, flush_s)
                try:
                    done = worker.play_batch(batch.specs, parts.add)
                except DatabaseUnavailable as exc:
                    parts.finish(exc.records)
                    played.extend(summary_row(r) for r in exc.records)
                    stop_run(state, out, played, exc)
                parts.finish(done)
                played.extend(summary_row(r) for r in done)
                parts = None
                bar.update([r.outcome for r in done])
                if on_batch:
                    on_batch(done)
                lost.extend(r for r in done if retryable(r))
            try:
                again = play_retries(worker, lost, state.config.retries,
                                     lambda specs: PartFlusher(out, specs, spare(), spare, flush_s))
            except DatabaseUnavailable as exc:  # its retries are recorded; the summary counts the attempts before
                stop_run(state, out, played, exc)
            counted, superseded = recount(lost, again)
            for record in superseded:  # the summary counts each planned episode once (the records keep every attempt)
                played.remove(summary_row(record))
            played.extend(summary_row(r) for r in counted)
        except RunStopped:
            raise
        except BaseException:  # Ctrl-C, a refusing provider, a bug: what was written is summarized and sealed
            _close_stopped(state, out, played, parts)
            raise
        finally:
            worker.close()
            bar.close()
        clear_checkpoints(config.checkpoints)  # every episode is recorded
        return finish_run(state, out, played)
