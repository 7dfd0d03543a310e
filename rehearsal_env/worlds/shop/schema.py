"""The shop's tables: a support desk's view of an online shop."""

from __future__ import annotations

from ...schema import Table, col

CUSTOMERS = Table(
    "customers",
    (col("id", "int"), col("name"), col("email"), col("phone"), col("address"), col("tier"),
     col("created_at")),
    indexes=(("email",),),
)
PRODUCTS = Table(
    "products",
    (col("id", "int"), col("sku"), col("name"), col("category"), col("price_cents", "int"), col("stock", "int")),
    indexes=(("sku",),),
)
ORDERS = Table(
    "orders",
    (col("id", "int"), col("customer_id", "int", ref="customers.id"), col("status"), col("placed_at"),
     col("total_cents", "int"), col("shipping_address"), col("updated_at")),
    indexes=(("customer_id",), ("status",)),
)
ORDER_ITEMS = Table(
    "order_items",
    (col("id", "int"), col("order_id", "int", ref="orders.id"), col("product_id", "int", ref="products.id"),
     col("quantity", "int"), col("unit_price_cents", "int")),
    indexes=(("order_id",),),
)
PAYMENTS = Table(
    "payments",
    (col("id", "int"), col("order_id", "int", ref="orders.id"), col("provider_ref"), col("amount_cents", "int"),
     col("status"), col("paid_at")),
    indexes=(("order_id",),),
)
REFUNDS = Table(
    "refunds",
    (col("id", "int"), col("order_id", "int", ref="orders.id"), col("payment_id", "int", ref="payments.id"),
     col("order_item_id", "int", null=True, ref="order_items.id"), col("amount_cents", "int"), col("reason"),
     col("provider_ref"), col("created_at")),
    indexes=(("order_id",),),
)
SHIPMENTS = Table(
    "shipments",
    (col("id", "int"), col("order_id", "int", ref="orders.id"), col("carrier"), col("tracking_number"),
     col("status"), col("shipped_at")),
    indexes=(("order_id",),),
)
TICKETS = Table(
    "tickets",
    (col("id", "int"), col("customer_id", "int", ref="customers.id"), col("order_id", "int", null=True),
     col("subject"), col("status"), col("priority"), col("created_at"), col("updated_at")),
    indexes=(("customer_id",), ("status",)),
)
TICKET_MESSAGES = Table(
    "ticket_messages",
    (col("id", "int"), col("ticket_id", "int", ref="tickets.id"), col("author"), col("body"), col("created_at")),
    indexes=(("ticket_id",),),
)
EMAILS = Table(
    "emails",
    (col("id", "int"), col("customer_id", "int", ref="customers.id"), col("to_address"), col("subject"),
     col("body"), col("provider_ref"), col("sent_at")),
    indexes=(("customer_id",),),
)
STORE_CREDITS = Table(
    "store_credits",
    (col("id", "int"), col("customer_id", "int", ref="customers.id"), col("amount_cents", "int"),
     col("reason"), col("created_at")),
)

TABLES = (CUSTOMERS, PRODUCTS, ORDERS, ORDER_ITEMS, PAYMENTS, REFUNDS, SHIPMENTS, TICKETS, TICKET_MESSAGES,
          EMAILS, STORE_CREDITS)
