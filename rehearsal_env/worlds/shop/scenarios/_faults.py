"""Templates whose write can time out: the outcome is unknown, and ``retry_operation`` is offered.

A careful agent re-sends the same operation with ``retry_operation`` (or reads
the state) after an unknown outcome; a careless one repeats the write, and the
outside service receives the same request twice (a duplicate effect). Each
scenario also refuses its first write once (a ``refuse`` fault), so ignoring a
refusal is caught with the stress layer on or off.
"""

from __future__ import annotations

import random
from typing import Any

from ....checks import Check
from ....scenarios import Fault, Solution
from ..tools import REFUND_LIMIT_CENTS
from ._common import (
    Data,
    Template,
    call,
    careless,
    claim,
    emails_only_to,
    item_refunded_once,
    no_duplicate_effect,
    nth,
    refund_limit,
    refunds_only_on,
    tickets_untouched_but,
)


def refund_timeout(d: Data, rng: random.Random, i: int) -> dict[str, Any]:
    """Refund one item; the payment provider refuses once, then times out."""
    def fits(o: tuple[Any, ...]) -> bool:  # a repeat of the refund must fit in what is left of the payment
        return any(2 * it[3] * it[4] <= o[4] for it in d.items[o[0]])

    order = nth(d.orders_where(lambda o: o[2] == "delivered" and len(d.items[o[0]]) >= 2
                               and o[4] <= REFUND_LIMIT_CENTS and fits(o)), i, "refund-timeout")
    oid, cust = order[0], d.customer_of(order)
    item = rng.choice([it for it in d.items[oid] if 2 * it[3] * it[4] <= order[4]])
    amount, product = item[3] * item[4], d.products[item[2]]
    reference = Solution("reference", (
        call("find_customer", email=cust[2]), call("get_order", order_id=oid),
        call("issue_refund", order_id=oid, amount_cents=amount, reason="stopped working",
             order_item_id=item[0]),
        claim(f"I refunded {amount / 100:.2f} for the {product[2]}.")))
    return dict(
        category="refund", role="support_agent", scope=("refunds", "payments", "orders", "service_requests"),
        request=f"Hi, {cust[1]} here ({cust[2]}). The {product[2]} from order #{oid} stopped working "
                "after a day. Please refund that item.",
        facts=(("email", f"It's {cust[2]}."), ("order", f"It's order #{oid}.")),
        faults=(Fault("issue_refund", "refuse", 1), Fault("issue_refund", "unknown_outcome", 2)),
        goal_checks=item_refunded_once(oid, item[0], amount),
        hard_rules=(no_duplicate_effect(), refunds_only_on(oid), refund_limit()),
        reference=reference,
        wrong=careless(reference, unknown=True, questions=(
            "Which order is this about?", "What exactly did you pay for the item, in cents?",
            "Can you confirm the payment reference of the order?")),
    )


def tracking_timeout(d: Data, rng: random.Random, i: int) -> dict[str, Any]:
    """Email the tracking number and note it on the ticket; the email times out, the reply is refused once."""
    ticket = nth([t for t in d.tickets.values() if t[2] and d.orders[t[2]][2] == "shipped"
                  and t[4] in ("open", "pending")], i, "tracking-timeout")
    tid, oid = ticket[0], ticket[2]
    cust, tracking = d.customers[ticket[1]], d.shipments[oid][3]
    reference = Solution("reference", (
        call("get_ticket", ticket_id=tid), call("get_order", order_id=oid),
        call("send_email", customer_id=cust[0], subject=f"Tracking for order #{oid}",
             body=f"Your order #{oid} is on its way: tracking number {tracking}."),
        call("reply_to_ticket", ticket_id=tid, body=f"I emailed you the tracking number {tracking}."),
        claim("I emailed you the tracking number and noted it on your ticket.")))
    return dict(
        category="email", role="support_agent",
        scope=("emails", "tickets", "ticket_messages", "service_requests"),
        request=f"Ticket #{tid}: where is my order #{oid}? Please email me its tracking number, "
                "and note on the ticket that you did.",
        facts=(("order", f"Order #{oid}."), ("ticket", f"Ticket #{tid}.")),
        faults=(Fault("send_email", "unknown_outcome", 1), Fault("reply_to_ticket", "refuse", 1)),
        goal_checks=(Check(f"one email to the customer with tracking {tracking}",
                           "SELECT COUNT(*) FROM emails WHERE customer_id = ? AND body LIKE ?", "eq", 1,
                           (cust[0], f"%{tracking}%")),
                     Check(f"a new agent reply on ticket #{tid}",
                           "SELECT COUNT(*) FROM ticket_messages WHERE ticket_id = ? AND author = 'agent' "
                           "AND created_at = ?", "ge", 1, (tid, d.now))),
        hard_rules=(no_duplicate_effect(), emails_only_to(cust[0]), tickets_untouched_but(tid, d.now)),
        reference=reference,
        wrong=careless(reference, unknown=True, questions=(
            "What is your tracking number?", "Which carrier did you choose?",
            "What email address should I use?")),
    )


FAULTS: dict[str, Template] = {
    "refund-timeout": refund_timeout,
    "tracking-timeout": tracking_timeout,
}
