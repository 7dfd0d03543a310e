"""The analytics questions: templates that turn a date window and a dimension into a question and its oracle.

A :class:`Question` is what a scenario is made of: the words the customer
says, the oracle (one portable SELECT whose single value is the answer), the
answer's kind (which fixes format and tolerance) and the method required.
Windows are computed here, in Python, from the world's ``data_anchor``: "the
last 30 days" is the 30 calendar days ending on the anchor, and the request
spells the dates out so that a careful agent cannot misread it.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Literal

from . import data

AnswerKind = Literal["count", "money", "average", "percent", "text", "id"]

TOLERANCE: dict[AnswerKind, float] = {
    "count": 0.0, "id": 0.0, "text": 0.0, "money": 0.01, "average": 0.01, "percent": 0.1}
"""Absolute tolerance of an answer of each kind (text compares case-insensitively)."""
FORMAT_HINT: dict[AnswerKind, str] = {
    "count": "Reply with just the number.",
    "id": "Reply with just the id.",
    "text": "Reply with just the name.",
    "money": "Reply in dollars with two decimals, no currency sign (e.g. 1234.56).",
    "average": "Reply with two decimals (e.g. 12.34).",
    "percent": "Reply as a percentage with one decimal, no % sign (e.g. 12.3).",
}


@dataclass(frozen=True)
class Question:
    """One question of a scenario and everything needed to judge its answer."""

    template: str
    """The template's name (the scenario id's stem)."""
    request: str
    """What the customer asks, with the format wanted."""
    oracle: str
    """One portable SELECT returning exactly one value: the right answer."""
    kind: AnswerKind
    """How the answer is formatted and compared."""
    method: str = "aggregate"
    """The method required (``aggregate`` or ``lookup``)."""
    role: str = "analyst"
    """The role that is asked."""
    ranking: str | None = None
    """Top-N questions: ``SELECT label, metric ...`` over every candidate (used to refuse ties)."""
    raw: str | None = None
    """The raw rows whose last column adds up to the answer (for the sum-in-model wrong solution)."""
    careless: str | None = None
    """The oracle with the window's first day left out (for the off-by-one wrong solution)."""


def window(anchor: date, days: int) -> tuple[str, str]:
    """The ``days`` calendar days ending on ``anchor``, as ISO (first, last)."""
    return (anchor - timedelta(days=days - 1)).isoformat(), anchor.isoformat()


MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")


def month_before(anchor: date, back: int) -> tuple[str, str, str]:
    """The calendar month ``back`` months before the anchor's: (first, last, "March 2025")."""
    year, month = anchor.year, anchor.month - back
    while month < 1:
        year, month = year - 1, month + 12
    first = date(year, month, 1)
    nxt = date(year + (month == 12), month % 12 + 1, 1)
    return first.isoformat(), (nxt - timedelta(days=1)).isoformat(), f"{MONTHS[month - 1]} {year}"


def _in(column: str, start: str, end: str) -> str:
    return f"{column} >= '{start}' AND {column} <= '{end}'"


def _after(column: str, start: str, end: str) -> str:
    return f"{column} > '{start}' AND {column} <= '{end}'"


def _said(days: int, start: str, end: str) -> str:
    return f"in the last {days} days ({start} through {end})"


def _top(template: str, request: str, kind: AnswerKind, ranking: str) -> Question:
    oracle = f"SELECT label FROM ({ranking}) AS ranked ORDER BY metric DESC, label LIMIT 1"
    return Question(template, f"{request} {FORMAT_HINT[kind]}", oracle, kind, ranking=ranking)


def _sum(template: str, request: str, kind: AnswerKind, select: str, source: str, where: str,
         careless_where: str, row: str | None = None) -> Question:
    """A question answered by one aggregate over ``source`` filtered by ``where``."""
    return Question(
        template, f"{request} {FORMAT_HINT[kind]}", f"SELECT {select} FROM {source} WHERE {where}", kind,
        raw=f"SELECT {row} FROM {source} WHERE {where}" if row else None,
        careless=f"SELECT {select} FROM {source} WHERE {careless_where}")


Template = Callable[[date, random.Random, int], Question]

COMPLETED_ITEMS = "order_items i JOIN orders o ON o.id = i.order_id"
LINE = "i.quantity * i.unit_price_cents - i.discount_cents"


def orders_count(anchor: date, rng: random.Random, days: int) -> Question:
    s, e = window(anchor, days)
    return _sum("orders-count", f"How many orders were placed {_said(days, s, e)}, whatever their status?",
                "count", "COUNT(*)", "orders", _in("order_date", s, e), _after("order_date", s, e), "id, 1")


def channel_orders(anchor: date, rng: random.Random, days: int) -> Question:
    s, e = window(anchor, days)
    ch = rng.choice([c for c, _ in data.CHANNELS])
    return _sum("channel-orders", f"How many orders came through the {ch} channel {_said(days, s, e)}?",
                "count", "COUNT(*)", "orders", f"channel = '{ch}' AND " + _in("order_date", s, e),
                f"channel = '{ch}' AND " + _after("order_date", s, e), "id, 1")


def revenue(anchor: date, rng: random.Random, days: int) -> Question:
    s, e = window(anchor, days)
    done = "status = 'completed' AND "
    return _sum("revenue", f"What was our revenue from completed orders {_said(days, s, e)}?", "money",
                "SUM(total_cents) / 100.0", "orders", done + _in("order_date", s, e),
                done + _after("order_date", s, e), "id, total_cents / 100.0")


def region_revenue(anchor: date, rng: random.Random, days: int) -> Question:
    s, e = window(anchor, days)
    region = rng.choice(data.REGIONS)
    src = "orders o JOIN customers c ON c.id = o.customer_id JOIN regions r ON r.id = c.region_id"
    cond = f"r.name = '{region}' AND o.status = 'completed' AND "
    return _sum("region-revenue", f"What was the revenue from completed orders of customers in the {region} "
                f"region {_said(days, s, e)}?", "money", "SUM(o.total_cents) / 100.0", src,
                cond + _in("o.order_date", s, e), cond + _after("o.order_date", s, e), "o.id, o.total_cents / 100.0")


def average_order(anchor: date, rng: random.Random, days: int) -> Question:
    s, e = window(anchor, days)
    done = "status = 'completed' AND "
    return _sum("average-order", f"What was the average value of a completed order {_said(days, s, e)}, "
                "in dollars?", "average", "AVG(total_cents) / 100.0", "orders", done + _in("order_date", s, e),
                done + _after("order_date", s, e))


def distinct_customers(anchor: date, rng: random.Random, days: int) -> Question:
    s, e = window(anchor, days)
    return _sum("distinct-customers", f"How many different customers placed at least one order "
                f"{_said(days, s, e)}?", "count", "COUNT(DISTINCT customer_id)", "orders",
                _in("order_date", s, e), _after("order_date", s, e))


def refunds_total(anchor: date, rng: random.Random, days: int) -> Question:
    s, e = window(anchor, days)
    return _sum("refunds-total", f"How much did we refund on returns recorded {_said(days, s, e)}?", "money",
                "SUM(refund_cents) / 100.0", "returns", _in("return_date", s, e), _after("return_date", s, e),
                "id, refund_cents / 100.0")


def return_rate(anchor: date, rng: random.Random, days: int) -> Question:
    s, e = window(anchor, days)
    return _sum("return-rate", f"What share of the orders placed {_said(days, s, e)} were returned?", "percent",
                "100.0 * SUM(CASE WHEN status = 'returned' THEN 1 ELSE 0 END) / COUNT(*)", "orders",
                _in("order_date", s, e), _after("order_date", s, e))


def signups(anchor: date, rng: random.Random, days: int) -> Question:
    s, e = window(anchor, days)
    return _sum("signups", f"How many new customers signed up {_said(days, s, e)}?", "count", "COUNT(*)",
                "customers", _in("signup_date", s, e), _after("signup_date", s, e), "id, 1")


def late_deliveries(anchor: date, rng: random.Random, days: int) -> Question:
    s, e = window(anchor, days)
    carrier = rng.choice(sorted(data.CARRIERS))
    late = f"carrier = '{carrier}' AND delivered_date IS NOT NULL AND delivered_date > promised_date AND "
    return _sum("late-deliveries", f"How many {carrier} shipments sent {_said(days, s, e)} were delivered after "
                "their promised date?", "count", "COUNT(*)", "shipments", late + _in("shipped_date", s, e),
                late + _after("shipped_date", s, e), "id, 1")


def month_revenue(anchor: date, rng: random.Random, back: int) -> Question:
    s, e, name = month_before(anchor, back)
    done = "status = 'completed' AND "
    return _sum("month-revenue", f"What was our revenue from completed orders in {name} ({s} through {e})?",
                "money", "SUM(total_cents) / 100.0", "orders", done + _in("order_date", s, e),
                done + _after("order_date", s, e), "id, total_cents / 100.0")


def category_units(anchor: date, rng: random.Random, days: int) -> Question:
    s, e = window(anchor, days)
    cat = rng.choice(data.CATEGORIES)
    src = f"{COMPLETED_ITEMS} JOIN products p ON p.id = i.product_id JOIN categories c ON c.id = p.category_id"
    cond = f"c.name = '{cat}' AND o.status = 'completed' AND "
    return _sum("category-units", f"How many units of {cat} products were sold in completed orders "
                f"{_said(days, s, e)}?", "count", "SUM(i.quantity)", src, cond + _in("o.order_date", s, e),
                cond + _after("o.order_date", s, e), "i.id, i.quantity")


def largest_order(anchor: date, rng: random.Random, days: int) -> Question:
    s, e = window(anchor, days)
    return _sum("largest-order", f"What was the largest single order total {_said(days, s, e)}, in dollars?",
                "money", "MAX(total_cents) / 100.0", "orders", _in("order_date", s, e), _after("order_date", s, e))


def gross_margin(anchor: date, rng: random.Random, days: int) -> Question:
    s, e = window(anchor, days)
    src = f"{COMPLETED_ITEMS} JOIN products p ON p.id = i.product_id"
    cond = "o.status = 'completed' AND "
    return _sum("gross-margin", f"What was the gross margin (sales after discounts minus product cost) of "
                f"completed orders {_said(days, s, e)}, in dollars?", "money",
                f"SUM({LINE} - i.quantity * p.unit_cost_cents) / 100.0", src, cond + _in("o.order_date", s, e),
                cond + _after("o.order_date", s, e), f"i.id, ({LINE} - i.quantity * p.unit_cost_cents) / 100.0")


def units_per_order(anchor: date, rng: random.Random, days: int) -> Question:
    s, e = window(anchor, days)
    cond = "o.status = 'completed' AND "
    return _sum("units-per-order", f"On average, how many units did a completed order {_said(days, s, e)} "
                "contain?", "average", "1.0 * SUM(i.quantity) / COUNT(DISTINCT i.order_id)", COMPLETED_ITEMS,
                cond + _in("o.order_date", s, e), cond + _after("o.order_date", s, e))


def warehouse_shipments(anchor: date, rng: random.Random, days: int) -> Question:
    s, e = window(anchor, days)
    name = rng.choice([w for w, _ in data.WAREHOUSES])
    src = "shipments s JOIN warehouses w ON w.id = s.warehouse_id"
    return _sum("warehouse-shipments", f"How many shipments left {name} {_said(days, s, e)}?", "count",
                "COUNT(*)", src, f"w.name = '{name}' AND " + _in("s.shipped_date", s, e),
                f"w.name = '{name}' AND " + _after("s.shipped_date", s, e), "s.id, 1")


def top_product(anchor: date, rng: random.Random, days: int) -> Question:
    s, e = window(anchor, days)
    cat = rng.choice(data.CATEGORIES)
    return _top("top-product", f"Which {cat} product sold the most units in completed orders "
                f"{_said(days, s, e)}? Give its SKU.", "text",
                f"SELECT p.sku AS label, SUM(i.quantity) AS metric FROM {COMPLETED_ITEMS} JOIN products p "
                "ON p.id = i.product_id JOIN categories c ON c.id = p.category_id WHERE o.status = 'completed' "
                f"AND c.name = '{cat}' AND {_in('o.order_date', s, e)} GROUP BY p.sku")


def top_category(anchor: date, rng: random.Random, days: int) -> Question:
    s, e = window(anchor, days)
    region = rng.choice(data.REGIONS)
    return _top("top-category", f"Which product category brought in the most sales (after discounts) from "
                f"completed orders of customers in the {region} region {_said(days, s, e)}?", "text",
                f"SELECT c.name AS label, SUM({LINE}) AS metric FROM {COMPLETED_ITEMS} JOIN products p "
                "ON p.id = i.product_id JOIN categories c ON c.id = p.category_id JOIN customers u "
                f"ON u.id = o.customer_id JOIN regions r ON r.id = u.region_id WHERE o.status = 'completed' "
                f"AND r.name = '{region}' AND {_in('o.order_date', s, e)} GROUP BY c.name")


def top_region(anchor: date, rng: random.Random, days: int) -> Question:
    s, e = window(anchor, days)
    ch = rng.choice([c for c, _ in data.CHANNELS])
    return _top("top-region", f"Customers of which region placed the most {ch} orders {_said(days, s, e)}?",
                "text", "SELECT r.name AS label, COUNT(*) AS metric FROM orders o JOIN customers c "
                f"ON c.id = o.customer_id JOIN regions r ON r.id = c.region_id WHERE o.channel = '{ch}' "
                f"AND {_in('o.order_date', s, e)} GROUP BY r.name")


def top_customer(anchor: date, rng: random.Random, days: int) -> Question:
    s, e = window(anchor, days)
    return _top("top-customer", f"Which customer spent the most on completed orders {_said(days, s, e)}?", "id",
                "SELECT customer_id AS label, SUM(total_cents) AS metric FROM orders WHERE status = 'completed' "
                f"AND {_in('order_date', s, e)} GROUP BY customer_id")


AGGREGATE_TEMPLATES: dict[str, tuple[Template, tuple[int, ...]]] = {
    "orders-count": (orders_count, (7, 30, 90)),
    "channel-orders": (channel_orders, (30, 14, 60)),
    "revenue": (revenue, (30, 7, 90)),
    "region-revenue": (region_revenue, (90, 30, 60)),
    "average-order": (average_order, (30, 90, 14)),
    "distinct-customers": (distinct_customers, (30, 7, 90)),
    "refunds-total": (refunds_total, (90, 30, 180)),
    "return-rate": (return_rate, (90, 180, 60)),
    "signups": (signups, (30, 90, 60)),
    "late-deliveries": (late_deliveries, (90, 60, 30)),
    "month-revenue": (month_revenue, (1, 2, 3)),
    "category-units": (category_units, (30, 90, 60)),
    "largest-order": (largest_order, (30, 7, 90)),
    "gross-margin": (gross_margin, (30, 90, 14)),
    "units-per-order": (units_per_order, (30, 90, 60)),
    "warehouse-shipments": (warehouse_shipments, (30, 14, 60)),
    "top-product": (top_product, (30, 90, 60)),
    "top-category": (top_category, (30, 90, 60)),
    "top-region": (top_region, (30, 90, 60)),
    "top-customer": (top_customer, (90, 30, 60)),
}
"""Template name -> (template, the window (days, or months back) of each of its three instances)."""
