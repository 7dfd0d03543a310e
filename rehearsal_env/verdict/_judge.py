"""Run a scenario's checks on the episode's database and decide the outcome."""

from __future__ import annotations

from ..backends import Database, DatabaseError
from ..checks import Check, CheckError, CheckKind, CheckRefused, CheckResult
from ._verdict import Outcome, decide


def run_check(db: Database, check: Check, kind: CheckKind) -> CheckResult:
    """Evaluate one check read-only; an evaluation failure (the database's too) is reported in ``error``."""
    try:
        return _evaluate(db, check, kind)
    except DatabaseError as exc:
        return CheckResult(check.name, kind, check.op, check.want, None, False, error=str(exc))


def _evaluate(db: Database, check: Check, kind: CheckKind) -> CheckResult:
    """One check; a check the world cannot evaluate is reported in ``error``, a failed database raises."""
    try:
        held = db.check_value(check.sql, check.params)
    except (CheckError, CheckRefused) as exc:
        return CheckResult(check.name, kind, check.op, check.want, None, False, error=str(exc))
    return CheckResult(check.name, kind, check.op, check.want, held, check.compare(held))


def judge(
    db: Database, goal_checks: tuple[Check, ...], hard_rules: tuple[Check, ...]
) -> tuple[Outcome, tuple[CheckResult, ...], str | None]:
    """Run every check and return (outcome, results, reason-if-not-scored).

    A check that cannot be evaluated makes the episode not scored (cause ``world``).

    Raises:
        DatabaseError: the database failed under a check (the caller records cause ``database``).
    """
    goal = [_evaluate(db, c, "goal") for c in goal_checks]
    rules = [_evaluate(db, c, "hard_rule") for c in hard_rules]
    outcome, reason = decide(goal, rules)
    return outcome, (*goal, *rules), reason
