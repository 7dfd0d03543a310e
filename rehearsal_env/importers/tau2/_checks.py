"""Checks derived from the data: the gold end state's row diff, the scope, what to tell, and the hard rules.

Every goal check is wrapped so that a missing row is a failed check, never a
check that errors: a value is ``MAX(col)`` of the one row (NULL when the row
is missing, which equals no wanted value), a NULL wanted value and row
existence are ``COUNT(*)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...checks import Check
from ._schema import OWN_TABLES, tau2_tables

Diff = Mapping[str, Mapping[str, Sequence[tuple[Any, ...]]]]
"""``{table: {"inserted"|"updated"|"deleted": rows}}`` as :func:`rehearsal_env.backends.changes` gives it."""
IGNORED = ("row_changes", "final_answers", "service_requests")
"""Tables a diff never turns into goal checks (logs and the framework's)."""
SCOPE_CHECK = "nothing changed outside the scope (scope_is_goal)"


def _value_check(table: str, row_id: int, column: str, want: Any) -> Check:
    if want is None:
        return Check(f"{table}#{row_id}.{column} is NULL",
                     f"SELECT COUNT(*) FROM {table} WHERE id = ? AND {column} IS NULL", "eq", 1, (row_id,))
    return Check(f"{table}#{row_id}.{column} = {want!r}", f"SELECT MAX({column}) FROM {table} WHERE id = ?",
                 "eq", want, (row_id,))


def goal_checks(diff: Diff, columns: Mapping[str, Sequence[str]],
                before: Mapping[str, Mapping[int, tuple[Any, ...]]]) -> tuple[Check, ...]:
    """One check per changed field, inserted row and deleted row of ``diff`` (see the module docstring)."""
    out: list[Check] = []
    for table in sorted(diff):
        if table in IGNORED:
            continue
        part = diff[table]
        if table == "transfers":
            out.append(Check("a transfer to a human agent was recorded", "SELECT COUNT(*) FROM transfers",
                             "ge", len(part["inserted"])))
            continue
        names = columns[table]
        for row in part["updated"]:
            old = before[table][row[0]]
            out += [_value_check(table, row[0], names[i], row[i]) for i in range(1, len(names)) if row[i] != old[i]]
        for row in part["inserted"]:
            out.append(Check(f"{table}#{row[0]} exists", f"SELECT COUNT(*) FROM {table} WHERE id = ?", "eq", 1,
                             (row[0],)))
            out += [_value_check(table, row[0], names[i], row[i]) for i in range(1, len(names))]
        for row in part["deleted"]:
            out.append(Check(f"{table}#{row[0]} was deleted", f"SELECT COUNT(*) FROM {table} WHERE id = ?",
                             "eq", 0, (row[0],)))
    return tuple(out)


def scope_of(diff: Diff, touched: Sequence[tuple[str, int]]) -> tuple[str, ...]:
    """The rows the gold changed or touched on the way (``table#id``), plus our own tables as wholes."""
    rows = {f"{table}#{row[0]}" for table, part in diff.items() if table not in (*IGNORED, *OWN_TABLES)
            for kind in ("inserted", "updated", "deleted") for row in part[kind]}
    rows |= {f"{table}#{row_id}" for table, row_id in touched if table not in (*IGNORED, *OWN_TABLES)}
    return (*sorted(rows), *OWN_TABLES)


def unchanged_checks(diff: Diff, touched: Sequence[tuple[str, int]], columns: Mapping[str, Sequence[str]],
                     before: Mapping[str, Mapping[int, tuple[Any, ...]]]) -> tuple[Check, ...]:
    """For rows the gold changed and then changed back: every field as it was (they are in the scope)."""
    changed = {(t, row[0]) for t, part in diff.items() for kind in part for row in part[kind]}
    out: list[Check] = []
    for table, row_id in touched:
        if (table, row_id) in changed or table in (*IGNORED, *OWN_TABLES) or row_id not in before.get(table, {}):
            continue
        old = before[table][row_id]
        out += [_value_check(table, row_id, name, old[i]) for i, name in enumerate(columns[table]) if i > 0]
    return tuple(out)


def scope_check(domain: str, scope: Sequence[str]) -> Check:
    """A goal check that fails when a write tool changed any of tau2's rows outside ``scope``."""
    tables = tau2_tables(domain)
    rows = [entry for entry in scope if "#" in entry]
    sql = f"SELECT COUNT(*) FROM row_changes WHERE tbl IN ({', '.join('?' * len(tables))})"
    if rows:
        sql += f" AND (tbl || '#' || CAST(row_id AS TEXT)) NOT IN ({', '.join('?' * len(rows))})"
    return Check(SCOPE_CHECK, sql, "eq", 0, (*tables, *rows))


def communicate_checks(infos: Sequence[str]) -> tuple[Check, ...]:
    """tau2's ``communicate_info``: each text appears (case and commas ignored) in the final message or answer."""
    out = []
    for info in infos:
        text = info.lower().replace(",", "")
        pattern = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        out.append(Check(f"the final message tells {info!r}",
                         "SELECT COUNT(*) FROM final_answers WHERE lower(replace(message || ' ' || answer, ',', '')) "
                         "LIKE ? ESCAPE '\\'", "ge", 1, (pattern,)))
    return tuple(out)


def _violations(name: str, sql: str) -> Check:
    return Check(name, sql, "eq", 0)


RULES: dict[str, tuple[Check, ...]] = {
    "airline": (
        _violations("at most 5 passengers per reservation",
                    "SELECT COUNT(*) FROM (SELECT reservation_row FROM reservation_passengers "
                    "GROUP BY reservation_row HAVING COUNT(*) > 5) AS big"),
        _violations("at most one travel certificate per reservation",
                    "SELECT COUNT(*) FROM (SELECT reservation_row FROM reservation_payments "
                    "WHERE payment_id LIKE 'certificate\\_%' ESCAPE '\\' AND amount > 0 "
                    "GROUP BY reservation_row HAVING COUNT(*) > 1) AS many"),
        _violations("at most one credit card and three gift cards per booking payment",
                    "SELECT COUNT(*) FROM (SELECT reservation_row FROM reservation_payments WHERE amount > 0 "
                    "GROUP BY reservation_row HAVING SUM(CASE WHEN payment_id LIKE 'gift\\_card\\_%' ESCAPE '\\' "
                    "THEN 1 ELSE 0 END) > 3) AS many"),
        _violations("no gift card or certificate below zero",
                    "SELECT COUNT(*) FROM payment_methods WHERE amount < 0"),
        _violations("no more paid bags than bags", "SELECT COUNT(*) FROM reservations "
                    "WHERE nonfree_baggages > total_baggages"),
        _violations("no flight date over-sold", "SELECT COUNT(*) FROM flight_cabins WHERE available_seats < 0"),
    ),
    "retail": (
        _violations("refunds only to the original payment method or a gift card",
                    "SELECT COUNT(*) FROM orders o WHERE o.return_payment_method_id IS NOT NULL "
                    "AND o.return_payment_method_id NOT LIKE 'gift\\_card\\_%' ESCAPE '\\' "
                    "AND o.return_payment_method_id <> (SELECT p.payment_method_id FROM order_payments p "
                    "WHERE p.order_row = o.id AND p.position = 0)"),
        _violations("no gift card below zero", "SELECT COUNT(*) FROM payment_methods WHERE balance < 0"),
        _violations("every ordered item is a variant of its own product",
                    "SELECT COUNT(*) FROM order_items i WHERE NOT EXISTS (SELECT 1 FROM variants v "
                    "JOIN products p ON p.id = v.product_row WHERE v.item_id = i.item_id "
                    "AND p.product_id = i.product_id)"),
        _violations("a cancellation reason is one of the two allowed",
                    "SELECT COUNT(*) FROM orders WHERE cancel_reason IS NOT NULL "
                    "AND cancel_reason NOT IN ('no longer needed', 'ordered by mistake')"),
        _violations("an order is exchanged or returned at most once",
                    "SELECT COUNT(*) FROM orders WHERE exchange_items IS NOT NULL AND return_items IS NOT NULL"),
    ),
}
"""Candidate hard rules of each domain, from its policy; a world keeps those that hold on the snapshot and on
every gold end state."""
