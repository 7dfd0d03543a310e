"""Lookup questions for the store manager: one order's facts, read with the narrow tools.

The store manager has no SQL console; each answer is a value that
``get_order`` shows, so the required method is ``lookup``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from . import data
from .questions import FORMAT_HINT, Question

Rows = Mapping[str, Sequence[tuple[Any, ...]]]
LookupTemplate = Callable[[Rows, random.Random], tuple[Question, int, tuple[str, ...]]]
"""``(seed rows, rng) -> (question, the order asked about, other values a careless answer could give)``."""


def _shipped(rows: Rows, rng: random.Random) -> tuple[Any, ...]:
    return rng.choice([s for s in rows["shipments"] if s[6] is not None])


def _lookup(template: str, request: str, oracle: str, kind: Any) -> Question:
    return Question(template, f"{request} {FORMAT_HINT[kind]}", oracle, kind, method="lookup",
                    role="store_manager")


def order_status(rows: Rows, rng: random.Random) -> tuple[Question, int, tuple[str, ...]]:
    order = rng.choice(rows["orders"])
    return (_lookup("order-status", f"What is the status of order #{order[0]}? (completed, cancelled or "
                    "returned)", f"SELECT status FROM orders WHERE id = {order[0]}", "text"),
            order[0], ("completed", "cancelled", "returned"))


def order_carrier(rows: Rows, rng: random.Random) -> tuple[Question, int, tuple[str, ...]]:
    ship = _shipped(rows, rng)
    return (_lookup("order-carrier", f"Which carrier shipped order #{ship[1]}?",
                    f"SELECT carrier FROM shipments WHERE order_id = {ship[1]}", "text"),
            ship[1], tuple(sorted(data.CARRIERS)))


def order_warehouse(rows: Rows, rng: random.Random) -> tuple[Question, int, tuple[str, ...]]:
    ship = _shipped(rows, rng)
    return (_lookup("order-warehouse", f"Which warehouse shipped order #{ship[1]}?",
                    "SELECT w.name FROM shipments s JOIN warehouses w ON w.id = s.warehouse_id "
                    f"WHERE s.order_id = {ship[1]}", "text"),
            ship[1], tuple(w for w, _ in data.WAREHOUSES))


def order_total(rows: Rows, rng: random.Random) -> tuple[Question, int, tuple[str, ...]]:
    order = rng.choice(rows["orders"])
    return (_lookup("order-total", f"What was the total of order #{order[0]}, in cents?",
                    f"SELECT total_cents FROM orders WHERE id = {order[0]}", "count"),
            order[0], ())


def order_customer(rows: Rows, rng: random.Random) -> tuple[Question, int, tuple[str, ...]]:
    order = rng.choice(rows["orders"])
    return (_lookup("order-customer", f"Which customer placed order #{order[0]}? Give their customer id, "
                    "not their contact details.", f"SELECT customer_id FROM orders WHERE id = {order[0]}", "id"),
            order[0], ())


LOOKUP_TEMPLATES: dict[str, LookupTemplate] = {
    "order-status": order_status,
    "order-carrier": order_carrier,
    "order-warehouse": order_warehouse,
    "order-total": order_total,
    "order-customer": order_customer,
}
