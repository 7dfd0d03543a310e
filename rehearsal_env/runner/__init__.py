"""Runs: plan episodes, play them in batches (one database per worker), record, summarize.

Serially in this process (:func:`run`) or over Ray actors (:func:`run_on_ray`),
with the same records; ``run.json`` in the run directory lets either resume.
One run holds a run directory at a time (:func:`run_lock`). An episode is not
scored only for a part that failed, never for the agent (see :mod:`._play`); a
database that fails is reopened, or the run stops with a summary
(:class:`RunStopped`) and ``--resume`` finishes it.
"""

from ._lock import RunLocked, run_lock
from ._models import run_profile
from ._plan import AgentFactory, EpisodeSpec, RunConfig, batches, plan, world_for, write_provenance
from ._play import Answer, EpisodeResult, advance, episode_turns, play, run_batch, run_episode, take_turn
from ._pool import MAX_TRIES, Played, RayPool
from ._progress import Progress
from ._ray import run_on_ray
from ._resolved import ResolvedRun, resolve
from ._resume import (
    REPLAYED_CAUSES,
    RUN_FILE,
    Batch,
    RunState,
    RunStopped,
    begin_run,
    finish_run,
    load_config,
    load_plan,
    save_run,
    start_run,
)
from ._serial import run
from ._stamp import RecordStamp
from ._summary import (
    METRICS,
    OUTCOMES,
    SummaryRow,
    format_table,
    no_world_tool_hint,
    summary_of,
    summary_row,
    summary_rows,
    write_summary,
)
from ._tally import SummaryTally
from ._worker import RECOVERY_S, DatabaseUnavailable, EpisodeWorker

__all__ = [
    "MAX_TRIES",
    "METRICS",
    "OUTCOMES",
    "RECOVERY_S",
    "REPLAYED_CAUSES",
    "Played",
    "RUN_FILE",
    "AgentFactory",
    "Answer",
    "RecordStamp",
    "ResolvedRun",
    "advance",
    "begin_run",
    "finish_run",
    "save_run",
    "episode_turns",
    "resolve",
    "take_turn",
    "Batch",
    "DatabaseUnavailable",
    "EpisodeResult",
    "EpisodeSpec",
    "EpisodeWorker",
    "Progress",
    "RayPool",
    "RunConfig",
    "RunLocked",
    "RunState",
    "RunStopped",
    "SummaryRow",
    "SummaryTally",
    "batches",
    "format_table",
    "no_world_tool_hint",
    "load_config",
    "load_plan",
    "plan",
    "play",
    "run",
    "run_batch",
    "run_episode",
    "run_lock",
    "run_on_ray",
    "start_run",
    "summary_of",
    "summary_row",
    "summary_rows",
    "run_profile",
    "world_for",
    "write_provenance",
    "write_summary",
]


def __getattr__(name: str) -> object:
    """``summarize``: the old name of :func:`summary_of` (``measure.summarize`` is the measured report); kept
    for one release, with a warning."""
    if name == "summarize":
        import warnings

        warnings.warn("rehearsal_env.runner.summarize is now summary_of; the old name goes in the next release",
                      DeprecationWarning, stacklevel=2)
        return summary_of
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
