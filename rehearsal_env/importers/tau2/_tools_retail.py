"""tau2's retail tools as SQL, with tau2's semantics (quirks included), tagged read/write as tau2 tags them.

Behaviour follows tau2-bench's ``domains/retail/tools.py`` (MIT, Sierra
Research), re-implemented over the tables of :mod:`._schema`. Quirks kept on
purpose, since tau2's state hash depends on them: cancelling refunds every
entry of the payment history (refunds included); a modified order's items all
get the price and options of the *last* new variant; the price difference of
a modification is stored unrounded while gift-card balances are rounded to
cents; a return may go to any gift card; error texts are tau2's.
"""

from __future__ import annotations

import json
from typing import Any

from ...backends import Database
from ...tools import ToolContext, ToolFailed, tool
from . import _export as ex
from ._schema import CHILD
from ._tools_common import calculate, transfer_to_human_agents
from ._write import one, put_children, update

_ORDER_ID = "The order id, such as '#W0000000'. Be careful there is a '#' symbol at the beginning of the order id."
_ADDRESS_COLUMNS = ("address1", "address2", "city", "state", "country", "zip")


def _order(db: Database, order_id: str) -> tuple[Any, ...]:
    return one(db, "SELECT * FROM orders WHERE order_id = ?", (order_id,), "Order not found")


def _user(db: Database, user_id: str) -> tuple[Any, ...]:
    return one(db, "SELECT * FROM users WHERE user_id = ?", (user_id,), "User not found")


def _method(db: Database, user_id: str, method_id: str) -> tuple[Any, ...]:
    user = _user(db, user_id)
    return one(db, "SELECT * FROM payment_methods WHERE user_row = ? AND method_id = ?", (user[0], method_id),
               "Payment method not found")


def _variant(db: Database, product_id: str, item_id: str) -> tuple[Any, ...]:
    product = one(db, "SELECT id FROM products WHERE product_id = ?", (product_id,), "Product not found")
    return one(db, "SELECT * FROM variants WHERE product_row = ? AND item_id = ?", (product[0], item_id),
               "Variant not found")


def _items(db: Database, order_row: int) -> list[dict[str, Any]]:
    return [{"id": r[0], "product_id": r[4], "item_id": r[5], "price": r[6], "options": r[7]}
            for r in db.query("SELECT * FROM order_items WHERE order_row = ? ORDER BY position", (order_row,))]


def _payments(db: Database, order_row: int) -> list[tuple[Any, ...]]:
    return db.query("SELECT * FROM order_payments WHERE order_row = ? ORDER BY position", (order_row,))


def _append_payments(db: Database, order_row: int, new: list[tuple[str, float, str]]) -> None:
    kept = [{"transaction_type": p[3], "amount": p[4], "payment_method_id": p[5]} for p in _payments(db, order_row)]
    kept += [{"transaction_type": t, "amount": float(a), "payment_method_id": m} for t, a, m in new]
    put_children(db, "order_payments", "order_row", order_row, order_row * CHILD, kept)


def _set_gift_balance(db: Database, method: tuple[Any, ...], balance: float) -> None:
    update(db, "payment_methods", method[0], {"balance": round(balance, 2)})


def _check_counts(order_items: list[dict[str, Any]], item_ids: list[str], message: str) -> None:
    all_ids = [i["item_id"] for i in order_items]
    for item_id in item_ids:
        if item_ids.count(item_id) > all_ids.count(item_id):
            raise ToolFailed(message.format(item_id=item_id))


def _order_result(db: Database, order_id: str) -> dict[str, Any]:
    return ex.order_by_row(db, _order(db, order_id))


# -- reads ----------------------------------------------------------------------------------------
@tool("read")
def find_user_id_by_name_zip(ctx: ToolContext, first_name: str, last_name: str, zip: str) -> str:
    """Find user id by first name, last name, and zip code. If the user is not found, the function will return
    an error message. By default, find user id by email, and only call this function if the user is not found
    by email or cannot remember email.

    Args:
        first_name: The first name of the customer, such as 'John'.
        last_name: The last name of the customer, such as 'Doe'.
        zip: The zip code of the customer, such as '12345'.
    """
    for user_id, first, last, code in ctx.db.query("SELECT user_id, first_name, last_name, zip FROM users "
                                                   "ORDER BY id"):
        if first.lower() == first_name.lower() and last.lower() == last_name.lower() and code == zip:
            return str(user_id)
    raise ToolFailed("User not found")


@tool("read")
def find_user_id_by_email(ctx: ToolContext, email: str) -> str:
    """Find user id by email. If the user is not found, the function will return an error message.

    Args:
        email: The email of the user, such as 'something@example.com'.
    """
    for user_id, address in ctx.db.query("SELECT user_id, email FROM users ORDER BY id"):
        if address.lower() == email.lower():
            return str(user_id)
    raise ToolFailed("User not found")


@tool("read")
def get_order_details(ctx: ToolContext, order_id: str) -> dict[str, Any]:
    """Get the status and details of an order.

    Args:
        order_id: The order id, such as '#W0000000'. Be careful there is a '#' symbol at the beginning of the
            order id.
    """
    return _order_result(ctx.db, order_id)


@tool("read")
def get_product_details(ctx: ToolContext, product_id: str) -> dict[str, Any]:
    """Get the inventory details of a product.

    Args:
        product_id: The product id, such as '6086499569'. Be careful the product id is different from the item id.
    """
    row = one(ctx.db, "SELECT * FROM products WHERE product_id = ?", (product_id,), "Product not found")
    return ex.product_by_row(ctx.db, row)


@tool("read")
def get_item_details(ctx: ToolContext, item_id: str) -> dict[str, Any]:
    """Get the inventory details of an item.

    Args:
        item_id: The item id, such as '6086499569'. Be careful the item id is different from the product id.
    """
    row = one(ctx.db, "SELECT * FROM variants WHERE item_id = ? ORDER BY product_row, position LIMIT 1",
              (item_id,), "Item not found")
    return ex.retail_variant(row)


@tool("read")
def get_user_details(ctx: ToolContext, user_id: str) -> dict[str, Any]:
    """Get the details of a user, including their orders.

    Args:
        user_id: The user id, such as 'sara_doe_496'.
    """
    return ex.user_by_row(ctx.db, _user(ctx.db, user_id), domain="retail")


@tool("read")
def list_all_product_types(ctx: ToolContext) -> str:
    """List the name and product id of all product types. Each product type has a variety of different items
    with unique item ids and options. There are only 50 product types in the store.
    """
    products = {name: pid for pid, name in ctx.db.query("SELECT product_id, name FROM products ORDER BY id")}
    return json.dumps(products, sort_keys=True)


# -- writes ---------------------------------------------------------------------------------------
@tool("write")
def cancel_pending_order(ctx: ToolContext, order_id: str, reason: str) -> dict[str, Any]:
    """Cancel a pending order. If the order is already processed or delivered, it cannot be cancelled. The agent
    needs to explain the cancellation detail and ask for explicit user confirmation (yes/no) to proceed. If the
    user confirms, the order status will be changed to 'cancelled' and the payment will be refunded. The refund
    will be added to the user's gift card balance immediately if the payment was made using a gift card,
    otherwise the refund would take 5-7 business days to process. The function returns the order details after
    the cancellation.

    Args:
        order_id: The order id, such as '#W0000000'. Be careful there is a '#' symbol at the beginning of the
            order id.
        reason: The reason for cancellation, which should be either 'no longer needed' or 'ordered by mistake'.
    """
    db = ctx.db
    order = _order(db, order_id)
    if order[9] != "pending":
        raise ToolFailed("Non-pending order cannot be cancelled")
    if reason not in {"no longer needed", "ordered by mistake"}:
        raise ToolFailed("Invalid reason")
    refunds = []
    for payment in _payments(db, order[0]):
        refunds.append(("refund", payment[4], payment[5]))
        method = _method(db, order[2], payment[5])
        if method[4] == "gift_card":
            _set_gift_balance(db, method, method[7] + payment[4])
    update(db, "orders", order[0], {"status": "cancelled", "cancel_reason": reason})
    _append_payments(db, order[0], refunds)
    return _order_result(db, order_id)


def _price_difference(db: Database, order_items: list[dict[str, Any]], item_ids: list[str],
                      new_item_ids: list[str], *, distinct: bool) -> tuple[float, tuple[Any, ...] | None]:
    """tau2's running price difference (unrounded, in tau2's order) and the last new variant."""
    diff: float = 0
    variant = None
    for item_id, new_item_id in zip(item_ids, new_item_ids, strict=False):
        if distinct and item_id == new_item_id:
            raise ToolFailed("The new item id should be different from the old item id")
        item = next((i for i in order_items if i["item_id"] == item_id), None)
        if item is None:
            raise ToolFailed(f"Item {item_id} not found")
        variant = _variant(db, item["product_id"], new_item_id)
        if not variant[5]:
            raise ToolFailed(f"New item {new_item_id} not found or available")
        diff += variant[6] - item["price"]
    return diff, variant


@tool("write")
def exchange_delivered_order_items(ctx: ToolContext, order_id: str, item_ids: list[str], new_item_ids: list[str],
                                   payment_method_id: str) -> dict[str, Any]:
    """Exchange items in a delivered order to new items of the same product type. For a delivered order, return
    or exchange can be only done once by the agent. The agent needs to explain the exchange detail and ask for
    explicit user confirmation (yes/no) to proceed.

    Args:
        order_id: The order id, such as '#W0000000'. Be careful there is a '#' symbol at the beginning of the
            order id.
        item_ids: The item ids to be exchanged, each such as '1008292230'. There could be duplicate items in the
            list.
        new_item_ids: The item ids to be exchanged for, each such as '1008292230'. There could be duplicate items
            in the list. Each new item id should match the item id in the same position and be of the same product.
        payment_method_id: The payment method id to pay or receive refund for the item price difference, such as
            'gift_card_0000000' or 'credit_card_0000000'. These can be looked up from the user or order details.
    """
    db = ctx.db
    order = _order(db, order_id)
    if order[9] != "delivered":
        raise ToolFailed("Non-delivered order cannot be exchanged")
    order_items = _items(db, order[0])
    _check_counts(order_items, item_ids, "Number of {item_id} not found.")
    if len(item_ids) != len(new_item_ids):
        raise ToolFailed("The number of items to be exchanged should match.")
    diff, _ = _price_difference(db, order_items, item_ids, new_item_ids, distinct=False)
    diff = round(diff, 2)
    method = _method(db, order[2], payment_method_id)
    if method[4] == "gift_card" and method[7] < diff:
        raise ToolFailed("Insufficient gift card balance to pay for the price difference")
    update(db, "orders", order[0], {
        "status": "exchange requested", "exchange_items": json.dumps(sorted(item_ids)),
        "exchange_new_items": json.dumps(sorted(new_item_ids)), "exchange_payment_method_id": payment_method_id,
        "exchange_price_difference": diff})
    return _order_result(db, order_id)


def _set_address(db: Database, table: str, row_id: int, address: tuple[str, ...]) -> None:
    update(db, table, row_id, dict(zip(_ADDRESS_COLUMNS, address, strict=True)))


@tool("write")
def modify_pending_order_address(ctx: ToolContext, order_id: str, address1: str, address2: str, city: str,
                                 state: str, country: str, zip: str) -> dict[str, Any]:
    """Modify the shipping address of a pending order. The agent needs to explain the modification detail and ask
    for explicit user confirmation (yes/no) to proceed.

    Args:
        order_id: The order id, such as '#W0000000'. Be careful there is a '#' symbol at the beginning of the
            order id.
        address1: The first line of the address, such as '123 Main St'.
        address2: The second line of the address, such as 'Apt 1' or ''.
        city: The city, such as 'San Francisco'.
        state: The state, such as 'CA'.
        country: The country, such as 'USA'.
        zip: The zip code, such as '12345'.
    """
    order = _order(ctx.db, order_id)
    if "pending" not in order[9]:
        raise ToolFailed("Non-pending order cannot be modified")
    _set_address(ctx.db, "orders", order[0], (address1, address2, city, state, country, zip))
    return _order_result(ctx.db, order_id)


@tool("write")
def modify_pending_order_items(ctx: ToolContext, order_id: str, item_ids: list[str], new_item_ids: list[str],
                               payment_method_id: str) -> dict[str, Any]:
    """Modify items in a pending order to new items of the same product type. For a pending order, this function
    can only be called once. The agent needs to explain the exchange detail and ask for explicit user
    confirmation (yes/no) to proceed.

    Args:
        order_id: The order id, such as '#W0000000'. Be careful there is a '#' symbol at the beginning of the
            order id.
        item_ids: The item ids to be modified, each such as '1008292230'. There could be duplicate items in the
            list.
        new_item_ids: The item ids to be modified for, each such as '1008292230'. There could be duplicate items in
            the list. Each new item id should match the item id in the same position and be of the same product.
        payment_method_id: The payment method id to pay or receive refund for the item price difference, such as
            'gift_card_0000000' or 'credit_card_0000000'. These can be looked up from the user or order details.
    """
    db = ctx.db
    order = _order(db, order_id)
    if order[9] != "pending":
        raise ToolFailed("Non-pending order cannot be modified")
    order_items = _items(db, order[0])
    _check_counts(order_items, item_ids, "{item_id} not found")
    if len(item_ids) != len(new_item_ids):
        raise ToolFailed("The number of items to be exchanged should match")
    diff, variant = _price_difference(db, order_items, item_ids, new_item_ids, distinct=True)
    method = _method(db, order[2], payment_method_id)
    if method[4] == "gift_card" and method[7] < diff:
        raise ToolFailed("Insufficient gift card balance to pay for the new item")
    _append_payments(db, order[0], [("payment" if diff > 0 else "refund", abs(diff), payment_method_id)])
    if method[4] == "gift_card":
        _set_gift_balance(db, method, method[7] - diff)
    for item_id, new_item_id in zip(item_ids, new_item_ids, strict=True):
        item = next(i for i in order_items if i["item_id"] == item_id)
        assert variant is not None  # item_ids is not empty here
        item.update(item_id=new_item_id, price=variant[6], options=variant[4])  # tau2: the last variant's
    for item in order_items:
        update(db, "order_items", item["id"], {"item_id": item["item_id"], "price": item["price"],
                                               "options": item["options"]})
    update(db, "orders", order[0], {"status": "pending (item modified)"})
    return _order_result(db, order_id)


@tool("write")
def modify_pending_order_payment(ctx: ToolContext, order_id: str, payment_method_id: str) -> dict[str, Any]:
    """Modify the payment method of a pending order. The agent needs to explain the modification detail and ask
    for explicit user confirmation (yes/no) to proceed.

    Args:
        order_id: The order id, such as '#W0000000'. Be careful there is a '#' symbol at the beginning of the
            order id.
        payment_method_id: The payment method id to pay or receive refund for the item price difference, such as
            'gift_card_0000000' or 'credit_card_0000000'. These can be looked up from the user or order details.
    """
    db = ctx.db
    order = _order(db, order_id)
    if "pending" not in order[9]:
        raise ToolFailed("Non-pending order cannot be modified")
    method = _method(db, order[2], payment_method_id)
    payments = _payments(db, order[0])
    if len(payments) != 1 or payments[0][3] != "payment":
        raise ToolFailed("There should be exactly one payment for a pending order")
    old_method_id, amount = payments[0][5], payments[0][4]
    if old_method_id == payment_method_id:
        raise ToolFailed("The new payment method should be different from the current one")
    if method[4] == "gift_card" and method[7] < amount:
        raise ToolFailed("Insufficient gift card balance to pay for the order")
    _append_payments(db, order[0], [("payment", amount, payment_method_id), ("refund", amount, old_method_id)])
    if method[4] == "gift_card":
        _set_gift_balance(db, method, method[7] - amount)
    old = _method(db, order[2], old_method_id)
    if old[4] == "gift_card":
        _set_gift_balance(db, old, old[7] + amount)
    return _order_result(db, order_id)


@tool("write")
def modify_user_address(ctx: ToolContext, user_id: str, address1: str, address2: str, city: str, state: str,
                        country: str, zip: str) -> dict[str, Any]:
    """Modify the default address of a user. The agent needs to explain the modification detail and ask for
    explicit user confirmation (yes/no) to proceed.

    Args:
        user_id: The user id, such as 'sara_doe_496'.
        address1: The first line of the address, such as '123 Main St'.
        address2: The second line of the address, such as 'Apt 1' or ''.
        city: The city, such as 'San Francisco'.
        state: The state, such as 'CA'.
        country: The country, such as 'USA'.
        zip: The zip code, such as '12345'.
    """
    user = _user(ctx.db, user_id)
    _set_address(ctx.db, "users", user[0], (address1, address2, city, state, country, zip))
    return ex.user_by_row(ctx.db, _user(ctx.db, user_id), domain="retail")


@tool("write")
def return_delivered_order_items(ctx: ToolContext, order_id: str, item_ids: list[str],
                                 payment_method_id: str) -> dict[str, Any]:
    """Return some items of a delivered order. The order status will be changed to 'return requested'. The agent
    needs to explain the return detail and ask for explicit user confirmation (yes/no) to proceed. The user will
    receive follow-up email for how and where to return the item.

    Args:
        order_id: The order id, such as '#W0000000'. Be careful there is a '#' symbol at the beginning of the
            order id.
        item_ids: The item ids to be returned, each such as '1008292230'. There could be duplicate items in the
            list.
        payment_method_id: The payment method id to pay or receive refund for the item price difference, such as
            'gift_card_0000000' or 'credit_card_0000000'. These can be looked up from the user or order details.
    """
    db = ctx.db
    order = _order(db, order_id)
    if order[9] != "delivered":
        raise ToolFailed("Non-delivered order cannot be returned")
    method = _method(db, order[2], payment_method_id)
    payments = _payments(db, order[0])
    if not payments:
        raise ToolFailed("list index out of range")
    if method[4] != "gift_card" and payment_method_id != payments[0][5]:
        raise ToolFailed("Payment method should be the original payment method")
    _check_counts(_items(db, order[0]), item_ids, "Some item not found")
    update(db, "orders", order[0], {"status": "return requested", "return_items": json.dumps(sorted(item_ids)),
                                    "return_payment_method_id": payment_method_id})
    return _order_result(db, order_id)


TOOLS = (calculate, cancel_pending_order, exchange_delivered_order_items, find_user_id_by_name_zip,
         find_user_id_by_email, get_order_details, get_product_details, get_item_details, get_user_details,
         list_all_product_types, modify_pending_order_address, modify_pending_order_items,
         modify_pending_order_payment, modify_user_address, return_delivered_order_items, transfer_to_human_agents)
"""Every retail tool of tau2, in tau2's order."""
