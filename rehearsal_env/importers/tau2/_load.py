"""tau2's ``db.json`` as rows of the tables in :mod:`._schema` (ids as :data:`._schema.CHILD` says)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ._schema import CHILD

Rows = dict[str, list[tuple[Any, ...]]]


def as_json(value: Any) -> str:
    """A list or dict as the JSON text a row holds (tau2's own order kept)."""
    return json.dumps(value)


def _address(a: Mapping[str, Any]) -> tuple[Any, ...]:
    return (a["address1"], a.get("address2"), a["city"], a["country"], a["state"], a["zip"])


def _opt_list(value: Sequence[str] | None) -> str | None:
    return None if value is None else as_json(list(value))


def retail_rows(db: Mapping[str, Any]) -> Rows:
    """Rows of every retail table from tau2's retail document."""
    out: Rows = {name: [] for name in ("products", "variants", "users", "payment_methods", "orders",
                                       "order_items", "order_fulfillments", "order_payments")}
    for p_row, product in enumerate(db["products"].values(), start=1):
        out["products"].append((p_row, product["product_id"], product["name"]))
        for pos, v in enumerate(product["variants"].values()):
            out["variants"].append((p_row * CHILD + pos, p_row, pos, v["item_id"], as_json(v["options"]),
                                    int(bool(v["available"])), float(v["price"])))
    for u_row, user in enumerate(db["users"].values(), start=1):
        out["users"].append((u_row, user["user_id"], user["name"]["first_name"], user["name"]["last_name"],
                             *_address(user["address"]), user["email"], as_json(user["orders"])))
        for pos, m in enumerate(user["payment_methods"].values()):
            balance = float(m["balance"]) if "balance" in m else None
            out["payment_methods"].append((u_row * CHILD + pos, u_row, pos, m["id"], m["source"], m.get("brand"),
                                           m.get("last_four"), balance))
    for o_row, order in enumerate(db["orders"].values(), start=1):
        diff = order.get("exchange_price_difference")
        out["orders"].append((
            o_row, order["order_id"], order["user_id"], *_address(order["address"]), order["status"],
            order.get("cancel_reason"), _opt_list(order.get("exchange_items")),
            _opt_list(order.get("exchange_new_items")), order.get("exchange_payment_method_id"),
            None if diff is None else float(diff), _opt_list(order.get("return_items")),
            order.get("return_payment_method_id")))
        for pos, item in enumerate(order["items"]):
            out["order_items"].append((o_row * CHILD + pos, o_row, pos, item["name"], item["product_id"],
                                       item["item_id"], float(item["price"]), as_json(item["options"])))
        for pos, f in enumerate(order["fulfillments"]):
            out["order_fulfillments"].append((o_row * CHILD + pos, o_row, pos, as_json(f["tracking_id"]),
                                              as_json(f["item_ids"])))
        for pos, pay in enumerate(order["payment_history"]):
            out["order_payments"].append((o_row * CHILD + pos, o_row, pos, pay["transaction_type"],
                                          float(pay["amount"]), pay["payment_method_id"]))
    return out


_TIMES = ("estimated_departure_time_est", "estimated_arrival_time_est", "actual_departure_time_est",
          "actual_arrival_time_est")


def airline_rows(db: Mapping[str, Any]) -> Rows:
    """Rows of every airline table from tau2's airline document."""
    out: Rows = {name: [] for name in ("flights", "flight_dates", "flight_cabins", "users", "payment_methods",
                                       "saved_passengers", "reservations", "reservation_flights",
                                       "reservation_passengers", "reservation_payments")}
    for f_row, flight in enumerate(db["flights"].values(), start=1):
        out["flights"].append((f_row, flight["flight_number"], flight["origin"], flight["destination"],
                               flight["scheduled_departure_time_est"], flight["scheduled_arrival_time_est"]))
        for pos, (day, status) in enumerate(flight["dates"].items()):
            d_row = f_row * CHILD + pos
            out["flight_dates"].append((d_row, f_row, pos, day, status["status"],
                                        *(status.get(t) for t in _TIMES)))
            for c_pos, cabin in enumerate(status.get("available_seats", {})):
                out["flight_cabins"].append((d_row * 10 + c_pos, d_row, c_pos, cabin,
                                             int(status["available_seats"][cabin]), int(status["prices"][cabin])))
    for u_row, user in enumerate(db["users"].values(), start=1):
        a = user["address"]
        out["users"].append((u_row, user["user_id"], user["name"]["first_name"], user["name"]["last_name"],
                             a["address1"], a.get("address2"), a["city"], a["country"], a["state"], a["zip"],
                             user["email"], user["dob"], user["membership"], as_json(user["reservations"])))
        for pos, m in enumerate(user["payment_methods"].values()):
            amount = float(m["amount"]) if "amount" in m else None
            out["payment_methods"].append((u_row * CHILD + pos, u_row, pos, m["id"], m["source"], m.get("brand"),
                                           m.get("last_four"), amount))
        for pos, p in enumerate(user["saved_passengers"]):
            out["saved_passengers"].append((u_row * CHILD + pos, u_row, pos, p["first_name"], p["last_name"],
                                            p["dob"]))
    for r_row, res in enumerate(db["reservations"].values(), start=1):
        out["reservations"].append((r_row, res["reservation_id"], res["user_id"], res["origin"],
                                    res["destination"], res["flight_type"], res["cabin"], res["created_at"],
                                    int(res["total_baggages"]), int(res["nonfree_baggages"]), res["insurance"],
                                    res.get("status")))
        for pos, f in enumerate(res["flights"]):
            out["reservation_flights"].append((r_row * CHILD + pos, r_row, pos, f["origin"], f["destination"],
                                               f["flight_number"], f["date"], int(f["price"])))
        for pos, p in enumerate(res["passengers"]):
            out["reservation_passengers"].append((r_row * CHILD + pos, r_row, pos, p["first_name"],
                                                  p["last_name"], p["dob"]))
        for pos, pay in enumerate(res["payment_history"]):
            out["reservation_payments"].append((r_row * CHILD + pos, r_row, pos, pay["payment_id"],
                                                int(pay["amount"])))
    return out


ROWS = {"retail": retail_rows, "airline": airline_rows}
"""The loader of each domain."""
