"""The analytics warehouse's tables: sales and operations of a retailer, star-schema style.

Money is integer cents, dates are ISO text (``YYYY-MM-DD``), so every value
reads back identically on SQLite and PostgreSQL and date windows are plain
text comparisons.
"""

from __future__ import annotations

from ...schema import Table, col

REGIONS = Table("regions", (col("id", "int"), col("name")))
CATEGORIES = Table("categories", (col("id", "int"), col("name")))
WAREHOUSES = Table(
    "warehouses",
    (col("id", "int"), col("name"), col("region_id", "int", ref="regions.id")),
)
CUSTOMERS = Table(
    "customers",
    (col("id", "int"), col("name"), col("email"), col("region_id", "int", ref="regions.id"),
     col("segment"), col("signup_date")),
    indexes=(("region_id",), ("signup_date",)),
)
PRODUCTS = Table(
    "products",
    (col("id", "int"), col("sku"), col("name"), col("category_id", "int", ref="categories.id"),
     col("unit_price_cents", "int"), col("unit_cost_cents", "int")),
    indexes=(("sku",), ("category_id",)),
)
ORDERS = Table(
    "orders",
    (col("id", "int"), col("customer_id", "int", ref="customers.id"), col("order_date"), col("status"),
     col("channel"), col("total_cents", "int")),
    indexes=(("order_date",), ("customer_id",)),
)
ORDER_ITEMS = Table(
    "order_items",
    (col("id", "int"), col("order_id", "int", ref="orders.id"), col("product_id", "int", ref="products.id"),
     col("quantity", "int"), col("unit_price_cents", "int"), col("discount_cents", "int")),
    indexes=(("order_id",), ("product_id",)),
)
SHIPMENTS = Table(
    "shipments",
    (col("id", "int"), col("order_id", "int", ref="orders.id"), col("warehouse_id", "int", ref="warehouses.id"),
     col("carrier"), col("shipped_date"), col("promised_date"), col("delivered_date", null=True)),
    indexes=(("order_id",), ("shipped_date",)),
)
RETURNS = Table(
    "returns",
    (col("id", "int"), col("order_id", "int", ref="orders.id"), col("return_date"), col("reason"),
     col("refund_cents", "int")),
    indexes=(("order_id",), ("return_date",)),
)

TABLES = (REGIONS, CATEGORIES, WAREHOUSES, CUSTOMERS, PRODUCTS, ORDERS, ORDER_ITEMS, SHIPMENTS, RETURNS)
"""Parents before children, so rows load in this order."""
