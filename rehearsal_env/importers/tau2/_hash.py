"""tau2's state hash of an episode's end state, fast: only the documents the episode touched are exported again.

tau2 hashes ``json.dumps(db.model_dump(), sort_keys=True, default=str)``. That
text is the sorted collections, each its sorted entities; :class:`StateHasher`
keeps every entity's JSON text from the snapshot and, for an end state,
re-exports just the entities whose rows the backend logged as touched, then
joins the same text tau2 would produce (``json.dumps``'s default separators).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from ...backends import Database
from . import _export as ex
from ._schema import CHILD

Parent = tuple[str, Callable[[int], int]]


def _same(i: int) -> int:
    return i


def _child(i: int) -> int:
    return i // CHILD


def _cabin(i: int) -> int:
    return i // 10 // CHILD


PARENTS: dict[str, dict[str, Parent]] = {
    "retail": {"products": ("products", _same), "variants": ("products", _child), "users": ("users", _same),
               "payment_methods": ("users", _child), "orders": ("orders", _same),
               "order_items": ("orders", _child), "order_fulfillments": ("orders", _child),
               "order_payments": ("orders", _child)},
    "airline": {"flights": ("flights", _same), "flight_dates": ("flights", _child),
                "flight_cabins": ("flights", _cabin),
                "users": ("users", _same), "payment_methods": ("users", _child),
                "saved_passengers": ("users", _child), "reservations": ("reservations", _same),
                "reservation_flights": ("reservations", _child), "reservation_passengers": ("reservations", _child),
                "reservation_payments": ("reservations", _child)},
}
"""Which top-level document (collection) a row of each table belongs to, and that document's row id."""


def _flight_by_row(db: Database, f: tuple[Any, ...]) -> dict[str, Any]:
    dates = db.query("SELECT * FROM flight_dates WHERE flight_row = ? ORDER BY id", (f[0],))
    cabins: dict[int, list[tuple[Any, ...]]] = {d[0]: [] for d in dates}
    if dates:
        marks = ", ".join("?" * len(dates))
        for c in db.query(f"SELECT * FROM flight_cabins WHERE flight_date_row IN ({marks}) ORDER BY id",
                          [d[0] for d in dates]):
            cabins[c[1]].append(c)
    return ex.airline_flight(f, dates, cabins)


def entity(db: Database, domain: str, collection: str, row_id: int) -> tuple[str, dict[str, Any]] | None:
    """One top-level document by its row id: (tau2's key, its dump), or None when the row is gone."""
    rows = db.query(f"SELECT * FROM {collection} WHERE id = ?", (row_id,))
    if not rows:
        return None
    row = rows[0]
    if collection == "orders":
        return row[1], ex.order_by_row(db, row)
    if collection == "products":
        return row[1], ex.product_by_row(db, row)
    if collection == "users":
        return row[1], ex.user_by_row(db, row, domain=domain)
    if collection == "reservations":
        return row[1], ex.reservation_by_row(db, row)
    return row[1], _flight_by_row(db, row)


def _text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


class StateHasher:
    """tau2's state hash of a database of one domain, incremental over the snapshot (module docstring)."""

    def __init__(self, domain: str, snapshot_db: Database) -> None:
        self.domain = domain
        document = ex.DOCUMENTS[domain](snapshot_db)
        self._texts = {name: {key: _text(value) for key, value in docs.items()} for name, docs in document.items()}
        self._keys: dict[str, dict[int, str]] = {
            name: {r[0]: r[1] for r in snapshot_db.query(f"SELECT id, {_key(name)} FROM {name}")}
            for name in document}

    def hash(self, db: Database) -> str:
        """The hash tau2's ``DB.get_hash`` gives for ``db``'s current state."""
        touched: dict[str, set[int]] = {}
        for table, keys in db.touched().items():
            parent = PARENTS[self.domain].get(table)
            if parent is not None:
                touched.setdefault(parent[0], set()).update(parent[1](k) for k in keys)
        parts = []
        for name in sorted(self._texts):
            texts = self._texts[name]
            if name in touched:
                texts = dict(texts)
                for row_id in touched[name]:
                    old = self._keys[name].get(row_id)
                    if old is not None:
                        texts.pop(old, None)
                    found = entity(db, self.domain, name, row_id)
                    if found is not None:
                        texts[found[0]] = _text(found[1])
            inner = ", ".join(f"{json.dumps(key)}: {texts[key]}" for key in sorted(texts))
            parts.append(f"{json.dumps(name)}: {{{inner}}}")
        return hashlib.sha256(("{" + ", ".join(parts) + "}").encode()).hexdigest()


def _key(collection: str) -> str:
    return {"orders": "order_id", "products": "product_id", "users": "user_id", "reservations": "reservation_id",
            "flights": "flight_number"}[collection]
