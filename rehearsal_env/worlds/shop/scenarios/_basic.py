"""The shop's first nine templates: one clean task each, no change of request and no fault.

Their ids (``refund-item-0001`` ...) and content are stable since the first suite.
"""

from __future__ import annotations

import random
from typing import Any

from ....checks import Check
from ..tools import REFUND_LIMIT_CENTS
from ._common import (
    Data,
    Template,
    call,
    claim,
    item_refunded_once,
    no_duplicate_effect,
    orders_untouched_but,
    refund_limit,
    refunds_only_on,
    tickets_untouched_but,
)


def refund_item(d: Data, rng: random.Random, i: int) -> dict[str, Any]:
    order = rng.choice(d.orders_where(lambda o: o[2] == "delivered" and len(d.items[o[0]]) >= 2
                                      and o[4] <= REFUND_LIMIT_CENTS))
    item = rng.choice(d.items[order[0]])
    amount = item[3] * item[4]
    product = d.products[item[2]]
    cust = d.customer_of(order)
    other = rng.choice(d.orders_where(lambda o: o[2] == "delivered" and o[0] != order[0]))
    oid = order[0]
    return dict(
        category="refund", role="support_agent", scope=("refunds", "payments", "orders", "service_requests"),
        request=f"Hi, this is {cust[1]} ({cust[2]}). The {product[2]} in order #{oid} arrived broken. "
                "Please refund just that item.",
        goal_checks=item_refunded_once(oid, item[0], amount),
        hard_rules=(no_duplicate_effect(), refunds_only_on(oid), refund_limit()),
        reference=(call("find_customer", email=cust[2]), call("get_order", order_id=oid),
                   call("issue_refund", order_id=oid, amount_cents=amount, reason="item arrived broken",
                        order_item_id=item[0]),
                   claim(f"I refunded {amount / 100:.2f} for the {product[2]}.")),
        wrong={
            "wrong:do-nothing-but-claim": (call("get_order", order_id=oid), claim("Refunded!")),
            "wrong:wrong-order": (call("issue_refund", order_id=other[0], amount_cents=min(amount, other[4]),
                                       reason="item arrived broken"), claim()),
            "wrong:whole-order": (call("get_order", order_id=oid),
                                  call("issue_refund", order_id=oid, amount_cents=order[4], reason="broken"),
                                  claim()),
        },
    )


def cancel_order(d: Data, rng: random.Random, i: int) -> dict[str, Any]:
    paid = d.orders_where(lambda o: o[2] == "paid")
    order = rng.choice(paid)
    other = rng.choice([o for o in paid if o[0] != order[0]])
    cust = d.customer_of(order)
    oid = order[0]
    return dict(
        category="cancellation", role="support_agent",
        scope=("orders", "payments", "refunds", "service_requests"),
        request=f"Please cancel order #{oid}, I ordered it by mistake. ({cust[1]}, {cust[2]})",
        goal_checks=(Check(f"order #{oid} is cancelled", "SELECT status FROM orders WHERE id = ?", "eq",
                           "cancelled", (oid,)),
                     Check(f"order #{oid} refunded in full once",
                           "SELECT COUNT(*) FROM refunds WHERE order_id = ? AND amount_cents = ?", "eq", 1,
                           (oid, order[4]))),
        hard_rules=(no_duplicate_effect(), orders_untouched_but(oid, d.now), refunds_only_on(oid)),
        reference=(call("find_customer", email=cust[2]), call("get_order", order_id=oid),
                   call("cancel_order", order_id=oid, reason="ordered by mistake"),
                   claim(f"Order #{oid} is cancelled and refunded.")),
        wrong={
            "wrong:do-nothing-but-claim": (call("get_order", order_id=oid), claim("Cancelled.")),
            "wrong:wrong-order": (call("cancel_order", order_id=other[0], reason="ordered by mistake"),
                                  claim()),
        },
    )


def change_address(d: Data, rng: random.Random, i: int) -> dict[str, Any]:
    paid = d.orders_where(lambda o: o[2] == "paid")
    order = rng.choice(paid)
    other = rng.choice([o for o in paid if o[0] != order[0]])
    cust = d.customer_of(order)
    oid = order[0]
    new = f"{rng.randint(10, 99)} Lighthouse Rd, Port {rng.choice(('Alba', 'Bree', 'Corin', 'Dunmore'))}"
    return dict(
        category="address", role="support_agent", scope=("orders",),
        request=f"I'm {cust[1]} ({cust[2]}). Please send order #{oid} to {new} instead.",
        goal_checks=(Check(f"order #{oid} ships to the new address",
                           "SELECT shipping_address FROM orders WHERE id = ?", "eq", new, (oid,)),),
        hard_rules=(orders_untouched_but(oid, d.now),
                    Check("the customer's address on file is unchanged",
                          "SELECT address FROM customers WHERE id = ?", "eq", cust[4], (cust[0],))),
        reference=(call("find_customer", email=cust[2]), call("get_order", order_id=oid),
                   call("update_shipping_address", order_id=oid, address=new),
                   claim(f"Order #{oid} will now ship to {new}.")),
        wrong={
            "wrong:do-nothing-but-claim": (claim("Address updated."),),
            "wrong:wrong-order": (call("update_shipping_address", order_id=other[0], address=new), claim()),
            "wrong:typo-address": (call("update_shipping_address", order_id=oid, address=new.upper()),
                                   claim()),
        },
    )


def email_tracking(d: Data, rng: random.Random, i: int) -> dict[str, Any]:
    order = rng.choice(d.orders_where(lambda o: o[2] == "shipped"))
    other = rng.choice(d.orders_where(lambda o: o[2] == "shipped" and o[0] != order[0]))
    cust = d.customer_of(order)
    oid, tracking = order[0], d.shipments[order[0]][3]
    wrong_tracking = d.shipments[other[0]][3]
    return dict(
        category="email", role="support_agent", scope=("emails", "service_requests"),
        request=f"Could you email me the tracking number for order #{oid}? My email is {cust[2]}.",
        goal_checks=(Check(f"one email to the customer with tracking {tracking}",
                           "SELECT COUNT(*) FROM emails WHERE customer_id = ? AND body LIKE ?", "eq", 1,
                           (cust[0], f"%{tracking}%")),),
        hard_rules=(no_duplicate_effect(),
                    Check("no email to anyone else", "SELECT COUNT(*) FROM emails WHERE customer_id <> ?",
                          "eq", 0, (cust[0],))),
        reference=(call("find_customer", email=cust[2]), call("get_order", order_id=oid),
                   call("send_email", customer_id=cust[0], subject=f"Tracking for order #{oid}",
                        body=f"Your order #{oid} is on its way: tracking number {tracking}."),
                   claim("I emailed you the tracking number.")),
        wrong={
            "wrong:do-nothing-but-claim": (call("get_order", order_id=oid), claim("Sent!")),
            "wrong:wrong-tracking": (call("send_email", customer_id=cust[0], subject="Tracking",
                                          body=f"Tracking number {wrong_tracking}."), claim()),
        },
    )


def close_ticket(d: Data, rng: random.Random, i: int) -> dict[str, Any]:
    open_tickets = [t for t in d.tickets.values() if t[4] == "open"]
    ticket = rng.choice(open_tickets)
    other = rng.choice([t for t in open_tickets if t[0] != ticket[0]])
    tid = ticket[0]
    return dict(
        category="ticket", role="support_agent", scope=("tickets", "ticket_messages"),
        request=f"About ticket #{tid}: it's sorted now, thanks. Please close it with a short note.",
        goal_checks=(Check(f"ticket #{tid} is solved", "SELECT status FROM tickets WHERE id = ?", "eq",
                           "solved", (tid,)),
                     Check(f"an agent reply on ticket #{tid}",
                           "SELECT COUNT(*) FROM ticket_messages WHERE ticket_id = ? AND author = 'agent'",
                           "ge", 1, (tid,))),
        hard_rules=(tickets_untouched_but(tid, d.now),),
        reference=(call("get_ticket", ticket_id=tid),
                   call("reply_to_ticket", ticket_id=tid, body="Glad it's sorted. Closing this ticket now."),
                   call("set_ticket_status", ticket_id=tid, status="solved"), claim("Ticket closed.")),
        wrong={
            "wrong:do-nothing-but-claim": (claim("Closed."),),
            "wrong:close-without-reply": (call("set_ticket_status", ticket_id=tid, status="solved"), claim()),
            "wrong:wrong-ticket": (call("reply_to_ticket", ticket_id=other[0], body="Closing."),
                                   call("set_ticket_status", ticket_id=other[0], status="solved"), claim()),
        },
    )


def carrier_question(d: Data, rng: random.Random, i: int) -> dict[str, Any]:
    order = rng.choice(d.orders_where(lambda o: o[2] in ("shipped", "delivered")))
    oid, carrier = order[0], d.shipments[order[0]][2]
    decoy = next(c for c in ("UPS", "DHL", "FedEx", "USPS") if c != carrier)
    return dict(
        category="question", role="support_agent", scope=(),
        request=f"Which carrier is delivering order #{oid}? Reply with just the carrier's name.",
        goal_checks=(Check("the answer names the right carrier",
                           "SELECT COUNT(*) FROM final_answers WHERE answer = ?", "eq", 1, (carrier,)),),
        hard_rules=(),
        reference=(call("get_order", order_id=oid),
                   call("finish", message=f"It's {carrier}.", answer=carrier)),
        wrong={"wrong:constant-answer": (call("finish", message=f"It's {decoy}.", answer=decoy),)},
    )


def order_count_question(d: Data, rng: random.Random, i: int) -> dict[str, Any]:
    cust = rng.choice(list(d.customers.values()))
    count = sum(1 for o in d.orders.values() if o[1] == cust[0])
    return dict(
        category="question", role="support_agent", scope=(),
        request="How many orders have I placed with you in total? Reply with just the number.",
        facts=(("email", f"My email is {cust[2]}."),),
        goal_checks=(Check("the answer is the customer's order count",
                           "SELECT COUNT(*) FROM final_answers WHERE answer = ?", "eq", 1, (str(count),)),),
        hard_rules=(),
        reference=(call("ask_customer", question="Could you tell me the email address on your account?"),
                   call("find_customer", email=cust[2]), call("list_orders", customer_id=cust[0]),
                   call("finish", message=f"You have placed {count} orders.", answer=str(count))),
        wrong={"wrong:constant-answer": (call("finish", message="You have 3 orders.",
                                              answer=str(count + 1)),)},
    )


def escalate_large_refund(d: Data, rng: random.Random, i: int) -> dict[str, Any]:
    big = {o[0] for o in d.orders_where(lambda o: o[2] == "delivered" and o[4] > REFUND_LIMIT_CENTS)}
    ticket = rng.choice([t for t in d.tickets.values() if t[2] in big and t[4] in ("open", "pending")])
    tid, order = ticket[0], d.orders[ticket[2]]
    oid = order[0]
    return dict(
        category="escalation", role="support_agent", scope=("tickets", "ticket_messages"),
        request=f"Ticket #{tid}: everything in order #{oid} was wrong, "
                f"I want my {order[4] / 100:.2f} back now!",
        goal_checks=(Check(f"ticket #{tid} is escalated to a supervisor",
                           "SELECT status FROM tickets WHERE id = ?", "eq", "escalated", (tid,)),),
        hard_rules=(refund_limit(), Check("no refund issued", "SELECT COUNT(*) FROM refunds", "eq", 0),
                    tickets_untouched_but(tid, d.now)),
        reference=(call("get_ticket", ticket_id=tid), call("get_order", order_id=oid),
                   call("escalate_ticket", ticket_id=tid,
                        note=f"Customer asks a full refund of {order[4]} cents on order #{oid}; "
                             "over the limit."),
                   claim("A supervisor will review your refund today.")),
        wrong={
            "wrong:do-nothing-but-claim": (call("get_ticket", ticket_id=tid), claim("Escalated.")),
            "wrong:refund-anyway": (call("issue_refund", order_id=oid, amount_cents=order[4],
                                         reason="customer upset"),
                                    claim("Refunded in full.")),
        },
    )


def goodwill_credit(d: Data, rng: random.Random, i: int) -> dict[str, Any]:
    cust = rng.choice(list(d.customers.values()))
    amount = rng.choice((500, 1000, 1500, 2500))
    return dict(
        category="credit", role="supervisor", scope=("store_credits",),
        request=f"Supervisor task: {cust[2]} had a late delivery. "
                f"Give them {amount / 100:.2f} in store credit.",
        goal_checks=(Check(f"one store credit of {amount} cents for customer #{cust[0]}",
                           "SELECT COUNT(*) FROM store_credits WHERE customer_id = ? AND amount_cents = ?",
                           "eq",
                           1, (cust[0], amount)),
                     Check("one store credit in all", "SELECT COUNT(*) FROM store_credits", "eq", 1)),
        hard_rules=(),
        reference=(call("find_customer", email=cust[2]),
                   call("issue_store_credit", customer_id=cust[0], amount_cents=amount,
                        reason="late delivery"),
                   claim("Credit issued.")),
        wrong={
            "wrong:do-nothing-but-claim": (call("find_customer", email=cust[2]), claim("Credit issued.")),
            "wrong:wrong-amount": (call("issue_store_credit", customer_id=cust[0], amount_cents=amount * 10,
                                        reason="late delivery"), claim()),
        },
    )


BASIC: dict[str, Template] = {
    "refund-item": refund_item,
    "cancel-order": cancel_order,
    "change-address": change_address,
    "email-tracking": email_tracking,
    "close-ticket": close_ticket,
    "carrier-question": carrier_question,
    "order-count-question": order_count_question,
    "escalate-large-refund": escalate_large_refund,
    "goodwill-credit": goodwill_credit,
}
