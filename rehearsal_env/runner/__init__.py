"""Runs: plan episodes, play them in batches (one database per worker), record, summarize.

Serially in this process (:func:`run`) or over Ray actors (:func:`run_on_ray`),
with the same records; ``run.json`` in the run directory lets either resume.
"""

from ._models import customer_for, endpoint_of, model_agents, run_profile
from ._plan import AgentFactory, EpisodeSpec, RunConfig, batches, plan, world_for, write_provenance
from ._play import EpisodeResult, play, run_batch, run_episode
from ._pool import MAX_TRIES, Played, RayPool
from ._progress import Progress
from ._ray import run_on_ray
from ._resume import RUN_FILE, Batch, RunState, load_config, load_plan, start_run
from ._serial import run
from ._summary import (
    METRICS,
    OUTCOMES,
    SummaryRow,
    format_table,
    summarize,
    summary_row,
    summary_rows,
    write_summary,
)
from ._worker import EpisodeWorker

__all__ = [
    "MAX_TRIES",
    "METRICS",
    "OUTCOMES",
    "Played",
    "RUN_FILE",
    "AgentFactory",
    "Batch",
    "EpisodeResult",
    "EpisodeSpec",
    "EpisodeWorker",
    "Progress",
    "RayPool",
    "RunConfig",
    "RunState",
    "SummaryRow",
    "batches",
    "format_table",
    "load_config",
    "load_plan",
    "plan",
    "play",
    "run",
    "run_batch",
    "run_episode",
    "run_on_ray",
    "start_run",
    "summarize",
    "summary_row",
    "summary_rows",
    "customer_for",
    "endpoint_of",
    "model_agents",
    "run_profile",
    "world_for",
    "write_provenance",
    "write_summary",
]
