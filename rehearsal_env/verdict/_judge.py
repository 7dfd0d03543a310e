"""Run a scenario's checks on the episode's database and decide the outcome.

A check that cannot be evaluated (its query fails, returns no single value, or its value does not compare
with the wanted one) is recorded with its ``error``. Who answers for it depends on the database it ran on:

- on a database the agent changed, the agent does: the check counts as failed (a goal check not met, a
  hard rule broken), because whatever the agent wrote is what made it fail;
- unless it errors on the untouched snapshot as well: then nothing the agent did could matter, the world's
  check is broken, which validation (``rehearsal world build``) catches before a version is published;
  should it happen in an episode anyway, the episode is not scored (cause ``world``). The snapshot is asked,
  not guessed: a database the agent did not touch is the snapshot; otherwise the errored checks run again
  on a reset database of the same world (``snapshot``). Writing a final answer touches the database too, so
  "did the agent change anything" cannot decide it: a check over ``final_answers`` may error because of
  the answer the agent gave, and a check over another table may error whatever the agent wrote.

Only a database that is gone (the connection or server lost: :func:`~rehearsal_env.backends.DatabaseError`
and the database no longer answers ``SELECT 1``) stops the judging; the episode is then not scored (cause
``database``).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

from ..backends import Database, DatabaseError
from ..checks import Check, CheckError, CheckKind, CheckRefused, CheckResult
from ._verdict import Outcome, decide

Snapshot = Callable[[], AbstractContextManager[Database]]
"""Opens a database of the episode's world at its untouched snapshot (on the episode's backend), for as long as
the ``with`` block lasts."""

MAX_ERROR_CHARS = 2000
"""Longest error text kept in a check's result."""


def alive(db: Database) -> bool:
    """Whether ``db`` still answers (``SELECT 1``): tells a lost connection or server from a query that failed."""
    try:
        return bool(db.query("SELECT 1"))
    except Exception:  # anything at all: the database does not answer
        return False


def run_check(db: Database, check: Check, kind: CheckKind) -> CheckResult:
    """Evaluate one check read-only; an evaluation failure (the database's too) is reported in ``error``."""
    try:
        return _evaluate(db, check, kind)
    except DatabaseError as exc:
        return _errored(check, kind, str(exc))


def _errored(check: Check, kind: CheckKind, error: str) -> CheckResult:
    return CheckResult(check.name, kind, check.op, check.want, None, False, error=error[:MAX_ERROR_CHARS])


def _evaluate(db: Database, check: Check, kind: CheckKind) -> CheckResult:
    """One check; a check that cannot be evaluated is reported in ``error``, a failed database raises."""
    try:
        held = db.check_value(check.sql, check.params)
    except (CheckError, CheckRefused) as exc:
        return _errored(check, kind, str(exc))
    try:
        passed = check.compare(held)
    except (TypeError, ValueError, ArithmeticError) as exc:  # e.g. text held where a number is wanted
        return CheckResult(check.name, kind, check.op, check.want, held, False,
                           error=f"the held value does not compare with the wanted one: {exc}"[:MAX_ERROR_CHARS])
    return CheckResult(check.name, kind, check.op, check.want, held, passed)


def _guarded(db: Database, check: Check, kind: CheckKind, is_alive: Callable[[Database], bool]) -> CheckResult:
    try:
        return _evaluate(db, check, kind)
    except DatabaseError as exc:
        if not is_alive(db):
            raise
        return _errored(check, kind, f"the check's query failed: {exc}")


def judge(
    db: Database, goal_checks: tuple[Check, ...], hard_rules: tuple[Check, ...], *,
    snapshot: Snapshot | None = None, is_alive: Callable[[Database], bool] = alive,
) -> tuple[Outcome, tuple[CheckResult, ...], str | None]:
    """Run every check and return (outcome, results, reason-if-not-scored); see the module docstring.

    ``snapshot``: where an errored check runs again when the agent touched ``db`` (None: nowhere, and the agent
    answers for every errored check on a touched database).

    Raises:
        DatabaseError: the database (or the snapshot's) failed under a check and no longer answers (the caller
            records cause ``database``).
    """
    goal = [_guarded(db, c, "goal", is_alive) for c in goal_checks]
    rules = [_guarded(db, c, "hard_rule", is_alive) for c in hard_rules]
    errored = [(check, result) for check, result in zip((*goal_checks, *hard_rules), (*goal, *rules), strict=True)
               if result.error]
    outcome, reason = decide(goal, rules, defects=_defects(db, errored, snapshot, is_alive))
    return outcome, (*goal, *rules), reason


def _defects(db: Database, errored: list[tuple[Check, CheckResult]], snapshot: Snapshot | None,
             is_alive: Callable[[Database], bool]) -> tuple[CheckResult, ...]:
    """The errored checks that error on the untouched snapshot as well."""
    if not errored:
        return ()
    if not any(db.touched().values()):
        return tuple(result for _, result in errored)
    if snapshot is None:
        return ()
    with snapshot() as base:
        return tuple(result for check, result in errored if _guarded(base, check, result.kind, is_alive).error)
