"""The shop's tools: what a support agent (and a supervisor) can do.

Every tool is a typed function whose docstring is its schema; reads change
nothing, writes commit (one transaction per call) and may reach the payment
provider or the email server emulators.
"""

from __future__ import annotations

from typing import Any

from ...tools import ToolContext, ToolFailed, tool

REFUND_LIMIT_CENTS = 20_000
"""Refunds above this need a supervisor (policy; hard rules enforce it)."""


def _one(ctx: ToolContext, sql: str, params: tuple[Any, ...], what: str) -> tuple[Any, ...]:
    rows = ctx.db.query(sql, params)
    if not rows:
        raise ToolFailed(f"no {what}; check the id and try again")
    return rows[0]


def _customer(ctx: ToolContext, customer_id: int) -> tuple[Any, ...]:
    return _one(ctx, "SELECT id FROM customers WHERE id = ?", (customer_id,), f"customer #{customer_id}")


def _order(ctx: ToolContext, order_id: int) -> tuple[Any, ...]:
    return _one(ctx, "SELECT id, customer_id, status, placed_at, total_cents, shipping_address FROM orders "
                "WHERE id = ?", (order_id,), f"order #{order_id}")


# -- reads -------------------------------------------------------------------
@tool("read")
def find_customer(ctx: ToolContext, email: str) -> dict[str, Any]:
    """Find a customer by the email address on file.

    Args:
        email: The customer's email address, exactly as they gave it.
    """
    row = _one(ctx, "SELECT id, name, email, tier FROM customers WHERE email = ?", (email,),
               f"customer with email {email!r}")
    return {"customer_id": row[0], "name": row[1], "email": row[2], "tier": row[3]}


@tool("read")
def get_customer(ctx: ToolContext, customer_id: int) -> dict[str, Any]:
    """Read a customer's profile: name, email, phone, address on file, tier.

    Args:
        customer_id: The customer's id.
    """
    row = _one(ctx, "SELECT id, name, email, phone, address, tier FROM customers WHERE id = ?", (customer_id,),
               f"customer #{customer_id}")
    keys = ("customer_id", "name", "email", "phone", "address", "tier")
    return dict(zip(keys, row, strict=True))


@tool("read")
def list_orders(ctx: ToolContext, customer_id: int) -> dict[str, Any]:
    """List a customer's orders, newest first (id, status, date, total); an unknown customer is an error, as in
    every tool that takes a customer (an empty list means a customer with no orders).

    Args:
        customer_id: The customer's id.
    """
    _customer(ctx, customer_id)
    rows = ctx.db.query("SELECT id, status, placed_at, total_cents FROM orders WHERE customer_id = ? "
                        "ORDER BY placed_at DESC", (customer_id,))
    return {"orders": [{"order_id": r[0], "status": r[1], "placed_at": r[2], "total_cents": r[3]} for r in rows]}


@tool("read")
def get_order(ctx: ToolContext, order_id: int) -> dict[str, Any]:
    """Read one order with its items, payment, shipment and refunds so far.

    Args:
        order_id: The order's id (the number after '#').
    """
    order = _order(ctx, order_id)
    items = ctx.db.query("SELECT i.id, p.sku, p.name, i.quantity, i.unit_price_cents FROM order_items i "
                         "JOIN products p ON p.id = i.product_id WHERE i.order_id = ? ORDER BY i.id", (order_id,))
    payment = ctx.db.query("SELECT provider_ref, amount_cents, status FROM payments WHERE order_id = ?", (order_id,))
    shipment = ctx.db.query("SELECT carrier, tracking_number, status FROM shipments WHERE order_id = ?", (order_id,))
    refunds = ctx.db.query("SELECT id, order_item_id, amount_cents, reason FROM refunds WHERE order_id = ? "
                           "ORDER BY id", (order_id,))
    return {
        "order_id": order[0], "customer_id": order[1], "status": order[2], "placed_at": order[3],
        "total_cents": order[4], "shipping_address": order[5],
        "items": [{"order_item_id": r[0], "sku": r[1], "name": r[2], "quantity": r[3], "unit_price_cents": r[4]}
                  for r in items],
        "payment": {"provider_ref": payment[0][0], "amount_cents": payment[0][1], "status": payment[0][2]}
        if payment else None,
        "shipment": {"carrier": shipment[0][0], "tracking_number": shipment[0][1], "status": shipment[0][2]}
        if shipment else None,
        "refunds": [{"refund_id": r[0], "order_item_id": r[1], "amount_cents": r[2], "reason": r[3]}
                    for r in refunds],
    }


@tool("read")
def get_ticket(ctx: ToolContext, ticket_id: int) -> dict[str, Any]:
    """Read a support ticket and its messages.

    Args:
        ticket_id: The ticket's id.
    """
    t = _one(ctx, "SELECT id, customer_id, order_id, subject, status, priority FROM tickets WHERE id = ?",
             (ticket_id,), f"ticket #{ticket_id}")
    msgs = ctx.db.query("SELECT author, body, created_at FROM ticket_messages WHERE ticket_id = ? ORDER BY id",
                        (ticket_id,))
    return {"ticket_id": t[0], "customer_id": t[1], "order_id": t[2], "subject": t[3], "status": t[4],
            "priority": t[5], "messages": [{"author": m[0], "body": m[1], "at": m[2]} for m in msgs]}


@tool("read")
def search_products(ctx: ToolContext, query: str) -> dict[str, Any]:
    """Search products by name or SKU (at most 10 results).

    Args:
        query: Part of the product's name or SKU.
    """
    rows = ctx.db.query("SELECT sku, name, price_cents, stock FROM products WHERE name LIKE ? OR sku LIKE ? "
                        "ORDER BY id LIMIT 10", (f"%{query}%", f"%{query}%"))
    return {"products": [{"sku": r[0], "name": r[1], "price_cents": r[2], "stock": r[3]} for r in rows]}


# -- writes ------------------------------------------------------------------
@tool("write")
def issue_refund(ctx: ToolContext, order_id: int, amount_cents: int, reason: str, order_item_id: int = 0) -> Any:
    """Refund money on an order's payment through the payment provider.

    Args:
        order_id: The order to refund.
        amount_cents: How much to refund, in cents (at most what is left of the payment).
        reason: Why, in a few words.
        order_item_id: The refunded item, when the refund is for one item (0 for none).
    """
    order = _order(ctx, order_id)
    pay = _one(ctx, "SELECT id, provider_ref, amount_cents FROM payments WHERE order_id = ?", (order_id,),
               f"payment for order #{order_id}")
    (refunded,) = ctx.db.query("SELECT COALESCE(SUM(amount_cents), 0) FROM refunds WHERE order_id = ?",
                               (order_id,))[0]
    if amount_cents <= 0 or amount_cents > pay[2] - refunded:
        raise ToolFailed(f"amount_cents must be between 1 and {pay[2] - refunded} (what is left of the "
                         f"payment of order #{order_id}); got {amount_cents}")
    if order_item_id:
        _one(ctx, "SELECT id FROM order_items WHERE id = ? AND order_id = ?", (order_item_id, order_id),
             f"item {order_item_id} on order #{order_id}")
    response = ctx.service("payments").request(
        "refund", {"payment_ref": pay[1], "amount_cents": amount_cents}, {"status": "succeeded"})
    (refund_id,) = ctx.db.execute(
        "INSERT INTO refunds (order_id, payment_id, order_item_id, amount_cents, reason, provider_ref, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (order_id, pay[0], order_item_id or None, amount_cents, reason, response["request_ref"], ctx.now))[0]
    if refunded + amount_cents == pay[2]:
        ctx.db.execute("UPDATE payments SET status = 'refunded' WHERE id = ?", (pay[0],))
        if order[2] != "cancelled":
            ctx.db.execute("UPDATE orders SET status = 'refunded', updated_at = ? WHERE id = ?", (ctx.now, order_id))
    return {"refund_id": refund_id, "amount_cents": amount_cents, "provider_ref": response["request_ref"]}


@tool("write")
def cancel_order(ctx: ToolContext, order_id: int, reason: str) -> Any:
    """Cancel an order that has not shipped, refunding its payment in full.

    Args:
        order_id: The order to cancel.
        reason: Why, in a few words.
    """
    order = _order(ctx, order_id)
    if order[2] != "paid":
        raise ToolFailed(f"order #{order_id} is {order[2]}; only a paid, unshipped order can be cancelled")
    pay = _one(ctx, "SELECT id, provider_ref, amount_cents FROM payments WHERE order_id = ?", (order_id,),
               f"payment for order #{order_id}")
    response = ctx.service("payments").request(
        "refund", {"payment_ref": pay[1], "amount_cents": pay[2]}, {"status": "succeeded"})
    ctx.db.execute("INSERT INTO refunds (order_id, payment_id, order_item_id, amount_cents, reason, provider_ref, "
                   "created_at) VALUES (?, ?, NULL, ?, ?, ?, ?)",
                   (order_id, pay[0], pay[2], reason, response["request_ref"], ctx.now))
    ctx.db.execute("UPDATE payments SET status = 'refunded' WHERE id = ?", (pay[0],))
    ctx.db.execute("UPDATE orders SET status = 'cancelled', updated_at = ? WHERE id = ?", (ctx.now, order_id))
    return {"order_id": order_id, "status": "cancelled", "refunded_cents": pay[2]}


@tool("write")
def update_shipping_address(ctx: ToolContext, order_id: int, address: str) -> Any:
    """Change where an unshipped order will be delivered.

    Args:
        order_id: The order.
        address: The full new address, one line.
    """
    order = _order(ctx, order_id)
    if order[2] != "paid":
        raise ToolFailed(f"order #{order_id} is {order[2]}; the address can only change before it ships")
    ctx.db.execute("UPDATE orders SET shipping_address = ?, updated_at = ? WHERE id = ?", (address, ctx.now, order_id))
    return {"order_id": order_id, "shipping_address": address}


@tool("write")
def send_email(ctx: ToolContext, customer_id: int, subject: str, body: str) -> Any:
    """Email a customer at the address on file, through the email server.

    Args:
        customer_id: The customer to email.
        subject: The subject line.
        body: The message.
    """
    (email,) = _one(ctx, "SELECT email FROM customers WHERE id = ?", (customer_id,), f"customer #{customer_id}")
    response = ctx.service("email").request("send", {"to": email, "subject": subject, "body": body},
                                            {"status": "queued"})
    ctx.db.execute("INSERT INTO emails (customer_id, to_address, subject, body, provider_ref, sent_at) "
                   "VALUES (?, ?, ?, ?, ?, ?)", (customer_id, email, subject, body, response["request_ref"], ctx.now))
    return {"to": email, "message_ref": response["request_ref"]}


@tool("write")
def reply_to_ticket(ctx: ToolContext, ticket_id: int, body: str) -> Any:
    """Post a reply to the customer on a ticket.

    Args:
        ticket_id: The ticket.
        body: The reply.
    """
    _one(ctx, "SELECT id FROM tickets WHERE id = ?", (ticket_id,), f"ticket #{ticket_id}")
    ctx.db.execute("INSERT INTO ticket_messages (ticket_id, author, body, created_at) VALUES (?, 'agent', ?, ?)",
                   (ticket_id, body, ctx.now))
    ctx.db.execute("UPDATE tickets SET updated_at = ? WHERE id = ?", (ctx.now, ticket_id))
    return {"ticket_id": ticket_id, "posted": True}


@tool("write")
def set_ticket_status(ctx: ToolContext, ticket_id: int, status: str) -> Any:
    """Set a ticket's status.

    Args:
        ticket_id: The ticket.
        status: One of open, pending, solved.
    """
    if status not in ("open", "pending", "solved"):
        raise ToolFailed(f"status must be open, pending or solved; got {status!r} (use escalate_ticket to escalate)")
    _one(ctx, "SELECT id FROM tickets WHERE id = ?", (ticket_id,), f"ticket #{ticket_id}")
    ctx.db.execute("UPDATE tickets SET status = ?, updated_at = ? WHERE id = ?", (status, ctx.now, ticket_id))
    return {"ticket_id": ticket_id, "status": status}


@tool("write")
def escalate_ticket(ctx: ToolContext, ticket_id: int, note: str) -> Any:
    """Hand a ticket to a supervisor, with a note of what is needed.

    Args:
        ticket_id: The ticket.
        note: What the supervisor should do and why.
    """
    _one(ctx, "SELECT id FROM tickets WHERE id = ?", (ticket_id,), f"ticket #{ticket_id}")
    ctx.db.execute("UPDATE tickets SET status = 'escalated', updated_at = ? WHERE id = ?", (ctx.now, ticket_id))
    ctx.db.execute("INSERT INTO ticket_messages (ticket_id, author, body, created_at) VALUES (?, 'agent', ?, ?)",
                   (ticket_id, f"[escalated] {note}", ctx.now))
    return {"ticket_id": ticket_id, "status": "escalated"}


@tool("write")
def issue_store_credit(ctx: ToolContext, customer_id: int, amount_cents: int, reason: str) -> Any:
    """Give a customer store credit (supervisors only).

    Args:
        customer_id: The customer.
        amount_cents: The credit, in cents.
        reason: Why.
    """
    _one(ctx, "SELECT id FROM customers WHERE id = ?", (customer_id,), f"customer #{customer_id}")
    if amount_cents <= 0:
        raise ToolFailed(f"amount_cents must be positive; got {amount_cents}")
    ctx.db.execute("INSERT INTO store_credits (customer_id, amount_cents, reason, created_at) VALUES (?, ?, ?, ?)",
                   (customer_id, amount_cents, reason, ctx.now))
    return {"customer_id": customer_id, "amount_cents": amount_cents}


READ_TOOLS = (find_customer, get_customer, list_orders, get_order, get_ticket, search_products)
WRITE_TOOLS = (issue_refund, cancel_order, update_shipping_address, send_email, reply_to_ticket,
               set_ticket_status, escalate_ticket, issue_store_credit)
TOOLS = READ_TOOLS + WRITE_TOOLS
