"""A test world with one fair scenario and one of each way a scenario can be unfair.

Accounts and transfers as in the tiny world, plus a ``visits`` table, a tool
that writes a fresh random token (so a replay cannot reach the same state) and
a payout tool whose service can be switched off from outside the world (so a
published scenario can break later and be withdrawn on recheck).
"""

from __future__ import annotations

import uuid
from datetime import date
from typing import Any

from tinyworld import ACCOUNTS, TRANSFERS, get_account

from rehearsal_env.checks import Check
from rehearsal_env.scenarios import Scenario, Solution, ToolCall
from rehearsal_env.schema import Table, col
from rehearsal_env.tools import ToolContext, ToolFailed, tool
from rehearsal_env.worlds import Policy, Role, World

VISITS = Table("visits", (col("id", "int"), col("account_id", "int"), col("token")))

SERVICE = {"up": True}
"""The payout service behind ``pay_out_gated``: tests switch it off to break a published scenario."""


def _pay(ctx: ToolContext, account_id: int, amount_cents: int) -> dict[str, Any]:
    ctx.db.execute("UPDATE accounts SET balance_cents = balance_cents - ? WHERE id = ?",
                   (amount_cents, account_id))
    ctx.db.execute("INSERT INTO transfers (account_id, amount_cents, created_at) VALUES (?, ?, ?)",
                   (account_id, amount_cents, ctx.now))
    return {"paid": amount_cents}


@tool("write")
def pay_out(ctx: ToolContext, account_id: int, amount_cents: int) -> dict[str, Any]:
    """Pay money out of an account.

    Args:
        account_id: The account.
        amount_cents: How much, in cents.
    """
    return _pay(ctx, account_id, amount_cents)


@tool("write")
def pay_out_gated(ctx: ToolContext, account_id: int, amount_cents: int) -> dict[str, Any]:
    """Pay money out of an account through the gated payout service.

    Args:
        account_id: The account.
        amount_cents: How much, in cents.
    """
    if not SERVICE["up"]:
        raise ToolFailed("the payout service refused the request")
    return _pay(ctx, account_id, amount_cents)


@tool("write")
def log_visit(ctx: ToolContext, account_id: int) -> dict[str, Any]:
    """Record that the account holder visited, with a fresh visit token.

    Args:
        account_id: The account.
    """
    ctx.db.execute("INSERT INTO visits (account_id, token) VALUES (?, ?)", (account_id, uuid.uuid4().hex))
    return {"logged": True}


TOOLS = (get_account, pay_out, pay_out_gated, log_visit)


def _rows(seed: int, anchor: date) -> dict[str, list[tuple[Any, ...]]]:
    accounts = [(1, "ann", 10_000), (2, "bob", 5_000), (3, "cy", 7_000)]
    return {"accounts": accounts, "transfers": [], "visits": []}


def paid(account: int, amount: int) -> Check:
    return Check(f"one payout of {amount} from #{account}",
                 "SELECT COUNT(*) FROM transfers WHERE account_id = ? AND amount_cents = ?", "eq", 1,
                 (account, amount))


def call(name: str, **args: Any) -> ToolCall:
    return ToolCall(name, args)


DONE = call("finish", message="done")


def scenarios(world: World) -> list[Scenario]:
    def make(sid: str, request: str, goal: tuple[Check, ...], reference: tuple[ToolCall, ...],
             wrong: tuple[Solution, ...] = ()) -> Scenario:
        return Scenario(id=sid, world=world.name, split="dev", role="clerk", category="payout",
                        request=request, goal_checks=goal, hard_rules=(),
                        reference=Solution("reference", reference), wrong=wrong, turn_limit=8)

    pay_ann = (call("get_account", account_id=1), call("pay_out", account_id=1, amount_cents=500), DONE)
    return [
        make("fair", "Pay 5.00 out of account 1.", (paid(1, 500),), pay_ann,
             (Solution("wrong:other-account", (call("pay_out", account_id=2, amount_cents=500), DONE)),)),
        make("impossible-check", "Pay 5.00 out of account 1 and open an account for zed.",
             (paid(1, 500), Check("an account for zed", "SELECT COUNT(*) FROM accounts WHERE owner = 'zed'",
                                  "eq", 1)), pay_ann),
        make("hidden-id", "Pay 5.00 out of my account, I'm cy.", (paid(3, 500),),
             (call("pay_out", account_id=3, amount_cents=500), DONE)),
        make("passes-by-itself", "Pay 5.00 out of account 1.",
             (Check("payouts are never negative", "SELECT COUNT(*) FROM transfers WHERE amount_cents < 0",
                    "eq", 0),), pay_ann),
        make("wrong-not-caught", "Pay 5.00 out of account 1.",
             (Check("a payout from #1", "SELECT COUNT(*) FROM transfers WHERE account_id = 1", "ge", 1),),
             pay_ann,
             (Solution("wrong:pays-fifty", (call("pay_out", account_id=1, amount_cents=5000), DONE)),)),
        make("nondeterministic", "Log my visit to account 1.",
             (Check("a visit on #1", "SELECT COUNT(*) FROM visits WHERE account_id = 1", "eq", 1),),
             (call("log_visit", account_id=1), DONE)),
        make("gated", "Pay 5.00 out of account 1 (gated).", (paid(1, 500),),
             (call("get_account", account_id=1), call("pay_out_gated", account_id=1, amount_cents=500), DONE),
             (Solution("wrong:first-call-only", (call("get_account", account_id=1), DONE)),)),
    ]


EXPECTED_KEPT_OUT = {
    "impossible-check": "the reference solution does not pass",
    "hidden-id": "a needed fact is not reachable",
    "passes-by-itself": "the checks do not fail when nothing is done",
    "wrong-not-caught": "a wrong solution is not caught",
    "nondeterministic": "a replay gives a different result",
}
"""Scenario id -> the head of the reason it must be kept out for."""


def build_world() -> World:
    return World(
        name="unfair", description="Accounts, payouts and visits; one fair scenario and unfair ones.",
        tables=(ACCOUNTS, TRANSFERS, VISITS), tools=TOOLS,
        roles=(Role("clerk", "Pays out and logs visits.", tuple(t.name for t in TOOLS)),),
        policies=(Policy("Pay out only from the account asked about.", ()),),
        data_anchor=date(2026, 1, 15), seed=1, generate_rows=_rows, generate_scenarios=scenarios,
    )
