"""Verdicts: outcomes, endings, run metrics, and how checks decide them."""

from ._cause import NotScoredCause, NotScoredError
from ._judge import Snapshot, alive, judge, run_check
from ._verdict import Ending, EpisodeMetrics, Outcome, Verdict, decide

__all__ = [
    "alive",
    "Ending",
    "EpisodeMetrics",
    "NotScoredCause",
    "NotScoredError",
    "Outcome",
    "Snapshot",
    "Verdict",
    "decide",
    "judge",
    "run_check",
]
