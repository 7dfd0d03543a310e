"""Checks: single read-only SQL statements whose value decides an outcome, and what a statement is."""

from ._agent import AGENT_FUNCTIONS, agent_sql_refusal
from ._check import OPS, Check, CheckKind, CheckResult, Op
from ._errors import CheckError, CheckRefused
from ._statement import (
    CLOCK_FUNCTIONS,
    CLOCK_KEYWORDS,
    CLOCK_WORDS,
    SqlDialect,
    Statement,
    parse_statement,
    screen_check_sql,
    size_refusal,
    validate_check_sql,
)

__all__ = [
    "AGENT_FUNCTIONS",
    "CLOCK_FUNCTIONS",
    "CLOCK_KEYWORDS",
    "CLOCK_WORDS",
    "OPS",
    "Check",
    "CheckError",
    "CheckKind",
    "CheckRefused",
    "CheckResult",
    "Op",
    "SqlDialect",
    "Statement",
    "agent_sql_refusal",
    "parse_statement",
    "screen_check_sql",
    "size_refusal",
    "validate_check_sql",
]
