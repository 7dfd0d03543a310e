"""Readiness: "Ready to pilot" or "Needs work" for an agent version on a world version, from records."""

from ._rules import (
           MAX_NOT_SCORED_SHARE,
           MIN_SCORED,
           MIN_VERIFIED_SHARE,
           NEEDS_WORK,
           READY,
           Readiness,
           assess,
           format_readiness,
           judge,
)
from ._runs import RunRecords, assess_runs, read_run

__all__ = ["MAX_NOT_SCORED_SHARE", "MIN_SCORED", "MIN_VERIFIED_SHARE", "NEEDS_WORK", "READY", "Readiness",
           "RunRecords", "assess", "assess_runs", "format_readiness", "judge", "read_run"]
