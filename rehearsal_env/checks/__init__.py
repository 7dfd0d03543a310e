"""Checks: single read-only SQL statements whose value decides an outcome."""

from ._check import (
    OPS,
    Check,
    CheckError,
    CheckKind,
    CheckRefused,
    CheckResult,
    Op,
    code_only,
    validate_check_sql,
)

__all__ = [
    "OPS",
    "Check",
    "CheckError",
    "CheckKind",
    "CheckRefused",
    "CheckResult",
    "Op",
    "code_only",
    "validate_check_sql",
]
