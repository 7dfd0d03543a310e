"""Rescoring: a stored run re-graded from its episode records alone (``rehearsal eval rescore``).

:func:`rescore_run` applies a reward profile to the stored records; with
``recheck_checks`` it also rebuilds every episode's end state from the
world's snapshot and the stored row changes, on the embedded SQLite engine,
and runs the stored checks again read-only (:func:`recheck`).
"""

from ._rebuild import Recheck, end_state, recheck, world_of
from ._rescore import REPORT_FILE, RescoreReport, rescore_records, rescore_run, reward_under

__all__ = [
    "REPORT_FILE",
    "Recheck",
    "end_state",
    "RescoreReport",
    "recheck",
    "rescore_records",
    "rescore_run",
    "reward_under",
    "world_of",
]
