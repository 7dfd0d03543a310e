"""Why a check could not decide: refused before it ran, or it ran and returned no single value."""

from __future__ import annotations


class CheckRefused(ValueError):
    """A check's SQL is not a single read-only statement (raised before it runs)."""


class CheckError(RuntimeError):
    """A check ran but did not return exactly one value (zero rows, several rows or columns)."""
