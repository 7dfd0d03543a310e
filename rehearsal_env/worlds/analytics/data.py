"""Deterministic seed data for the analytics warehouse, from a seed and the frozen ``data_anchor``.

Two years of a retailer's sales up to the anchor day: 6 regions, 8 categories,
5 warehouses, 2,500 customers, 120 products, ~14,000 orders with ~31,000
items, ~13,000 shipments and ~900 returns (about 62k rows). Every date is
computed back from the anchor, never from the wall clock; product popularity
is skewed so top-N questions have clear winners.
"""

from __future__ import annotations

import random
from datetime import date, timedelta
from typing import Any

REGIONS = ("North", "South", "East", "West", "Central", "Islands")
CATEGORIES = ("Kitchen", "Audio", "Outdoor", "Home", "Office", "Toys", "Garden", "Sports")
NOUNS = {
    "Kitchen": ("Kettle", "Chef Knife", "Blender", "Toaster", "Coffee Grinder"),
    "Audio": ("Headphones", "Speaker", "Earbuds", "Turntable", "Soundbar"),
    "Outdoor": ("Tent", "Backpack", "Headlamp", "Sleeping Bag", "Water Filter"),
    "Home": ("Desk Lamp", "Throw Blanket", "Wall Clock", "Plant Pot", "Doormat"),
    "Office": ("Notebook", "Desk Chair", "Monitor Stand", "Pen Set", "Keyboard"),
    "Toys": ("Puzzle", "Building Set", "Kite", "Board Game", "Plush Bear"),
    "Garden": ("Hose", "Pruner", "Planter", "Bird Feeder", "Watering Can"),
    "Sports": ("Yoga Mat", "Dumbbell", "Jump Rope", "Football", "Water Bottle"),
}
VARIANTS = ("Basic", "Pro", "Max")
WAREHOUSES = (("Northgate DC", 1), ("Southport DC", 2), ("Eastfield DC", 3), ("Westbrook DC", 4),
              ("Midland DC", 5))
CARRIERS = {"UPS": 3, "FedEx": 3, "DHL": 5, "USPS": 5}
"""Carrier and the days it promises from shipping to delivery."""
CHANNELS = (("web", 60), ("store", 30), ("phone", 10))
SEGMENTS = (("consumer", 70), ("business", 25), ("enterprise", 5))
RETURN_REASONS = ("damaged", "wrong size", "not as described", "changed mind", "late delivery")
FIRST = ("Ada Ben Cleo Dev Eva Finn Gia Hugo Ines Jon Kai Lena Milo Nia Omar Pia Quin Rosa Sami Tara "
         "Uma Vik Wren Xena Yuri Zoe Amir Bea Cruz Dana").split()
LAST = ("Abbott Baker Chen Diaz Evans Fischer Garcia Hale Ito Jensen Khan Lopez Moreau Novak Okafor "
        "Patel Quinn Rossi Silva Tanaka Ueda Varga Weber Xu Young Zhang").split()

N_CUSTOMERS = 2500
N_ORDERS = 14_000
HISTORY_DAYS = 730

Row = tuple[Any, ...]


def _weighted(rng: random.Random, pairs: tuple[tuple[str, int], ...]) -> str:
    return rng.choices([p[0] for p in pairs], weights=[p[1] for p in pairs])[0]


def _day(anchor: date, days_ago: int) -> str:
    return (anchor - timedelta(days=days_ago)).isoformat()


def _products(rng: random.Random) -> list[Row]:
    rows: list[Row] = []
    for c, category in enumerate(CATEGORIES, start=1):
        for noun in NOUNS[category]:
            for variant in VARIANTS:
                pid = len(rows) + 1
                price = rng.randint(5, 300) * 100 + rng.choice((0, 49, 99))
                cost = price * rng.randint(40, 75) // 100
                rows.append((pid, f"{category[:3].upper()}-{pid:04d}", f"{variant} {noun}", c, price, cost))
    return rows


def _customers(rng: random.Random, anchor: date) -> tuple[list[Row], list[int]]:
    rows: list[Row] = []
    ages: list[int] = []
    for i in range(1, N_CUSTOMERS + 1):
        first, last = rng.choice(FIRST), rng.choice(LAST)
        age = rng.randint(0, HISTORY_DAYS + 180)
        ages.append(age)
        rows.append((i, f"{first} {last}", f"{first.lower()}.{last.lower()}{i}@example.com",
                     rng.randint(1, len(REGIONS)), _weighted(rng, SEGMENTS), _day(anchor, age)))
    return rows, ages


def generate(seed: int, anchor: date) -> dict[str, list[Row]]:
    """Rows for every analytics table, keyed by table name (ids start at 1)."""
    rng = random.Random(seed)
    products = _products(rng)
    popularity = [1.0 / (rank + 1) ** 0.7 for rank in range(len(products))]
    rng.shuffle(popularity)
    customers, signup_age = _customers(rng, anchor)
    orders: list[Row] = []
    items: list[Row] = []
    shipments: list[Row] = []
    returns: list[Row] = []
    for oid in range(1, N_ORDERS + 1):
        days_ago = rng.randrange(HISTORY_DAYS)
        cust = rng.randrange(N_CUSTOMERS)
        while signup_age[cust] < days_ago:  # only customers signed up by then order
            cust = rng.randrange(N_CUSTOMERS)
        total = 0
        for _ in range(rng.choice((1, 1, 2, 2, 2, 3, 4))):
            product = rng.choices(products, weights=popularity)[0]
            quantity = rng.choice((1, 1, 1, 2, 3))
            discount = product[4] * quantity * rng.randint(5, 20) // 100 if rng.random() < 0.2 else 0
            total += product[4] * quantity - discount
            items.append((len(items) + 1, oid, product[0], quantity, product[4], discount))
        roll = rng.random()
        status = "cancelled" if roll < 0.05 else "returned" if roll < 0.12 else "completed"
        if status != "cancelled":
            shipped_ago = days_ago - rng.randint(0, 2)
            if shipped_ago >= 0:
                carrier = rng.choice(sorted(CARRIERS))
                transit = rng.randint(1, CARRIERS[carrier] + 3)
                delivered_ago = shipped_ago - transit
                region = customers[cust][3]
                warehouse = region if region <= len(WAREHOUSES) else rng.randint(1, len(WAREHOUSES))
                shipments.append((len(shipments) + 1, oid, warehouse, carrier, _day(anchor, shipped_ago),
                                  _day(anchor, shipped_ago - CARRIERS[carrier]),
                                  _day(anchor, delivered_ago) if delivered_ago >= 0 else None))
                if status == "returned" and delivered_ago >= 1:
                    back = rng.randint(1, min(20, delivered_ago))
                    refund = total if rng.random() < 0.7 else total * rng.randint(20, 80) // 100
                    returns.append((len(returns) + 1, oid, _day(anchor, delivered_ago - back),
                                    rng.choice(RETURN_REASONS), refund))
                elif status == "returned":
                    status = "completed"
            elif status == "returned":
                status = "completed"
        orders.append((oid, cust + 1, _day(anchor, days_ago), status, _weighted(rng, CHANNELS), total))
    return {
        "regions": [(i, name) for i, name in enumerate(REGIONS, start=1)],
        "categories": [(i, name) for i, name in enumerate(CATEGORIES, start=1)],
        "warehouses": [(i, name, region) for i, (name, region) in enumerate(WAREHOUSES, start=1)],
        "customers": customers,
        "products": products,
        "orders": orders,
        "order_items": items,
        "shipments": shipments,
        "returns": returns,
    }
