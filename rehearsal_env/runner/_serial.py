"""Running serially in this process: plan, play the batches on one worker, write parts, summarize.

The shared plan lives in :mod:`._plan`, playing an episode in :mod:`._play`;
this module is only the serial loop.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..records import EpisodeRecord, write_part
from ._plan import AgentFactory, RunConfig
from ._progress import Progress
from ._resume import finish_run, start_run
from ._summary import SummaryRow, summary_row
from ._worker import EpisodeWorker


def run(config: RunConfig, out_dir: str | Path, *, agent_factory: AgentFactory | None = None,
        on_batch: Callable[[list[EpisodeRecord]], None] | None = None, resume: bool = False,
        progress: bool = False) -> dict[str, Any]:
    """Run serially in this process, write records and ``summary.json`` to ``out_dir``; return the summary.

    ``resume`` continues the run in ``out_dir`` (its ``run.json``), playing only unrecorded episodes;
    ``progress`` draws a progress line on a terminal's stderr.
    """
    out = Path(out_dir)
    state = start_run(config, out, resume=resume)
    bar = Progress(len(state.specs), done=state.recorded, enabled=progress)
    worker = EpisodeWorker(state.config, agent_factory, world=state.world)
    bar.start()
    played: list[SummaryRow] = []
    try:
        for batch in state.pending:
            done = worker.play_batch(batch.specs)
            write_part(out, done, batch.part)
            played.extend(summary_row(r) for r in done)
            bar.update([r.outcome for r in done])
            if on_batch:
                on_batch(done)
    finally:
        worker.close()
        bar.close()
    return finish_run(state, out, played)
