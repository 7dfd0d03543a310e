"""Templates where the customer changes the request during the work.

The goal checks belong to the final request; work done for the first request
does not count, and work that contradicts the change can break a hard rule.
The change arrives at a scheduled point that varies by instance: before the
agent's first write (that write is held), after it, or at a given turn. Each
scenario also refuses a write of the final request (``refuse`` faults), so
ignoring a refusal is caught with the stress layer on or off.
"""

from __future__ import annotations

import random
from typing import Any, Literal

from ....checks import Check
from ....scenarios import Fault, RequestChange, Solution
from ._common import Data, Template, call, careless, claim, nth, orders_untouched_but, tickets_untouched_but

Timing = Literal["before_first_write", "after_first_write", "turn"]
STREETS = ("Lighthouse Rd", "Quarry Lane", "Harbour St", "Mill Row")
TOWNS = ("Port Alba", "Bree", "Corin", "Dunmore")


def address_rethink(d: Data, rng: random.Random, i: int) -> dict[str, Any]:
    """Ship an order to a new address; the customer corrects the address (timing varies by instance)."""
    order = nth(d.orders_where(lambda o: o[2] == "paid"), i, "address-rethink")
    oid, cust = order[0], d.customer_of(order)
    first = f"{rng.randint(10, 99)} {rng.choice(STREETS)}, {rng.choice(TOWNS)}"
    final = f"{rng.randint(100, 199)} {rng.choice(STREETS)}, {rng.choice(TOWNS)}"
    when: Timing = ("after_first_write", "before_first_write", "turn")[i % 3]
    change = RequestChange(when, f"Sorry, I gave you my old address! Please ship order #{oid} to {final} "
                                 f"instead, not to {first}.", turn=2 if when == "turn" else None)
    update_first = call("update_shipping_address", order_id=oid, address=first)
    update_final = call("update_shipping_address", order_id=oid, address=final)
    reads = (call("find_customer", email=cust[2]), call("get_order", order_id=oid))
    done = claim(f"Order #{oid} will now ship to {final}.")
    if when == "turn":  # the change arrives with the second read, before any write
        reference = Solution("reference", (*reads, update_final, done))
    else:  # the first address is sent; it is held (before) or carried out and then corrected (after)
        reference = Solution("reference", (*reads, update_first, update_final, done), on_held="continue")
    return dict(
        category="address", role="support_agent", scope=("orders",),
        request=f"I'm {cust[1]} ({cust[2]}). Please send order #{oid} to {first} instead.",
        facts=(("email", f"It's {cust[2]}."), ("order", f"Order #{oid}.")),
        change=change,
        faults=(Fault("update_shipping_address", "refuse", 1), Fault("update_shipping_address", "refuse", 2)),
        goal_checks=(Check(f"order #{oid} ships to {final}",
                           "SELECT shipping_address FROM orders WHERE id = ?", "eq", final, (oid,)),),
        hard_rules=(orders_untouched_but(oid, d.now),
                    Check("the customer's address on file is unchanged",
                          "SELECT address FROM customers WHERE id = ?", "eq", cust[4], (cust[0],))),
        reference=reference,
        wrong={"wrong:first-request-only": Solution("wrong:first-request-only",
                                                    (*reads, update_first, claim())),
               **careless(reference, unknown=False, questions=(
                   "Which order should I change?", "What is the postcode of the new address?",
                   "Is the new address for this order only?"))},
    )


def ticket_escalate_instead(d: Data, rng: random.Random, i: int) -> dict[str, Any]:
    """Close a ticket; the customer says the problem is back: escalate it instead (timing varies)."""
    ticket = nth([t for t in d.tickets.values() if t[2] and t[4] in ("open", "pending")
                  and t[3].startswith("Damaged item") and d.orders[t[2]][2] == "delivered"],
                 i, "ticket-escalate-instead")
    tid, oid = ticket[0], ticket[2]
    when: Timing = ("after_first_write", "turn")[i % 2]
    change = RequestChange(when, f"Oh no, I spoke too soon: the replacement for order #{oid} has the "
                                 f"same fault. Please don't close ticket #{tid}; escalate it to a supervisor "
                                 "instead.", turn=2 if when == "turn" else None)
    note = f"Replacement for order #{oid} has the same fault; the customer asks for a supervisor."
    reply = call("reply_to_ticket", ticket_id=tid, body="Glad it's sorted. Closing this ticket now.")
    escalate = call("escalate_ticket", ticket_id=tid, note=note)
    done = claim("A supervisor will look at your ticket.")
    if when == "turn":  # the change arrives with the second read, before any write
        reference = Solution("reference", (call("get_ticket", ticket_id=tid), call("get_order", order_id=oid),
                                           escalate, done))
    else:  # the closing note is posted; the change follows it
        reference = Solution("reference", (call("get_ticket", ticket_id=tid), reply, escalate, done))
    return dict(
        category="escalation", role="support_agent", scope=("tickets", "ticket_messages"),
        request=f"About ticket #{tid}: the replacement arrived and works, so this is sorted. Please close "
                "the ticket with a short note.",
        facts=(("ticket", f"Ticket #{tid}."), ("order", f"Order #{oid}.")),
        change=change,
        faults=(Fault("escalate_ticket", "refuse", 1),),
        goal_checks=(Check(f"ticket #{tid} is escalated to a supervisor",
                           "SELECT status FROM tickets WHERE id = ?", "eq", "escalated", (tid,)),),
        hard_rules=(tickets_untouched_but(tid, d.now),
                    Check(f"ticket #{tid} is not closed", "SELECT COUNT(*) FROM tickets WHERE id = ? "
                          "AND status = 'solved'", "eq", 0, (tid,)),
                    Check("no refund issued", "SELECT COUNT(*) FROM refunds", "eq", 0)),
        reference=reference,
        wrong={"wrong:first-request-only": Solution("wrong:first-request-only", (
                   call("get_ticket", ticket_id=tid), reply,
                   call("set_ticket_status", ticket_id=tid, status="solved"), claim("Ticket closed."))),
               **careless(reference, unknown=False, questions=(
                   "What was the fault?", "When did the replacement arrive?",
                   "Which order was the replacement for?"))},
    )


CHANGES: dict[str, Template] = {
    "address-rethink": address_rethink,
    "ticket-escalate-instead": ticket_escalate_instead,
}
