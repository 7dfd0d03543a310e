"""Readiness: "Ready to pilot", "Needs work" or "Not decided" for an agent version on a world version, from records."""

from ._format import format_readiness
from ._rules import (
    MAX_NOT_SCORED_SHARE,
    MIN_SCORED,
    MIN_VERIFIED_SHARE,
    NEEDS_WORK,
    NOT_DECIDED,
    READY,
    Readiness,
    assess,
    readiness_of,
)
from ._runs import RunRecords, assess_runs, read_run

__all__ = ["MAX_NOT_SCORED_SHARE", "MIN_SCORED", "MIN_VERIFIED_SHARE", "NEEDS_WORK", "NOT_DECIDED", "READY",
           "Readiness",
           "RunRecords", "assess", "assess_runs", "format_readiness", "read_run",
           "readiness_of"]


def __getattr__(name: str) -> object:
    """``judge``: the old name of :func:`readiness_of` (``judge`` is the checks' verdict, :mod:`rehearsal_env.verdict`);
    kept for one release, with a warning."""
    if name == "judge":
        import warnings

        warnings.warn("rehearsal_env.readiness.judge is now readiness_of; the old name goes in the next release",
                      DeprecationWarning, stacklevel=2)
        return readiness_of
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
