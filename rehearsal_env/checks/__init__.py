"""Checks: single read-only SQL statements whose value decides an outcome, and what a statement is."""

from ._agent import AGENT_FUNCTIONS, agent_bounds_refusal, agent_sql_refusal
from ._bounds import (
    MAX_COMPOUND_SELECTS,
    MAX_EXPR_DEPTH,
    MAX_FUNCTION_ARGS,
    MAX_JOIN_TABLES,
    MAX_LIKE_PATTERN_BYTES,
    MAX_PARSER_NESTING,
    MAX_SQL_BYTES,
    MAX_TERMS,
)
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
    "MAX_COMPOUND_SELECTS",
    "MAX_EXPR_DEPTH",
    "MAX_FUNCTION_ARGS",
    "MAX_JOIN_TABLES",
    "MAX_LIKE_PATTERN_BYTES",
    "MAX_PARSER_NESTING",
    "MAX_SQL_BYTES",
    "MAX_TERMS",
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
    "agent_bounds_refusal",
    "agent_sql_refusal",
    "parse_statement",
    "screen_check_sql",
    "size_refusal",
    "validate_check_sql",
]
