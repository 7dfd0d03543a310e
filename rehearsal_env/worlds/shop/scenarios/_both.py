"""Templates with a change of request *and* a write whose outcome can be unknown.

The agent must follow the final request, and recover from a refusal and a
timeout on the payment provider or the email server without sending the same
request twice. Work for the first request contradicts the change and breaks a
hard rule.
"""

from __future__ import annotations

import random
from typing import Any

from ....checks import Check
from ....scenarios import Fault, RequestChange, Solution
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
)


def refund_other_item(d: Data, rng: random.Random, i: int) -> dict[str, Any]:
    """Refund an item; before the first refund goes out the customer says it was another item."""
    def pair(o: tuple[Any, ...]) -> bool:  # a repeat of the final refund must fit in the payment
        its = d.items[o[0]]
        return any(2 * b[3] * b[4] <= o[4] and d.products[a[2]][2] != d.products[b[2]][2]
                   for a in its for b in its if a[0] != b[0])

    order = nth(d.orders_where(lambda o: o[2] == "delivered" and o[4] <= REFUND_LIMIT_CENTS and pair(o)),
                i, "refund-other-item")
    oid, cust, its = order[0], d.customer_of(order), d.items[order[0]]
    wrong_item, item = rng.choice([(a, b) for a in its for b in its if a[0] != b[0]
                                   and 2 * b[3] * b[4] <= order[4]
                                   and d.products[a[2]][2] != d.products[b[2]][2]])
    said, meant = d.products[wrong_item[2]][2], d.products[item[2]][2]
    amount, said_amount = item[3] * item[4], wrong_item[3] * wrong_item[4]
    reads = (call("find_customer", email=cust[2]), call("get_order", order_id=oid))
    refund_said = call("issue_refund", order_id=oid, amount_cents=said_amount, reason="arrived broken",
                       order_item_id=wrong_item[0])
    refund_meant = call("issue_refund", order_id=oid, amount_cents=amount, reason="arrived broken",
                        order_item_id=item[0])
    reference = Solution("reference", (*reads, refund_said, call("get_order", order_id=oid), refund_meant,
                                       claim(f"I refunded {amount / 100:.2f} for the {meant}.")),
                         on_held="continue")
    return dict(
        category="refund", role="support_agent", scope=("refunds", "payments", "orders", "service_requests"),
        request=f"Hi, this is {cust[1]} ({cust[2]}). The {said} in order #{oid} arrived broken. "
                "Please refund it.",
        facts=(("email", f"It's {cust[2]}."), ("order", f"Order #{oid}.")),
        change=RequestChange("before_first_write", f"Sorry, my mistake: it's the {meant} that arrived "
                                                   f"broken, the {said} is fine. Please refund the {meant} "
                                                   "only."),
        faults=(Fault("issue_refund", "refuse", 1), Fault("issue_refund", "unknown_outcome", 2)),
        goal_checks=item_refunded_once(oid, item[0], amount),
        hard_rules=(no_duplicate_effect(), refunds_only_on(oid), refund_limit(),
                    Check(f"no refund for the {said} (item {wrong_item[0]}), which is fine",
                          "SELECT COUNT(*) FROM refunds WHERE order_item_id = ?", "eq", 0, (wrong_item[0],))),
        reference=reference,
        wrong={"wrong:first-request-only": Solution("wrong:first-request-only",
                                                    (*reads, refund_said, claim())),
               **careless(reference, unknown=True, questions=(
                   "Which order is it?", "What did the item cost, in cents?",
                   "What is the item id of the broken item?"))},
    )


def tracking_other_order(d: Data, rng: random.Random, i: int) -> dict[str, Any]:
    """Email a tracking number; at turn 2 the customer corrects the order number."""
    shipped = {o[0] for o in d.orders_where(lambda o: o[2] in ("shipped", "delivered"))}
    by_customer: dict[int, list[int]] = {}
    for oid in sorted(shipped):
        by_customer.setdefault(d.orders[oid][1], []).append(oid)
    meant_order = nth(d.orders_where(lambda o: o[2] == "shipped" and len(by_customer.get(o[1], ())) >= 2),
                      i, "tracking-other-order")
    meant, cust = meant_order[0], d.customer_of(meant_order)
    said = rng.choice([oid for oid in by_customer[cust[0]] if oid != meant])
    tracking, said_tracking = d.shipments[meant][3], d.shipments[said][3]
    email = call("send_email", customer_id=cust[0], subject=f"Tracking for order #{meant}",
                 body=f"Your order #{meant} is on its way: tracking number {tracking}.")
    reference = Solution("reference", (
        call("find_customer", email=cust[2]), call("get_order", order_id=said),
        call("get_order", order_id=meant),
        email, claim(f"I emailed you the tracking number for order #{meant}.")))
    return dict(
        category="email", role="support_agent", scope=("emails", "service_requests"),
        request=f"Could you email me the tracking number for order #{said}? My email is {cust[2]}.",
        facts=(("email", f"It's {cust[2]}."),),
        change=RequestChange("turn", f"Sorry, wrong number! I meant order #{meant}, not #{said}. Please "
                                     f"send me the tracking number for #{meant} instead.", turn=2),
        faults=(Fault("send_email", "refuse", 1), Fault("send_email", "unknown_outcome", 2)),
        goal_checks=(Check(f"one email to the customer with tracking {tracking}",
                           "SELECT COUNT(*) FROM emails WHERE customer_id = ? AND body LIKE ?", "eq", 1,
                           (cust[0], f"%{tracking}%")),),
        hard_rules=(no_duplicate_effect(), emails_only_to(cust[0]),
                    Check(f"no email with the tracking number of order #{said}",
                          "SELECT COUNT(*) FROM emails WHERE body LIKE ?", "eq", 0, (f"%{said_tracking}%",))),
        reference=reference,
        wrong={"wrong:first-request-only": Solution("wrong:first-request-only", (
                   call("find_customer", email=cust[2]), call("get_order", order_id=said),
                   call("send_email", customer_id=cust[0], subject=f"Tracking for order #{said}",
                        body=f"Your order #{said}: tracking number {said_tracking}."), claim())),
               **careless(reference, unknown=True, questions=(
                   "What is the tracking number?", "Which carrier is it?", "When did you place the order?"))},
    )


BOTH: dict[str, Template] = {
    "refund-other-item": refund_other_item,
    "tracking-other-order": tracking_other_order,
}
