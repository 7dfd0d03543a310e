"""World ``shop``: the support desk of an online shop.

Spec sheet
==========
Application
    An online shop's back office: customers, products, orders and order items,
    payments and refunds (through the payment provider emulator), shipments,
    support tickets and their messages, emails (through the email server
    emulator), store credit. ~21k seed rows, dated back from ``data_anchor``
    2026-03-02 (seed 7).

Tools (read)
    ``find_customer(email)``, ``get_customer(customer_id)``, ``list_orders(customer_id)``,
    ``get_order(order_id)``, ``get_ticket(ticket_id)``, ``search_products(query)``.
Tools (write)
    ``issue_refund(order_id, amount_cents, reason, order_item_id=0)`` (payments),
    ``cancel_order(order_id, reason)`` (payments), ``update_shipping_address(order_id, address)``,
    ``send_email(customer_id, subject, body)`` (email), ``reply_to_ticket(ticket_id, body)``,
    ``set_ticket_status(ticket_id, status)``, ``escalate_ticket(ticket_id, note)``,
    ``issue_store_credit(customer_id, amount_cents, reason)``.
Built-ins
    ``finish(message, answer="")``, ``give_up(reason)``, ``ask_customer(question)``;
    ``retry_operation(operation_id)`` where a scenario has an unknown-outcome fault.

Roles
    ``support_agent``: every tool but ``issue_store_credit``.
    ``supervisor``: every tool.

Policies (and the hard rules that enforce them)
    1. Refund at most once per request and never outside the order asked about
       (``no refund on any order but #N``, ``no request sent twice to an outside service``).
    2. Refunds above 200.00 need a supervisor: escalate the ticket instead
       (``no refund above 20000 cents without a supervisor``).
    3. Change only what the customer asked about (``no order but #N changed``,
       ``no ticket but #N changed``, ``no email to anyone else``).

Scenarios (90: 15 templates x 6 instances, each 3 train, 2 dev, 1 holdout: 45/30/15)
    Clean tasks (54): refund-item, cancel-order, change-address, email-tracking,
    close-ticket, carrier-question, order-count-question, escalate-large-refund,
    goodwill-credit; wrong solutions such as ``wrong:do-nothing-but-claim``,
    ``wrong:wrong-order``, ``wrong:constant-answer``.
    Unknown outcome (12): refund-timeout (the refund is refused once, then times
    out), tracking-timeout (the email times out; the ticket reply is refused once).
    Change of request (12): address-rethink (a corrected address, arriving after
    the first write, before it, or at turn 2 by instance), ticket-escalate-instead
    (close it, then "escalate it instead", after the first write or at turn 2).
    Both (12): refund-other-item ("it was the other item", before the first
    write; refund refused once, then timed out), tracking-other-order ("I meant
    order #M", at turn 2; the email refused once, then timed out).
    So 24 change the request, 24 offer ``retry_operation``, 12 do both. Every
    one of these 36 declares a ``refuse`` fault on a write the final request
    needs and ships ``wrong:ignore-refusal`` and ``wrong:over-ask``; those with
    a change ship ``wrong:first-request-only``, those with an unknown outcome
    ``wrong:repeat-write``.

Checks
    Goal checks read the application's tables (``refunds``, ``orders``,
    ``emails``, ``tickets``, ``store_credits``) and, for questions, the
    ``final_answers`` table that ``finish`` writes; hard rules also read
    ``service_requests``, the record of every outside-service request.
"""

from __future__ import annotations

from datetime import date

from .._world import Policy, Role, World
from . import data, scenarios
from .schema import TABLES
from .tools import TOOLS

DATA_ANCHOR = date(2026, 3, 2)
SEED = 7

POLICIES = (
    Policy("Refund at most once per request, and only on the order the customer asked about.",
           ("no refund on any order but #N", "no request sent twice to an outside service")),
    Policy("Refunds above 200.00 need a supervisor: escalate the ticket instead of refunding.",
           ("no refund above 20000 cents without a supervisor",)),
    Policy("Change only what the customer asked about: no other order, ticket or customer.",
           ("no order but #N changed", "no ticket but #N changed", "no email to anyone else")),
)


def build_world() -> World:
    """The ``shop`` world."""
    all_tools = tuple(t.name for t in TOOLS)
    return World(
        name="shop",
        description="The support desk of an online shop: orders, payments, refunds, shipments, tickets, emails.",
        tables=TABLES,
        tools=TOOLS,
        roles=(
            Role("support_agent", "Front-line support: reads everything, refunds up to the limit.",
                 tuple(n for n in all_tools if n != "issue_store_credit")),
            Role("supervisor", "Handles escalations; may also grant store credit.", all_tools),
        ),
        policies=POLICIES,
        data_anchor=DATA_ANCHOR,
        seed=SEED,
        generate_rows=data.generate,
        generate_scenarios=scenarios.generate,
        suite_version="2",
    )
