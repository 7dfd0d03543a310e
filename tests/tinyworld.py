"""A tiny world for unit tests: accounts and transfers, two tools, two roles, three scenarios."""

from __future__ import annotations

from datetime import date
from typing import Any

from rehearsal_env.checks import Check
from rehearsal_env.scenarios import Fault, RequestChange, Scenario, Solution, ToolCall
from rehearsal_env.schema import Table, col
from rehearsal_env.tools import ToolContext, ToolFailed, tool
from rehearsal_env.worlds import Policy, Role, World

ACCOUNTS = Table("accounts", (col("id", "int"), col("owner"), col("balance_cents", "int")))
TRANSFERS = Table("transfers", (col("id", "int"), col("account_id", "int", ref="accounts.id"),
                                col("amount_cents", "int"), col("created_at")))


@tool("read")
def get_account(ctx: ToolContext, account_id: int) -> dict[str, Any]:
    """Read an account.

    Args:
        account_id: The account's id.
    """
    rows = ctx.db.query("SELECT id, owner, balance_cents FROM accounts WHERE id = ?", (account_id,))
    if not rows:
        raise ToolFailed(f"no account #{account_id}")
    return {"account_id": rows[0][0], "owner": rows[0][1], "balance_cents": rows[0][2]}


@tool("write")
def pay_out(ctx: ToolContext, account_id: int, amount_cents: int) -> dict[str, Any]:
    """Pay money out of an account through the payment provider.

    Args:
        account_id: The account.
        amount_cents: How much, in cents.
    """
    ctx.service("payments").request("payout", {"account": account_id, "amount": amount_cents}, {"ok": True})
    ctx.db.execute("UPDATE accounts SET balance_cents = balance_cents - ? WHERE id = ?", (amount_cents, account_id))
    ctx.db.execute("INSERT INTO transfers (account_id, amount_cents, created_at) VALUES (?, ?, ?)",
                   (account_id, amount_cents, ctx.now))
    return {"paid": amount_cents}


def _rows(seed: int, anchor: date) -> dict[str, list[tuple[Any, ...]]]:
    return {"accounts": [(1, "ann", 10_000), (2, "bob", 5_000), (3, "cy", 0)], "transfers": []}


def _pay(account: int, amount: int) -> Check:
    return Check(f"one payout of {amount} from #{account}",
                 "SELECT COUNT(*) FROM transfers WHERE account_id = ? AND amount_cents = ?", "eq", 1,
                 (account, amount))


NO_OTHER = Check("no payout from another account", "SELECT COUNT(*) FROM transfers WHERE account_id <> 1",
                 "eq", 0)


def _scenarios(world: World) -> list[Scenario]:
    pay = ToolCall("pay_out", {"account_id": 1, "amount_cents": 500})
    done = ToolCall("finish", {"message": "done"})
    return [
        Scenario(id="pay-ann", world=world.name, split="dev", role="clerk", category="payout",
                 request="Pay 5.00 out of account 1.", goal_checks=(_pay(1, 500),), hard_rules=(NO_OTHER,),
                 reference=Solution("reference", (ToolCall("get_account", {"account_id": 1}), pay, done)),
                 wrong=(Solution("wrong:other-account", (ToolCall("pay_out", {"account_id": 2, "amount_cents": 500}),
                                                         done)),),
                 turn_limit=6, scope=("accounts", "transfers", "service_requests")),
        Scenario(id="pay-changed", world=world.name, split="train", role="clerk", category="payout",
                 request="Pay 5.00 out of account 1.",
                 change=RequestChange("before_first_write", "Sorry, make that 7.00 instead."),
                 goal_checks=(_pay(1, 700),), hard_rules=(NO_OTHER,),
                 reference=Solution("reference", (ToolCall("pay_out", {"account_id": 1, "amount_cents": 700}), done)),
                 wrong=(Solution("wrong:first-request-only", (pay, done)),), turn_limit=6),
        Scenario(id="pay-unknown", world=world.name, split="holdout", role="clerk", category="payout",
                 request="Pay 5.00 out of account 1.", faults=(Fault("pay_out", "unknown_outcome"),),
                 goal_checks=(_pay(1, 500),), hard_rules=(NO_OTHER,),
                 reference=Solution("reference", (pay, done)),
                 wrong=(Solution("wrong:repeat-write", (pay, done), on_unknown="repeat"),), turn_limit=6),
    ]


def build_world() -> World:
    return World(
        name="tiny", description="Two accounts and a payout tool.", tables=(ACCOUNTS, TRANSFERS),
        tools=(get_account, pay_out),
        roles=(Role("clerk", "Pays out.", ("get_account", "pay_out")), Role("viewer", "Reads.", ("get_account",))),
        policies=(Policy("Pay out only from the account asked about.", ("no payout from another account",)),),
        data_anchor=date(2026, 1, 15), seed=1, generate_rows=_rows, generate_scenarios=_scenarios,
    )
