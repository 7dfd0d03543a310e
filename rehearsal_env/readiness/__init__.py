"""Readiness: "Ready to pilot" or "Needs work" for an agent version on a world version, from records."""

from ._rules import (
           MIN_SCORED,
           MIN_VERIFIED_SHARE,
           NEEDS_WORK,
           READY,
           Readiness,
           assess,
           format_readiness,
           judge,
)

__all__ = ["MIN_SCORED", "MIN_VERIFIED_SHARE", "NEEDS_WORK", "READY", "Readiness", "assess",
           "format_readiness", "judge"]
