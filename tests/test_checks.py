"""Checks: a single read-only SELECT, one value, compared by one of six operators."""

from __future__ import annotations

import pytest

from rehearsal_env.backends import open_database
from rehearsal_env.checks import Check, CheckError, CheckRefused, validate_check_sql
from rehearsal_env.verdict._judge import run_check


@pytest.mark.parametrize("sql", [
    "SELECT COUNT(*) FROM accounts",
    "select 1",
    "WITH t AS (SELECT balance_cents FROM accounts) SELECT SUM(balance_cents) FROM t",
    "SELECT COUNT(*) FROM accounts WHERE owner = 'a;b'",
    "SELECT COUNT(*) FROM accounts;",
    "SELECT replace(owner, 'a', 'b') FROM accounts WHERE id = 1",
])
def test_single_read_only_statements_are_accepted(sql: str) -> None:
    validate_check_sql(sql)


@pytest.mark.parametrize(("sql", "says"), [
    ("SELECT 1; DELETE FROM accounts", "more than one statement"),
    ("SELECT 1; SELECT 2", "more than one statement"),
    ("DELETE FROM accounts", "starts with 'DELETE'"),
    ("UPDATE accounts SET balance_cents = 0", "starts with 'UPDATE'"),
    ("INSERT INTO transfers VALUES (1, 1, 1, 'x')", "starts with 'INSERT'"),
    ("DROP TABLE accounts", "starts with 'DROP'"),
    ("PRAGMA query_only = OFF", "starts with 'PRAGMA'"),
    ("WITH d AS (DELETE FROM accounts RETURNING id) SELECT COUNT(*) FROM d", "'DELETE'"),
    ("SELECT * INTO copy FROM accounts", "'INTO'"),
    ("", "empty"),
])
def test_other_statements_are_refused_with_a_clear_message(sql: str, says: str) -> None:
    with pytest.raises(CheckRefused, match=says):
        Check("c", sql, "eq", 0)


def test_parameters_must_match_placeholders() -> None:
    with pytest.raises(CheckRefused, match="1 '\\?' placeholder"):
        Check("c", "SELECT COUNT(*) FROM accounts WHERE id = ?", "eq", 1)
    with pytest.raises(CheckRefused, match="op must be one of"):
        Check("c", "SELECT 1", "like", 1)  # type: ignore[arg-type]


@pytest.mark.parametrize(("op", "held", "want", "passed"), [
    ("eq", 1, 1, True), ("ne", 1, 1, False), ("gt", 2, 1, True), ("ge", 1, 1, True),
    ("lt", 1, 2, True), ("le", 3, 2, False), ("eq", None, None, True), ("gt", None, 1, False),
])
def test_compare(op: str, held: object, want: object, passed: bool) -> None:
    assert Check("c", "SELECT 1", op, want).compare(held) is passed  # type: ignore[arg-type]


def test_zero_rows_or_several_values_are_errors(tiny_world) -> None:
    db = open_database(tiny_world)
    with pytest.raises(CheckError, match="exactly one row; it returned 0"):
        db.check_value("SELECT id FROM accounts WHERE id = ?", (99,))
    with pytest.raises(CheckError, match="exactly one row; it returned 3"):
        db.check_value("SELECT id FROM accounts")
    with pytest.raises(CheckError, match="exactly one column; it returned 2"):
        db.check_value("SELECT id, owner FROM accounts WHERE id = 1")
    result = run_check(db, Check("rows", "SELECT id FROM accounts", "eq", 1), "goal")
    assert result.error and not result.passed and result.held is None


def test_values_are_parameters_not_text(tiny_world) -> None:
    db = open_database(tiny_world)
    sneaky = "ann' OR '1'='1"
    assert db.check_value("SELECT COUNT(*) FROM accounts WHERE owner = ?", (sneaky,)) == 0
    assert db.check_value("SELECT COUNT(*) FROM accounts WHERE owner = ?", ("ann",)) == 1


def test_a_check_cannot_write_and_writes_work_again_after(tiny_world) -> None:
    db = open_database(tiny_world)
    with pytest.raises(CheckRefused):
        db.check_value("DELETE FROM accounts")
    assert db.check_value("SELECT COUNT(*) FROM accounts") == 3
    with db.transaction():
        db.execute("UPDATE accounts SET balance_cents = 1 WHERE id = 1")
    assert db.check_value("SELECT balance_cents FROM accounts WHERE id = 1") == 1


@pytest.mark.parametrize("sql", [
    "SELECT COUNT(*) FROM orders WHERE placed_at > date('now', '-30 days')",
    "SELECT COUNT(*) FROM orders WHERE placed_at > CURRENT_DATE",
    "SELECT now()",
    "SELECT COUNT(*) FROM orders WHERE placed_at > 'today'",
])
def test_a_check_that_reads_the_server_clock_is_refused_on_every_backend(sql: str) -> None:
    with pytest.raises(CheckRefused, match="clock is frozen"):
        Check("recent", sql, "eq", 0)
