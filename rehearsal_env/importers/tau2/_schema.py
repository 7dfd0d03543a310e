"""tau2-bench's nested documents as tables (one module for both domains).

tau2 keeps each domain as one JSON document of dicts of nested models. Here
every nested list of objects is a child table whose integer id is derived from
its parent's id and the child's position (``parent * 1000 + position``), so the
same child has the same id on every agent path and a scope entry ``table#id``
means the same row in every episode. Lists of plain strings (tracking ids, item
id lists, a user's orders or reservations) stay JSON text in their parent row.
Money is ``real``, as tau2 stores it (unrounded float differences included).

``transfers`` records ``transfer_to_human_agents`` calls and ``row_changes``
the rows each write tool changed (the application's audit log, read by the
scope check); neither is part of tau2's own state hash.
"""

from __future__ import annotations

from ...schema import Table, col

CHILD = 1000
"""A child row's id is ``parent_id * CHILD + position``."""

TRANSFERS = Table("transfers", (col("id", "int"), col("summary"), col("transferred_at")))
ROW_CHANGES = Table("row_changes", (col("id", "int"), col("tbl"), col("row_id", "int")), indexes=(("tbl",),))

_ADDRESS = (col("address1"), col("address2"), col("city"), col("country"), col("state"), col("zip"))

RETAIL = (
    Table("products", (col("id", "int"), col("product_id"), col("name")), indexes=(("product_id",),)),
    Table("variants", (col("id", "int"), col("product_row", "int", ref="products.id"), col("position", "int"),
                       col("item_id"), col("options"), col("available", "int"), col("price", "real")),
          indexes=(("item_id",), ("product_row",))),
    Table("users", (col("id", "int"), col("user_id"), col("first_name"), col("last_name"), *_ADDRESS,
                    col("email"), col("orders")), indexes=(("user_id",), ("email",))),
    Table("payment_methods", (col("id", "int"), col("user_row", "int", ref="users.id"), col("position", "int"),
                              col("method_id"), col("source"), col("brand", null=True), col("last_four", null=True),
                              col("balance", "real", null=True)), indexes=(("user_row",),)),
    Table("orders", (col("id", "int"), col("order_id"), col("user_id"), *_ADDRESS, col("status"),
                     col("cancel_reason", null=True), col("exchange_items", null=True),
                     col("exchange_new_items", null=True), col("exchange_payment_method_id", null=True),
                     col("exchange_price_difference", "real", null=True), col("return_items", null=True),
                     col("return_payment_method_id", null=True)), indexes=(("order_id",), ("user_id",))),
    Table("order_items", (col("id", "int"), col("order_row", "int", ref="orders.id"), col("position", "int"),
                          col("name"), col("product_id"), col("item_id"), col("price", "real"), col("options")),
          indexes=(("order_row",),)),
    Table("order_fulfillments", (col("id", "int"), col("order_row", "int", ref="orders.id"),
                                 col("position", "int"), col("tracking_ids"), col("item_ids")),
          indexes=(("order_row",),)),
    Table("order_payments", (col("id", "int"), col("order_row", "int", ref="orders.id"), col("position", "int"),
                             col("transaction_type"), col("amount", "real"), col("payment_method_id")),
          indexes=(("order_row",),)),
    TRANSFERS,
    ROW_CHANGES,
)

AIRLINE = (
    Table("flights", (col("id", "int"), col("flight_number"), col("origin"), col("destination"),
                      col("scheduled_departure_time_est"), col("scheduled_arrival_time_est")),
          indexes=(("flight_number",), ("origin",))),
    Table("flight_dates", (col("id", "int"), col("flight_row", "int", ref="flights.id"), col("position", "int"),
                           col("date"), col("status"), col("estimated_departure_time_est", null=True),
                           col("estimated_arrival_time_est", null=True), col("actual_departure_time_est", null=True),
                           col("actual_arrival_time_est", null=True)), indexes=(("flight_row",), ("date",))),
    Table("flight_cabins", (col("id", "int"), col("flight_date_row", "int", ref="flight_dates.id"),
                            col("position", "int"), col("cabin"), col("available_seats", "int"), col("price", "int")),
          indexes=(("flight_date_row",),)),
    Table("users", (col("id", "int"), col("user_id"), col("first_name"), col("last_name"), col("address1"),
                    col("address2", null=True), col("city"), col("country"), col("state"), col("zip"), col("email"),
                    col("dob"), col("membership"), col("reservations")), indexes=(("user_id",),)),
    Table("payment_methods", (col("id", "int"), col("user_row", "int", ref="users.id"), col("position", "int"),
                              col("method_id"), col("source"), col("brand", null=True), col("last_four", null=True),
                              col("amount", "real", null=True)), indexes=(("user_row",),)),
    Table("saved_passengers", (col("id", "int"), col("user_row", "int", ref="users.id"), col("position", "int"),
                               col("first_name"), col("last_name"), col("dob")), indexes=(("user_row",),)),
    Table("reservations", (col("id", "int"), col("reservation_id"), col("user_id"), col("origin"),
                           col("destination"), col("flight_type"), col("cabin"), col("created_at"),
                           col("total_baggages", "int"), col("nonfree_baggages", "int"), col("insurance"),
                           col("status", null=True)), indexes=(("reservation_id",), ("user_id",))),
    Table("reservation_flights", (col("id", "int"), col("reservation_row", "int", ref="reservations.id"),
                                  col("position", "int"), col("origin"), col("destination"), col("flight_number"),
                                  col("date"), col("price", "int")), indexes=(("reservation_row",),)),
    Table("reservation_passengers", (col("id", "int"), col("reservation_row", "int", ref="reservations.id"),
                                     col("position", "int"), col("first_name"), col("last_name"), col("dob")),
          indexes=(("reservation_row",),)),
    Table("reservation_payments", (col("id", "int"), col("reservation_row", "int", ref="reservations.id"),
                                   col("position", "int"), col("payment_id"), col("amount", "int")),
          indexes=(("reservation_row",),)),
    TRANSFERS,
    ROW_CHANGES,
)

TABLES = {"retail": RETAIL, "airline": AIRLINE}
"""The tables of each domain."""
OWN_TABLES = ("transfers", "row_changes")
"""Tables of ours, outside tau2's state hash."""


def tau2_tables(domain: str) -> tuple[str, ...]:
    """The tables tau2's state hash covers in ``domain`` (every table but ours)."""
    return tuple(t.name for t in TABLES[domain] if t.name not in OWN_TABLES)
