"""Runs: plan episodes, play them in batches (one database per worker), record, summarize."""

from ._serial import (
    AgentFactory,
    EpisodeResult,
    EpisodeSpec,
    RunConfig,
    batches,
    plan,
    play,
    run,
    run_batch,
    run_episode,
    write_summary,
)
from ._summary import METRICS, OUTCOMES, format_table, summarize

__all__ = [
    "METRICS",
    "OUTCOMES",
    "AgentFactory",
    "EpisodeResult",
    "EpisodeSpec",
    "RunConfig",
    "batches",
    "format_table",
    "plan",
    "play",
    "run",
    "run_batch",
    "run_episode",
    "summarize",
    "write_summary",
]
