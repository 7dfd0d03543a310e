"""The SQL state back in tau2's JSON shape (pydantic ``model_dump`` field for field), and tau2's state hash.

Read tools return these shapes (an agent sees what tau2's tools return) and
the parity test hashes the whole document as tau2's ``DB.get_hash`` does:
SHA-256 of ``json.dumps(model_dump(), sort_keys=True, default=str)``.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from ...backends import Database

Row = tuple[Any, ...]


def state_hash(document: dict[str, Any]) -> str:
    """tau2's hash of a state document (``get_dict_hash``)."""
    return hashlib.sha256(json.dumps(document, sort_keys=True, default=str).encode()).hexdigest()


def _rows(db: Database, table: str, where: str = "", params: Sequence[Any] = ()) -> list[Row]:
    return db.query(f"SELECT * FROM {table} {where} ORDER BY id", params)


def _children(rows: Iterable[Row]) -> dict[int, list[Row]]:
    """Child rows by their parent's id (column 1), in id (= position) order."""
    out: dict[int, list[Row]] = defaultdict(list)
    for row in rows:
        out[row[1]].append(row)
    return out


def _address(r: Sequence[Any]) -> dict[str, Any]:
    return dict(zip(("address1", "address2", "city", "country", "state", "zip"), r, strict=True))


def _opt(text: str | None) -> Any:
    return None if text is None else json.loads(text)


# -- retail ---------------------------------------------------------------------------------------
def retail_method(m: Row) -> dict[str, Any]:
    _, _, _, method_id, source, brand, last_four, balance = m
    out: dict[str, Any] = {"source": source, "id": method_id}
    if source == "credit_card":
        out.update(brand=brand, last_four=last_four)
    elif source == "gift_card":
        out["balance"] = balance
    return out


def retail_user(u: Row, methods: Sequence[Row]) -> dict[str, Any]:
    return {"user_id": u[1], "name": {"first_name": u[2], "last_name": u[3]}, "address": _address(u[4:10]),
            "email": u[10], "payment_methods": {m[3]: retail_method(m) for m in methods},
            "orders": json.loads(u[11])}


def retail_order(o: Row, items: Sequence[Row], fulfillments: Sequence[Row], payments: Sequence[Row]) -> dict[str, Any]:
    return {
        "order_id": o[1], "user_id": o[2], "address": _address(o[3:9]),
        "items": [{"name": i[3], "product_id": i[4], "item_id": i[5], "price": i[6], "options": json.loads(i[7])}
                  for i in items],
        "status": o[9],
        "fulfillments": [{"tracking_id": json.loads(f[3]), "item_ids": json.loads(f[4])} for f in fulfillments],
        "payment_history": [{"transaction_type": p[3], "amount": p[4], "payment_method_id": p[5]}
                            for p in payments],
        "cancel_reason": o[10], "exchange_items": _opt(o[11]), "exchange_new_items": _opt(o[12]),
        "exchange_payment_method_id": o[13], "exchange_price_difference": o[14], "return_items": _opt(o[15]),
        "return_payment_method_id": o[16],
    }


def retail_variant(v: Row) -> dict[str, Any]:
    return {"item_id": v[3], "options": json.loads(v[4]), "available": bool(v[5]), "price": v[6]}


def retail_product(p: Row, variants: Sequence[Row]) -> dict[str, Any]:
    return {"name": p[2], "product_id": p[1], "variants": {v[3]: retail_variant(v) for v in variants}}


def order_by_row(db: Database, o: Row) -> dict[str, Any]:
    """One order as tau2's ``get_order_details`` returns it."""
    kids = [_rows(db, t, "WHERE order_row = ?", (o[0],))
            for t in ("order_items", "order_fulfillments", "order_payments")]
    return retail_order(o, *kids)


def user_by_row(db: Database, u: Row, *, domain: str) -> dict[str, Any]:
    """One user as tau2's ``get_user_details`` returns it."""
    methods = _rows(db, "payment_methods", "WHERE user_row = ?", (u[0],))
    if domain == "retail":
        return retail_user(u, methods)
    return airline_user(u, methods, _rows(db, "saved_passengers", "WHERE user_row = ?", (u[0],)))


def product_by_row(db: Database, p: Row) -> dict[str, Any]:
    return retail_product(p, _rows(db, "variants", "WHERE product_row = ?", (p[0],)))


def retail_document(db: Database) -> dict[str, Any]:
    """The whole retail state as tau2's ``RetailDB.model_dump()``."""
    variants = _children(_rows(db, "variants"))
    methods = _children(_rows(db, "payment_methods"))
    items, fulfil, pays = (_children(_rows(db, t)) for t in ("order_items", "order_fulfillments", "order_payments"))
    return {
        "products": {p[1]: retail_product(p, variants[p[0]]) for p in _rows(db, "products")},
        "users": {u[1]: retail_user(u, methods[u[0]]) for u in _rows(db, "users")},
        "orders": {o[1]: retail_order(o, items[o[0]], fulfil[o[0]], pays[o[0]]) for o in _rows(db, "orders")},
    }


# -- airline --------------------------------------------------------------------------------------
_TIMES = ("estimated_departure_time_est", "estimated_arrival_time_est", "actual_departure_time_est",
          "actual_arrival_time_est")


def airline_method(m: Row) -> dict[str, Any]:
    _, _, _, method_id, source, brand, last_four, amount = m
    out: dict[str, Any] = {"source": source, "id": method_id}
    if source == "credit_card":
        out.update(brand=brand, last_four=last_four)
    else:
        out["amount"] = amount
    return out


def airline_user(u: Row, methods: Sequence[Row], passengers: Sequence[Row]) -> dict[str, Any]:
    return {"user_id": u[1], "name": {"first_name": u[2], "last_name": u[3]}, "address": _address(u[4:10]),
            "email": u[10], "dob": u[11], "payment_methods": {m[3]: airline_method(m) for m in methods},
            "saved_passengers": [{"first_name": p[3], "last_name": p[4], "dob": p[5]} for p in passengers],
            "membership": u[12], "reservations": json.loads(u[13])}


def flight_date(d: Row, cabins: Sequence[Row]) -> dict[str, Any]:
    out: dict[str, Any] = {"status": d[4]}
    if d[4] == "available":
        out["available_seats"] = {c[3]: c[4] for c in cabins}
        out["prices"] = {c[3]: c[5] for c in cabins}
    out.update({name: value for name, value in zip(_TIMES, d[5:9], strict=True) if value is not None})
    return out


def airline_flight(f: Row, dates: Sequence[Row], cabins: dict[int, list[Row]]) -> dict[str, Any]:
    return {"flight_number": f[1], "origin": f[2], "destination": f[3], "scheduled_departure_time_est": f[4],
            "scheduled_arrival_time_est": f[5], "dates": {d[3]: flight_date(d, cabins[d[0]]) for d in dates}}


def airline_reservation(r: Row, flights: Sequence[Row], passengers: Sequence[Row],
                        payments: Sequence[Row]) -> dict[str, Any]:
    return {
        "reservation_id": r[1], "user_id": r[2], "origin": r[3], "destination": r[4], "flight_type": r[5],
        "cabin": r[6],
        "flights": [{"flight_number": f[5], "origin": f[3], "destination": f[4], "date": f[6], "price": f[7]}
                    for f in flights],
        "passengers": [{"first_name": p[3], "last_name": p[4], "dob": p[5]} for p in passengers],
        "payment_history": [{"payment_id": p[3], "amount": p[4]} for p in payments],
        "created_at": r[7], "total_baggages": r[8], "nonfree_baggages": r[9], "insurance": r[10], "status": r[11],
    }


def reservation_by_row(db: Database, r: Row) -> dict[str, Any]:
    """One reservation as tau2's ``get_reservation_details`` returns it."""
    kids = [_rows(db, t, "WHERE reservation_row = ?", (r[0],))
            for t in ("reservation_flights", "reservation_passengers", "reservation_payments")]
    return airline_reservation(r, *kids)


def airline_document(db: Database) -> dict[str, Any]:
    """The whole airline state as tau2's ``FlightDB.model_dump()``."""
    dates, cabins = _children(_rows(db, "flight_dates")), _children(_rows(db, "flight_cabins"))
    methods, saved = _children(_rows(db, "payment_methods")), _children(_rows(db, "saved_passengers"))
    rf, rp, pay = (_children(_rows(db, t)) for t in ("reservation_flights", "reservation_passengers",
                                                    "reservation_payments"))
    return {
        "flights": {f[1]: airline_flight(f, dates[f[0]], cabins) for f in _rows(db, "flights")},
        "users": {u[1]: airline_user(u, methods[u[0]], saved[u[0]]) for u in _rows(db, "users")},
        "reservations": {r[1]: airline_reservation(r, rf[r[0]], rp[r[0]], pay[r[0]])
                         for r in _rows(db, "reservations")},
    }


DOCUMENTS = {"retail": retail_document, "airline": airline_document}
"""The exporter of each domain."""
