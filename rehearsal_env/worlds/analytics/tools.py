"""The analytics warehouse's tools: a read-only SQL console and a few narrow lookups.

Every tool reads; nothing here changes the warehouse. ``run_sql`` says in its
result whether the database aggregated (``"aggregated": true``: an aggregate
function, ``GROUP BY``, or a ranking ``ORDER BY ... LIMIT``), which is how the
reward's *method* component tells "the database summed" from "the model summed
the rows it was shown".
"""

from __future__ import annotations

from typing import Any

from ...checks import parse_statement
from ...tools import ToolContext, ToolFailed, tool
from ._readonly import json_rows, json_value, read_only_query
from .schema import TABLES

MAX_ROWS = 100
"""Rows ``run_sql`` returns at most; the rest is cut with a note."""
TIMEOUT_S = 5.0
"""Seconds a ``run_sql`` query may run before it is stopped."""

def aggregates(sql: str) -> bool:
    """Whether a query makes the database aggregate or rank (an aggregate, GROUP BY, ORDER BY ... LIMIT)."""
    return parse_statement(sql, "sqlite").aggregates


@tool("read")
def run_sql(ctx: ToolContext, sql: str) -> dict[str, Any]:
    """Run one read-only SQL query (SELECT or WITH ... SELECT) on the warehouse and return its rows.

    At most 100 rows come back (the rest is cut, with a note); a query is stopped after 5 seconds.
    Aggregate in the query (COUNT, SUM, AVG, GROUP BY) rather than reading raw rows. Dates are ISO
    text ('YYYY-MM-DD'), money is in integer cents.

    Args:
        sql: One SELECT statement; no writes, no second statement.
    """
    result = read_only_query(ctx.db, sql, max_rows=MAX_ROWS, timeout_s=TIMEOUT_S)
    out: dict[str, Any] = {
        "columns": list(result.columns),
        "rows": json_rows(result.rows),
        "row_count": len(result.rows),
        "truncated": result.truncated,
        "aggregated": aggregates(sql),
    }
    if result.truncated:
        out["note"] = (f"only the first {MAX_ROWS} rows are shown; aggregate in SQL (COUNT, SUM, GROUP BY) "
                       "instead of reading every row")
    return out


@tool("read")
def list_tables(ctx: ToolContext) -> dict[str, Any]:
    """List the warehouse's tables with their columns and row counts."""
    tables = []
    for table in TABLES:
        (count,) = ctx.db.query(f"SELECT COUNT(*) FROM {table.name}")[0]
        tables.append({"table": table.name, "rows": count, "columns": list(table.column_names)})
    return {"tables": tables}


@tool("read")
def describe_table(ctx: ToolContext, table: str) -> dict[str, Any]:
    """Describe one table: its columns, their types, and which other table each key refers to.

    Args:
        table: The table's name (see list_tables).
    """
    by_name = {t.name: t for t in TABLES}
    if table not in by_name:
        raise ToolFailed(f"no table {table!r}; the tables are {', '.join(by_name)}")
    return {"table": table, "columns": [
        {"name": c.name, "type": c.type, "nullable": c.nullable, "references": c.references}
        for c in by_name[table].columns]}


def _one(ctx: ToolContext, sql: str, params: tuple[Any, ...], what: str) -> tuple[Any, ...]:
    rows = ctx.db.query(sql, params)
    if not rows:
        raise ToolFailed(f"no {what}; check the id and try again")
    return rows[0]


@tool("read")
def get_order(ctx: ToolContext, order_id: int) -> dict[str, Any]:
    """Read one order: date, status, channel, total, its items, shipment and return.

    Args:
        order_id: The order's id.
    """
    o = _one(ctx, "SELECT id, customer_id, order_date, status, channel, total_cents FROM orders WHERE id = ?",
             (order_id,), f"order #{order_id}")
    items = ctx.db.query("SELECT p.sku, p.name, i.quantity, i.unit_price_cents, i.discount_cents "
                         "FROM order_items i JOIN products p ON p.id = i.product_id WHERE i.order_id = ? "
                         "ORDER BY i.id", (order_id,))
    ship = ctx.db.query("SELECT s.carrier, w.name, s.shipped_date, s.promised_date, s.delivered_date "
                        "FROM shipments s JOIN warehouses w ON w.id = s.warehouse_id WHERE s.order_id = ?",
                        (order_id,))
    ret = ctx.db.query("SELECT return_date, reason, refund_cents FROM returns WHERE order_id = ?", (order_id,))
    return {
        "order_id": o[0], "customer_id": o[1], "order_date": o[2], "status": o[3], "channel": o[4],
        "total_cents": o[5],
        "items": [{"sku": r[0], "name": r[1], "quantity": r[2], "unit_price_cents": r[3], "discount_cents": r[4]}
                  for r in items],
        "shipment": {"carrier": ship[0][0], "warehouse": ship[0][1], "shipped_date": ship[0][2],
                     "promised_date": ship[0][3], "delivered_date": ship[0][4]} if ship else None,
        "return": {"return_date": ret[0][0], "reason": ret[0][1], "refund_cents": ret[0][2]} if ret else None,
    }


@tool("read")
def get_customer(ctx: ToolContext, customer_id: int) -> dict[str, Any]:
    """Read one customer: name, email, region, segment and signup date.

    Args:
        customer_id: The customer's id.
    """
    c = _one(ctx, "SELECT c.id, c.name, c.email, r.name, c.segment, c.signup_date FROM customers c "
             "JOIN regions r ON r.id = c.region_id WHERE c.id = ?", (customer_id,), f"customer #{customer_id}")
    keys = ("customer_id", "name", "email", "region", "segment", "signup_date")
    return {k: json_value(v) for k, v in zip(keys, c, strict=True)}


@tool("read")
def find_products(ctx: ToolContext, text: str) -> dict[str, Any]:
    """Find products whose name or SKU contains the text (at most 10, with category and price).

    Args:
        text: Part of a product's name or SKU.
    """
    rows = ctx.db.query("SELECT p.sku, p.name, c.name, p.unit_price_cents FROM products p "
                        "JOIN categories c ON c.id = p.category_id WHERE p.name LIKE ? OR p.sku LIKE ? "
                        "ORDER BY p.id LIMIT 10", (f"%{text}%", f"%{text}%"))
    return {"products": [{"sku": r[0], "name": r[1], "category": r[2], "unit_price_cents": r[3]} for r in rows]}


TOOLS = (run_sql, list_tables, describe_table, get_order, get_customer, find_products)
ANALYST_TOOLS = tuple(t.name for t in TOOLS)
MANAGER_TOOLS = ("get_order", "get_customer", "find_products")
