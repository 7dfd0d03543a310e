"""Deterministic seed data for the shop, from a seed and the frozen ``data_anchor``.

About 1,200 customers, 150 products, 3,500 orders with their items, payments,
shipments, 600 tickets and their messages (~20k rows). Every date is computed
backwards from the anchor; nothing reads the wall clock. Order status follows
age: older than 10 days delivered, 4-10 days shipped, newer paid (some
cancelled), so each scenario template finds orders in the state it needs.
"""

from __future__ import annotations

import random
from datetime import date, datetime, timedelta
from typing import Any

FIRST = ("Ada Ben Cleo Dev Eva Finn Gia Hugo Ines Jon Kai Lena Milo Nia Omar Pia Quin Rosa Sami Tara "
         "Uma Vik Wren Xena Yuri Zoe Amir Bea Cruz Dana").split()
LAST = ("Abbott Baker Chen Diaz Evans Fischer Garcia Hale Ito Jensen Khan Lopez Moreau Novak Okafor "
        "Patel Quinn Rossi Silva Tanaka Ueda Varga Weber Xu Young Zhang").split()
STREETS = ("Oak St", "Maple Ave", "Harbor Rd", "Mill Lane", "Station Rd", "Elm St", "Park Way", "High St")
CITIES = ("Springfield", "Riverton", "Lakeside", "Fairview", "Georgetown", "Ashford")
CATEGORIES = {
    "kitchen": ("Kettle", "Chef Knife", "Cutting Board", "Coffee Grinder", "Toaster"),
    "audio": ("Headphones", "Speaker", "Earbuds", "Turntable", "Soundbar"),
    "outdoor": ("Tent", "Backpack", "Headlamp", "Sleeping Bag", "Water Filter"),
    "home": ("Desk Lamp", "Throw Blanket", "Wall Clock", "Plant Pot", "Doormat"),
    "office": ("Notebook", "Desk Chair", "Monitor Stand", "Pen Set", "Keyboard"),
}
CARRIERS = ("UPS", "DHL", "FedEx", "USPS")
SUBJECTS = ("Where is my order?", "Damaged item", "Wrong size", "Change of address", "Billing question",
            "Return request")

N_CUSTOMERS = 1200
N_PRODUCTS = 150
N_ORDERS = 3500
N_TICKETS = 600


def _stamp(anchor: date, days_ago: float) -> str:
    moment = datetime(anchor.year, anchor.month, anchor.day, 12) - timedelta(days=days_ago)
    return moment.replace(microsecond=0).isoformat()


def generate(seed: int, anchor: date) -> dict[str, list[tuple[Any, ...]]]:
    """Rows for every shop table, keyed by table name (ids start at 1)."""
    rng = random.Random(seed)
    rows: dict[str, list[tuple[Any, ...]]] = {}

    customers = []
    for i in range(1, N_CUSTOMERS + 1):
        first, last = rng.choice(FIRST), rng.choice(LAST)
        address = f"{rng.randint(1, 999)} {rng.choice(STREETS)}, {rng.choice(CITIES)}"
        customers.append((i, f"{first} {last}", f"{first.lower()}.{last.lower()}{i}@example.com",
                          f"+1-555-{rng.randint(1000, 9999)}", address, rng.choice(("standard", "gold")),
                          _stamp(anchor, rng.uniform(200, 900))))
    rows["customers"] = customers

    products = []
    pid = 0
    for category, names in CATEGORIES.items():
        for name in names:
            for variant in ("Basic", "Pro", "Max", "Mini", "Classic", "Eco"):
                pid += 1
                if pid > N_PRODUCTS:
                    break
                products.append((pid, f"{category[:3].upper()}-{pid:04d}", f"{variant} {name}", category,
                                 rng.randint(8, 180) * 100 + rng.choice((0, 49, 99)), rng.randint(0, 400)))
    rows["products"] = products

    orders: list[tuple[Any, ...]] = []
    items: list[tuple[Any, ...]] = []
    payments: list[tuple[Any, ...]] = []
    shipments: list[tuple[Any, ...]] = []
    for oid in range(1, N_ORDERS + 1):
        cust = customers[rng.randrange(N_CUSTOMERS)]
        age = rng.uniform(0.2, 180)
        lines = []
        for _ in range(rng.choice((1, 1, 2, 2, 3, 4))):
            product = products[rng.randrange(len(products))]
            lines.append((product[0], rng.choice((1, 1, 1, 2, 3)), product[4]))
        total = sum(q * p for _, q, p in lines)
        if age > 10:
            status = "delivered"
        elif age > 4:
            status = "shipped"
        else:
            status = "paid"
        if rng.random() < 0.04:
            status = "cancelled"
        placed = _stamp(anchor, age)
        orders.append((oid, cust[0], status, placed, total, cust[4], placed))
        for product_id, quantity, price in lines:
            items.append((len(items) + 1, oid, product_id, quantity, price))
        pay_status = "refunded" if status == "cancelled" else "captured"
        payments.append((len(payments) + 1, oid, f"pay_{seed % 1000:03d}{oid:06d}", total, pay_status, placed))
        if status in ("shipped", "delivered"):
            shipments.append((len(shipments) + 1, oid, rng.choice(CARRIERS),
                              f"TRK{rng.randint(10**9, 10**10 - 1)}", "in_transit" if status == "shipped"
                              else "delivered", _stamp(anchor, age - 1)))
    rows.update(orders=orders, order_items=items, payments=payments, shipments=shipments)

    tickets: list[tuple[Any, ...]] = []
    messages: list[tuple[Any, ...]] = []
    for tid in range(1, N_TICKETS + 1):
        order = orders[rng.randrange(N_ORDERS)]
        age = rng.uniform(0.1, 60)
        status = "open" if age < 5 else rng.choice(("solved", "solved", "pending"))
        subject = rng.choice(SUBJECTS)
        created = _stamp(anchor, age)
        tickets.append((tid, order[1], order[0], subject, status, rng.choice(("low", "normal", "high")),
                        created, created))
        messages.append((len(messages) + 1, tid, "customer", f"{subject} (order #{order[0]})", created))
        if status != "open":
            messages.append((len(messages) + 1, tid, "agent", "Thanks, we are on it.", _stamp(anchor, age - 0.5)))
    rows.update(tickets=tickets, ticket_messages=messages, refunds=[], emails=[], store_credits=[])
    return rows
