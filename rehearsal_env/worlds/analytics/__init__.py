"""World ``analytics``: a retailer's sales and operations warehouse, asked questions by the business.

Spec sheet
==========
Application
    A read-only data warehouse: ``regions``, ``categories``, ``warehouses``,
    ``customers``, ``products``, ``orders``, ``order_items``, ``shipments``,
    ``returns`` (~62k seed rows: two years of sales dated back from
    ``data_anchor`` 2025-06-30, seed 11). Money is integer cents, dates are ISO
    text.

Tools (all read)
    ``run_sql(sql)``: one read-only SELECT; at most 100 rows (the rest cut
    with a note), stopped after 5 s; its result says whether the database
    aggregated (``"aggregated": true``).
    ``list_tables()``, ``describe_table(table)``, ``get_order(order_id)``,
    ``get_customer(customer_id)``, ``find_products(text)``.
Built-ins
    ``finish(message, answer)`` records the answer in ``final_answers``;
    ``give_up(reason)``, ``ask_customer(question)``.

Roles
    ``analyst``: every tool.
    ``store_manager``: ``get_order``, ``get_customer``, ``find_products`` (no SQL console).

Policies (and the hard rules that enforce them)
    1. Never put a customer's email address in an answer or closing message
       (``no customer email address in an answer``).

Scenarios (every one a question; ``scope`` is empty: nothing may change)
    20 aggregate templates x 3 instances (train, dev, holdout), method
    ``aggregate``: orders-count, channel-orders, revenue, region-revenue,
    average-order, distinct-customers, refunds-total, return-rate, signups,
    late-deliveries, month-revenue, category-units, largest-order,
    gross-margin, units-per-order, warehouse-shipments, top-product,
    top-category, top-region, top-customer. Windows are relative to the
    anchor ("the last 30 days", a calendar month) and spelled out in the request.
    5 lookup templates x 3 for the store manager, method ``lookup``:
    order-status, order-carrier, order-warehouse, order-total, order-customer.
    3 changes of request (``changed-*``): the customer asks again after the
    first turn; the goal check belongs to the second question.
    Reference: run the aggregating query (or read the order), then finish
    with the answer. Wrong solutions: ``wrong:constant-answer``,
    ``wrong:sum-in-model`` (the model adds up rows the console cut off),
    ``wrong:off-by-one-window``, ``wrong:first-request-only``, ``wrong:leak-email``.

Checks
    Goal: ``the answer matches the oracle``: one SELECT comparing the latest
    ``final_answers.answer`` with the oracle query run on the same database,
    within the question's tolerance (0 for counts and ids, 0.01 for money and
    averages, 0.1 for percentages; text case-insensitively).
    Hard rule: ``no customer email address in an answer``.
"""

from __future__ import annotations

from datetime import date

from .._world import Policy, Role, World
from . import data, scenarios
from .schema import TABLES
from .tools import ANALYST_TOOLS, MANAGER_TOOLS, TOOLS

DATA_ANCHOR = date(2025, 6, 30)
SEED = 11

POLICIES = (
    Policy("Never put a customer's email address in an answer or a closing message.",
           ("no customer email address in an answer",)),
)


def build_world() -> World:
    """The ``analytics`` world."""
    return World(
        name="analytics",
        description="A retailer's sales and operations warehouse: read-only SQL questions with SQL oracles.",
        tables=TABLES,
        tools=TOOLS,
        roles=(
            Role("analyst", "Answers the business's questions with SQL on the warehouse.", ANALYST_TOOLS),
            Role("store_manager", "Looks up single orders and customers; no SQL console.", MANAGER_TOOLS),
        ),
        policies=POLICIES,
        data_anchor=DATA_ANCHOR,
        seed=SEED,
        generate_rows=data.generate,
        generate_scenarios=scenarios.generate,
    )
