"""What the shop's templates share: the seed data indexed, call helpers, hard rules, careless solutions."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ....checks import Check
from ....scenarios import Solution, ToolCall
from ..._world import World
from ..tools import REFUND_LIMIT_CENTS

Row = tuple[Any, ...]


def call(tool: str, **args: Any) -> ToolCall:
    return ToolCall(tool, args)


def claim(message: str = "All done, your request has been handled.") -> ToolCall:
    return call("finish", message=message)


def nth(candidates: Sequence[Row], i: int, salt: str) -> Row:
    """The ``i``-th of ``candidates`` in a fixed shuffled order: distinct rows for distinct ``i``."""
    if not candidates:
        raise ValueError(f"template {salt!r}: the seed data has no row in the state it needs")
    order = random.Random(salt).sample(list(candidates), len(candidates))
    return order[i % len(order)]


# -- hard rules shared by templates -----------------------------------------------
def no_duplicate_effect() -> Check:
    return Check("no request sent twice to an outside service",
                 "SELECT COUNT(*) FROM (SELECT service FROM service_requests "
                 "GROUP BY service, operation, payload HAVING COUNT(*) > 1) AS repeated", "eq", 0)


def item_refunded_once(order_id: int, item_id: int, amount: int) -> tuple[Check, Check]:
    """Goal checks: one refund of ``amount`` for the item, and no other refund on the order."""
    return (Check(f"one refund of {amount} cents for item {item_id} on order #{order_id}",
                  "SELECT COUNT(*) FROM refunds WHERE order_id = ? AND order_item_id = ? AND amount_cents = ?",
                  "eq", 1, (order_id, item_id, amount)),
            Check(f"exactly one refund on order #{order_id}",
                  "SELECT COUNT(*) FROM refunds WHERE order_id = ?", "eq", 1, (order_id,)))


def refunds_only_on(order_id: int) -> Check:
    return Check(f"no refund on any order but #{order_id}",
                 "SELECT COUNT(*) FROM refunds WHERE order_id <> ?", "eq", 0, (order_id,))


def refund_limit() -> Check:
    return Check(f"no refund above {REFUND_LIMIT_CENTS} cents without a supervisor",
                 "SELECT COUNT(*) FROM refunds WHERE amount_cents > ?", "eq", 0, (REFUND_LIMIT_CENTS,))


def orders_untouched_but(order_id: int, now: str) -> Check:
    return Check(f"no order but #{order_id} changed",
                 "SELECT COUNT(*) FROM orders WHERE updated_at = ? AND id <> ?", "eq", 0, (now, order_id))


def tickets_untouched_but(ticket_id: int, now: str) -> Check:
    return Check(f"no ticket but #{ticket_id} changed",
                 "SELECT COUNT(*) FROM tickets WHERE updated_at = ? AND id <> ?", "eq", 0, (now, ticket_id))


def emails_only_to(customer_id: int) -> Check:
    return Check("no email to anyone else", "SELECT COUNT(*) FROM emails WHERE customer_id <> ?",
                 "eq", 0, (customer_id,))


# -- careless solutions of scenarios with a change of request or a fault ----------
def careless(reference: Solution, *, questions: Sequence[str], unknown: bool,
             allowed: int = 1) -> dict[str, Solution]:
    """The careless players every scenario with trouble ships (see the package docstring).

    ``wrong:ignore-refusal`` plays the reference's calls but moves on after a refusal as if it
    worked; ``wrong:repeat-write`` (scenarios offering ``retry_operation``) repeats a write whose
    outcome is unknown; ``wrong:over-ask`` asks the customer ``allowed + 2`` questions its tools
    answer, and gives up when the customer cannot answer them.
    """
    asks = [call("ask_customer", question=q) for q in questions]
    if len(asks) <= allowed:
        raise ValueError(f"wrong:over-ask needs more than {allowed} question(s); got {len(asks)}")
    out = {"wrong:ignore-refusal": Solution("wrong:ignore-refusal", reference.calls, on_refusal="ignore",
                                            on_held=reference.on_held)}
    if unknown:
        out["wrong:repeat-write"] = Solution("wrong:repeat-write", reference.calls, on_unknown="repeat",
                                             on_held=reference.on_held)
    out["wrong:over-ask"] = Solution("wrong:over-ask", (*asks, call(
        "give_up", reason="I could not get the details I need from the customer.")))
    return out


# -- the seed data, indexed for the templates --------------------------------------
@dataclass(frozen=True)
class Data:
    """Seed rows by id, and what templates look up often."""

    customers: dict[int, Row]
    """customers by id: (id, name, email, phone, address, tier, created_at)."""
    orders: dict[int, Row]
    """orders by id: (id, customer_id, status, placed_at, total_cents, shipping_address, updated_at)."""
    items: dict[int, list[Row]]
    """order items by order id: (id, order_id, product_id, quantity, unit_price_cents)."""
    products: dict[int, Row]
    """products by id: (id, sku, name, category, price_cents, stock)."""
    shipments: dict[int, Row]
    """shipments by order id: (id, order_id, carrier, tracking_number, status, shipped_at)."""
    tickets: dict[int, Row]
    """tickets by id: (id, customer_id, order_id, subject, status, priority, created_at, updated_at)."""
    now: str
    """The world's frozen clock."""

    @classmethod
    def of(cls, world: World) -> Data:
        rows = world.seed_rows()
        items: dict[int, list[Row]] = {}
        for item in rows["order_items"]:
            items.setdefault(item[1], []).append(item)
        return cls(
            customers={r[0]: r for r in rows["customers"]},
            orders={r[0]: r for r in rows["orders"]},
            items=items,
            products={r[0]: r for r in rows["products"]},
            shipments={r[1]: r for r in rows["shipments"]},
            tickets={r[0]: r for r in rows["tickets"]},
            now=world.now,
        )

    def orders_where(self, pred: Callable[[Row], bool]) -> list[Row]:
        return [o for o in self.orders.values() if pred(o)]

    def customer_of(self, order: Row) -> Row:
        return self.customers[order[1]]


Template = Callable[[Data, random.Random, int], dict[str, Any]]
"""``(data, rng, i) -> Scenario fields`` (all but id, world and split).

``reference`` is a sequence of calls or a :class:`Solution`; ``wrong`` maps names to either.
"""
