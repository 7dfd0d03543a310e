"""tau2's airline tools as SQL, with tau2's semantics (quirks included), tagged read/write as tau2 tags them.

Behaviour follows tau2-bench's ``domains/airline/tools.py`` (MIT, Sierra
Research), re-implemented over the tables of :mod:`._schema`. Quirks kept on
purpose: cancelling appends negative payments and never releases seats (nor
checks the status: a second cancel appends again); changing flights never
touches seats; a new reservation is ``HATHAT``, ``HATHAU`` or ``HATHAV``,
created at tau2's fixed clock ``2024-05-15T15:00:00``; a certificate paying a
booking is removed whatever its remaining value; gift-card balances keep
unrounded float differences; the one-stop search builds the next day's date
without zero padding.

Where tau2 takes a list of objects (flights, passengers, payments), the tool
takes parallel typed lists (``flight_numbers`` with ``flight_dates``, ...):
the schema stays typed and every element is validated.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from ...backends import Database
from ...tools import ToolContext, ToolFailed, tool
from . import _export as ex
from ._schema import CHILD
from ._tools_common import calculate, transfer_to_human_agents
from ._write import delete, insert, one, put_children, update

MAX_AMOUNT = 2**63 - 1
"""The largest amount a payment can record (the database's 64-bit integers; tau2's own store has no bound)."""

Cabin = Literal["business", "economy", "basic_economy"]
NEW_RESERVATIONS = ("HATHAT", "HATHAU", "HATHAV")
NEW_RESERVATION_ROW = 900_000
"""New reservations get row ids ``NEW_RESERVATION_ROW + 1 + k`` for the k-th of :data:`NEW_RESERVATIONS`."""
NEW_CERTIFICATES = ("certificate_3221322", "certificate_3221323", "certificate_3221324")
NEW_CERTIFICATE_POSITION = CHILD - 10
"""A user's k-th new certificate is at position ``NEW_CERTIFICATE_POSITION + k``."""
TAU2_NOW = "2024-05-15T15:00:00"
"""tau2's airline clock (``_get_datetime``)."""
AIRPORTS = (("SFO", "San Francisco"), ("JFK", "New York"), ("LAX", "Los Angeles"), ("ORD", "Chicago"),
            ("DFW", "Dallas"), ("DEN", "Denver"), ("SEA", "Seattle"), ("ATL", "Atlanta"), ("MIA", "Miami"),
            ("BOS", "Boston"), ("PHX", "Phoenix"), ("IAH", "Houston"), ("LAS", "Las Vegas"), ("MCO", "Orlando"),
            ("EWR", "Newark"), ("CLT", "Charlotte"), ("MSP", "Minneapolis"), ("DTW", "Detroit"),
            ("PHL", "Philadelphia"), ("LGA", "LaGuardia"))


def _user(db: Database, user_id: str) -> tuple[Any, ...]:
    return one(db, "SELECT * FROM users WHERE user_id = ?", (user_id,), f"User {user_id} not found")


def _reservation(db: Database, reservation_id: str) -> tuple[Any, ...]:
    return one(db, "SELECT * FROM reservations WHERE reservation_id = ?", (reservation_id,),
               f"Reservation {reservation_id} not found")


def _flight(db: Database, number: str) -> tuple[Any, ...]:
    return one(db, "SELECT * FROM flights WHERE flight_number = ?", (number,), f"Flight {number} not found")


def _instance(db: Database, number: str, date: str) -> tuple[tuple[Any, ...], dict[str, tuple[Any, ...]]]:
    """A flight's date row and its cabins by name (tau2's ``_get_flight_instance``)."""
    flight = _flight(db, number)
    day = one(db, "SELECT * FROM flight_dates WHERE flight_row = ? AND date = ?", (flight[0], date),
              f"Flight {number} not found on date {date}")
    cabins = db.query("SELECT * FROM flight_cabins WHERE flight_date_row = ? ORDER BY position", (day[0],))
    return day, {c[3]: c for c in cabins}


def _methods(db: Database, user_row: int) -> dict[str, tuple[Any, ...]]:
    return {m[3]: m for m in db.query("SELECT * FROM payment_methods WHERE user_row = ? ORDER BY position",
                                      (user_row,))}


def _result(db: Database, reservation_id: str) -> dict[str, Any]:
    return ex.reservation_by_row(db, _reservation(db, reservation_id))


def _payment_for_update(db: Database, user: tuple[Any, ...], payment_id: str, total: int) -> bool:
    """Charge ``total`` for a change (tau2's ``_payment_for_update``); True when a payment is recorded."""
    method = _methods(db, user[0]).get(payment_id)
    if method is None:
        raise ToolFailed("Payment method not found")
    if method[4] == "certificate":
        raise ToolFailed("Certificate cannot be used to update reservation")
    if method[4] == "gift_card" and method[7] < total:
        raise ToolFailed("Gift card balance is not enough")
    if method[4] == "gift_card":
        update(db, "payment_methods", method[0], {"amount": method[7] - total})
    return total != 0


def _add_payment(db: Database, res_row: int, payment_id: str, amount: int) -> None:
    count = db.query("SELECT COUNT(*) FROM reservation_payments WHERE reservation_row = ?", (res_row,))[0][0]
    insert(db, "reservation_payments", {"id": res_row * CHILD + count, "reservation_row": res_row,
                                        "position": count, "payment_id": payment_id, "amount": amount})


def _direct(db: Database, date: str, origin: str | None, destination: str | None,
            leave_after: str | None = None) -> list[dict[str, Any]]:
    out = []
    rows = db.query("SELECT f.*, d.id, d.status FROM flights f JOIN flight_dates d ON d.flight_row = f.id "
                    "WHERE d.date = ? ORDER BY f.id", (date,))
    for f in rows:
        if f[7] != "available" or (origin is not None and f[2] != origin):
            continue
        if (destination is not None and f[3] != destination) or (leave_after is not None and f[4] < leave_after):
            continue
        cabins = db.query("SELECT cabin, available_seats, price FROM flight_cabins WHERE flight_date_row = ? "
                          "ORDER BY position", (f[6],))
        out.append({"flight_number": f[1], "origin": f[2], "destination": f[3], "status": "available",
                    "scheduled_departure_time_est": f[4], "scheduled_arrival_time_est": f[5], "date": None,
                    "available_seats": {c[0]: c[1] for c in cabins}, "prices": {c[0]: c[2] for c in cabins}})
    return out


def _pairs(names: list[Any], *others: list[Any], what: str) -> list[tuple[Any, ...]]:
    if any(len(o) != len(names) for o in others):
        raise ToolFailed(f"{what}: the lists must have the same length, got {[len(names), *map(len, others)]}")
    return list(zip(names, *others, strict=True))


# -- reads ----------------------------------------------------------------------------------------
@tool("read")
def get_reservation_details(ctx: ToolContext, reservation_id: str) -> dict[str, Any]:
    """Get the details of a reservation.

    Args:
        reservation_id: The reservation ID, such as '8JX2WO'.
    """
    return _result(ctx.db, reservation_id)


@tool("read")
def get_user_details(ctx: ToolContext, user_id: str) -> dict[str, Any]:
    """Get the details of a user, including their reservations.

    Args:
        user_id: The user ID, such as 'sara_doe_496'.
    """
    return ex.user_by_row(ctx.db, _user(ctx.db, user_id), domain="airline")


@tool("read")
def list_all_airports(ctx: ToolContext) -> list[dict[str, str]]:
    """Returns a list of all available airports."""
    return [{"iata": code, "city": city} for code, city in AIRPORTS]


@tool("read")
def search_direct_flight(ctx: ToolContext, origin: str, destination: str, date: str) -> list[dict[str, Any]]:
    """Search for direct flights between two cities on a specific date.

    Args:
        origin: The origin city airport in three letters, such as 'JFK'.
        destination: The destination city airport in three letters, such as 'LAX'.
        date: The date of the flight in the format 'YYYY-MM-DD', such as '2024-01-01'.
    """
    return _direct(ctx.db, date, origin, destination)


@tool("read")
def search_onestop_flight(ctx: ToolContext, origin: str, destination: str, date: str) -> list[list[dict[str, Any]]]:
    """Search for one-stop flights between two cities on a specific date.

    Args:
        origin: The origin city airport in three letters, such as 'JFK'.
        destination: The destination city airport in three letters, such as 'LAX'.
        date: The date of the flight in the format 'YYYY-MM-DD', such as '2024-05-01'.
    """
    out = []
    for first in _direct(ctx.db, date, origin, None):
        first["date"] = date
        try:
            second_date = f"2024-05-{int(date[-2:]) + 1}" if "+1" in first["scheduled_arrival_time_est"] else date
        except ValueError as exc:
            raise ToolFailed(str(exc)) from None
        for second in _direct(ctx.db, second_date, first["destination"], destination,
                              first["scheduled_arrival_time_est"]):
            second["date"] = second_date
            out.append([first, second])
    return out


@tool("read")
def get_flight_status(ctx: ToolContext, flight_number: str, date: str) -> str:
    """Get the status of a flight.

    Args:
        flight_number: The flight number.
        date: The date of the flight.
    """
    return str(_instance(ctx.db, flight_number, date)[0][4])


# -- writes ---------------------------------------------------------------------------------------
@tool("write")
def book_reservation(ctx: ToolContext, user_id: str, origin: str, destination: str,
                     flight_type: Literal["round_trip", "one_way"], cabin: Cabin, flight_numbers: list[str],
                     flight_dates: list[str], passenger_first_names: list[str], passenger_last_names: list[str],
                     passenger_dobs: list[str], payment_ids: list[str], payment_amounts: list[int],
                     total_baggages: int, nonfree_baggages: int, insurance: Literal["yes", "no"]) -> dict[str, Any]:
    """Book a reservation.

    Args:
        user_id: The ID of the user to book the reservation such as 'sara_doe_496'.
        origin: The IATA code for the origin city such as 'SFO'.
        destination: The IATA code for the destination city such as 'JFK'.
        flight_type: The type of flight such as 'one_way' or 'round_trip'.
        cabin: The cabin class such as 'basic_economy', 'economy', or 'business'.
        flight_numbers: Each piece of flight's number, such as 'HAT001' (in order).
        flight_dates: Each piece of flight's date 'YYYY-MM-DD', in the same order as flight_numbers.
        passenger_first_names: Each passenger's first name.
        passenger_last_names: Each passenger's last name, in the same order.
        passenger_dobs: Each passenger's date of birth 'YYYY-MM-DD', in the same order.
        payment_ids: Each payment method's id from the user's profile, such as 'credit_card_7815826'.
        payment_amounts: The amount paid with each payment method, in the same order as payment_ids.
        total_baggages: The total number of baggage items to book the reservation.
        nonfree_baggages: The number of non-free baggage items to book the reservation.
        insurance: Whether the reservation has insurance.
    """
    db = ctx.db
    flights = _pairs(flight_numbers, flight_dates, what="flights")
    passengers = _pairs(passenger_first_names, passenger_last_names, passenger_dobs, what="passengers")
    payments = _pairs(payment_ids, payment_amounts, what="payments")
    user = _user(db, user_id)
    taken = {r[0] for r in db.query(f"SELECT reservation_id FROM reservations WHERE reservation_id IN "
                                    f"({', '.join('?' * len(NEW_RESERVATIONS))})", NEW_RESERVATIONS)}
    free = [k for k, name in enumerate(NEW_RESERVATIONS) if name not in taken]
    if not free:
        raise ToolFailed("Too many reservations")
    k = free[0]
    reservation_id, res_row = NEW_RESERVATIONS[k], NEW_RESERVATION_ROW + 1 + k
    total = 0
    legs, seats = [], []
    for number, date in flights:
        flight = _flight(db, number)
        day, cabins = _instance(db, number, date)
        if day[4] != "available":
            raise ToolFailed(f"Flight {number} not available on date {date}")
        if cabins[cabin][4] < len(passengers):
            raise ToolFailed(f"Not enough seats on flight {number}")
        price = cabins[cabin][5]
        legs.append({"origin": flight[2], "destination": flight[3], "flight_number": number, "date": date,
                     "price": price})
        seats.append(cabins[cabin][0])
        total += price * len(passengers)
    if insurance == "yes":
        total += 30 * len(passengers)
    total += 50 * nonfree_baggages
    methods = _methods(db, user[0])
    for payment_id, amount in payments:
        if payment_id not in methods:
            raise ToolFailed(f"Payment method {payment_id} not found")
        if methods[payment_id][4] in {"gift_card", "certificate"} and methods[payment_id][7] < amount:
            raise ToolFailed(f"Not enough balance in payment method {payment_id}")
    paid = sum(amount for _, amount in payments)
    if paid != total:
        raise ToolFailed(f"Payment amount does not add up, total price is {total}, but paid {paid}")
    for payment_id, amount in payments:
        method = _methods(db, user[0]).get(payment_id)
        if method is None:
            raise ToolFailed(f"'{payment_id}'")  # tau2: a KeyError when one certificate pays twice
        if method[4] == "gift_card":
            update(db, "payment_methods", method[0], {"amount": method[7] - amount})
        elif method[4] == "certificate":
            delete(db, "payment_methods", method[0])
    for cabin_row in seats:
        left = db.query("SELECT available_seats FROM flight_cabins WHERE id = ?", (cabin_row,))[0][0]
        update(db, "flight_cabins", cabin_row, {"available_seats": left - len(passengers)})
    insert(db, "reservations", {"id": res_row, "reservation_id": reservation_id, "user_id": user_id,
                                "origin": origin, "destination": destination, "flight_type": flight_type,
                                "cabin": cabin, "created_at": TAU2_NOW, "total_baggages": total_baggages,
                                "nonfree_baggages": nonfree_baggages, "insurance": insurance, "status": None})
    base = res_row * CHILD
    put_children(db, "reservation_flights", "reservation_row", res_row, base, legs)
    put_children(db, "reservation_passengers", "reservation_row", res_row, base,
                 [{"first_name": f, "last_name": last, "dob": d} for f, last, d in passengers])
    put_children(db, "reservation_payments", "reservation_row", res_row, base,
                 [{"payment_id": p, "amount": a} for p, a in payments])
    listed = json.loads(_user(db, user_id)[13])
    update(db, "users", user[0], {"reservations": json.dumps([*listed, reservation_id])})
    return _result(db, reservation_id)


@tool("write")
def cancel_reservation(ctx: ToolContext, reservation_id: str) -> dict[str, Any]:
    """Cancel the whole reservation.

    Args:
        reservation_id: The reservation ID, such as 'ZFA04Y'.
    """
    db = ctx.db
    res = _reservation(db, reservation_id)
    for payment in db.query("SELECT payment_id, amount FROM reservation_payments WHERE reservation_row = ? "
                            "ORDER BY position", (res[0],)):
        _add_payment(db, res[0], payment[0], -payment[1])
    update(db, "reservations", res[0], {"status": "cancelled"})
    return _result(db, reservation_id)  # tau2 never releases the seats


@tool("write")
def send_certificate(ctx: ToolContext, user_id: str, amount: int) -> str:
    """Send a certificate to a user. Be careful!

    Args:
        user_id: The ID of the user to book the reservation, such as 'sara_doe_496'.
        amount: The amount of the certificate to send.
    """
    db = ctx.db
    user = _user(db, user_id)
    methods = _methods(db, user[0])
    for k, payment_id in enumerate(NEW_CERTIFICATES):
        if payment_id not in methods:
            position = NEW_CERTIFICATE_POSITION + k
            insert(db, "payment_methods", {"id": user[0] * CHILD + position, "user_row": user[0],
                                           "position": position, "method_id": payment_id, "source": "certificate",
                                           "brand": None, "last_four": None, "amount": float(amount)})
            return f"Certificate {payment_id} added to user {user_id} with amount {amount}."
    raise ToolFailed("Too many certificates")


@tool("write")
def update_reservation_baggages(ctx: ToolContext, reservation_id: str, total_baggages: int, nonfree_baggages: int,
                                payment_id: str) -> dict[str, Any]:
    """Update the baggage information of a reservation.

    Args:
        reservation_id: The reservation ID, such as 'ZFA04Y'
        total_baggages: The updated total number of baggage items included in the reservation.
        nonfree_baggages: The updated number of non-free baggage items included in the reservation.
        payment_id: The payment id stored in user profile, such as 'credit_card_7815826', 'gift_card_7815826',
            'certificate_7815826'.
    """
    db = ctx.db
    res = _reservation(db, reservation_id)
    user = _user(db, res[2])
    total = 50 * max(0, nonfree_baggages - res[9])
    if total > MAX_AMOUNT:
        raise ToolFailed(f"the baggage fee ({total}) is larger than a payment can be (at most {MAX_AMOUNT}); "
                         "check nonfree_baggages")
    if _payment_for_update(db, user, payment_id, total):
        _add_payment(db, res[0], payment_id, total)
    update(db, "reservations", res[0], {"total_baggages": total_baggages, "nonfree_baggages": nonfree_baggages})
    return _result(db, reservation_id)


@tool("write")
def update_reservation_flights(ctx: ToolContext, reservation_id: str, cabin: Cabin, flight_numbers: list[str],
                               flight_dates: list[str], payment_id: str) -> dict[str, Any]:
    """Update the flight information of a reservation.

    Args:
        reservation_id: The reservation ID, such as 'ZFA04Y'.
        cabin: The cabin class of the reservation
        flight_numbers: Each flight number in the ENTIRE new reservation, in order. Even if a flight segment is
            not changed, it should still be included.
        flight_dates: Each flight's date 'YYYY-MM-DD', in the same order as flight_numbers.
        payment_id: The payment id stored in user profile, such as 'credit_card_7815826', 'gift_card_7815826',
            'certificate_7815826'.
    """
    db = ctx.db
    flights = _pairs(flight_numbers, flight_dates, what="flights")
    res = _reservation(db, reservation_id)
    user = _user(db, res[2])
    old = [{"origin": f[3], "destination": f[4], "flight_number": f[5], "date": f[6], "price": f[7]}
           for f in db.query("SELECT * FROM reservation_flights WHERE reservation_row = ? ORDER BY position",
                             (res[0],))]
    n_passengers = db.query("SELECT COUNT(*) FROM reservation_passengers WHERE reservation_row = ?",
                            (res[0],))[0][0]
    total = 0
    legs = []
    for number, date in flights:
        kept = next((f for f in old if f["flight_number"] == number and f["date"] == date and cabin == res[6]), None)
        if kept is not None:
            total += kept["price"] * n_passengers
            legs.append(kept)
            continue
        flight = _flight(db, number)
        day, cabins = _instance(db, number, date)
        if day[4] != "available":
            raise ToolFailed(f"Flight {number} not available on date {date}")
        if cabins[cabin][4] < n_passengers:
            raise ToolFailed(f"Not enough seats on flight {number}")
        leg = {"origin": flight[2], "destination": flight[3], "flight_number": number, "date": date,
               "price": cabins[cabin][5]}
        total += leg["price"] * n_passengers
        legs.append(leg)
    total -= sum(f["price"] for f in old) * n_passengers
    if _payment_for_update(db, user, payment_id, total):
        _add_payment(db, res[0], payment_id, total)
    put_children(db, "reservation_flights", "reservation_row", res[0], res[0] * CHILD, legs)
    update(db, "reservations", res[0], {"cabin": cabin})
    return _result(db, reservation_id)  # tau2 leaves the seats as they were


@tool("write")
def update_reservation_passengers(ctx: ToolContext, reservation_id: str, first_names: list[str],
                                  last_names: list[str], dobs: list[str]) -> dict[str, Any]:
    """Update the passenger information of a reservation.

    Args:
        reservation_id: The reservation ID, such as 'ZFA04Y'.
        first_names: Each passenger's first name.
        last_names: Each passenger's last name, in the same order.
        dobs: Each passenger's date of birth 'YYYY-MM-DD', in the same order.
    """
    db = ctx.db
    passengers = _pairs(first_names, last_names, dobs, what="passengers")
    res = _reservation(db, reservation_id)
    count = db.query("SELECT COUNT(*) FROM reservation_passengers WHERE reservation_row = ?", (res[0],))[0][0]
    if len(passengers) != count:
        raise ToolFailed("Number of passengers does not match")
    put_children(db, "reservation_passengers", "reservation_row", res[0], res[0] * CHILD,
                 [{"first_name": f, "last_name": last, "dob": d} for f, last, d in passengers])
    return _result(db, reservation_id)


TOOLS = (book_reservation, calculate, cancel_reservation, get_reservation_details, get_user_details,
         list_all_airports, search_direct_flight, search_onestop_flight, send_certificate, transfer_to_human_agents,
         update_reservation_baggages, update_reservation_flights, update_reservation_passengers, get_flight_status)
"""Every airline tool of tau2, in tau2's order."""


def flatten_arguments(name: str, args: dict[str, Any]) -> dict[str, Any]:
    """tau2's arguments of airline tool ``name`` in this world's flattened shape (for the gold actions)."""
    out = dict(args)
    if "flights" in out:
        flights = out.pop("flights")
        out["flight_numbers"] = [f["flight_number"] for f in flights]
        out["flight_dates"] = [f["date"] for f in flights]
    if "passengers" in out:
        people = out.pop("passengers")
        prefix = "passenger_" if name == "book_reservation" else ""
        out[f"{prefix}first_names"] = [p["first_name"] for p in people]
        out[f"{prefix}last_names"] = [p["last_name"] for p in people]
        out[f"{prefix}dobs"] = [p["dob"] for p in people]
    if "payment_methods" in out:
        pays = out.pop("payment_methods")
        out["payment_ids"] = [p["payment_id"] for p in pays]
        out["payment_amounts"] = [int(p["amount"]) for p in pays]
    return out
