"""Emulators of the outside services a world's application calls.

Every request to an emulated service is recorded in the ``service_requests``
table of the world's own database (so checks can read it and reset restores
it). A request carrying an idempotency key that was already seen returns the
original response and records nothing new; the same request sent again under a
new key is recorded twice: a *duplicate effect*.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..backends import Database
from ..schema import Table, col

SERVICE_REQUESTS = Table(
    "service_requests",
    (
        col("id", "int"),
        col("service"),
        col("operation"),
        col("payload"),
        col("idempotency_key"),
        col("requested_at"),
        col("response"),
    ),
    indexes=(("service", "operation"), ("idempotency_key",)),
)
"""The record of every request an outside service received."""


def canonical(payload: dict[str, Any]) -> str:
    """The payload as canonical JSON (sorted keys): equal requests compare equal as text."""
    return json.dumps(payload, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class OutsideService:
    """One emulated service bound to an episode's database, clock and idempotency key."""

    name: str
    """``payments`` or ``email``."""
    db: Database
    """Where requests are recorded."""
    now: str
    """The world's frozen clock, stamped on every request."""
    idempotency_key: str
    """The key of the operation that is calling (a retry of the operation reuses it)."""

    def request(self, operation: str, payload: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
        """Record the request and return ``response``; a replayed key returns the first response."""
        seen = self.db.query(
            "SELECT response FROM service_requests WHERE service = ? AND operation = ? "
            "AND idempotency_key = ?",
            (self.name, operation, self.idempotency_key),
        )
        if seen:
            return dict(json.loads(seen[0][0]), replayed=True)
        (count,) = self.db.query("SELECT COUNT(*) FROM service_requests")[0]
        response = {**response, "request_ref": f"{self.name[:3]}_{count + 1:06d}"}
        self.db.execute(
            "INSERT INTO service_requests (service, operation, payload, idempotency_key, "
            "requested_at, response) VALUES (?, ?, ?, ?, ?, ?)",
            (self.name, operation, canonical(payload), self.idempotency_key, self.now, canonical(response)),
        )
        return response


def duplicate_effects(db: Database) -> int:
    """How many requests repeated an earlier identical request (same service, operation, payload)."""
    (n,) = db.query(
        "SELECT COALESCE(SUM(n - 1), 0) FROM (SELECT COUNT(*) AS n FROM service_requests "
        "GROUP BY service, operation, payload) AS groups"
    )[0]
    return int(n)


def service_log(db: Database) -> list[dict[str, Any]]:
    """Every recorded request, oldest first (for episode records)."""
    rows = db.query(
        "SELECT service, operation, payload, idempotency_key, requested_at FROM service_requests ORDER BY id"
    )
    keys = ("service", "operation", "payload", "idempotency_key", "requested_at")
    return [dict(zip(keys, row, strict=True)) for row in rows]


__all__ = ["SERVICE_REQUESTS", "OutsideService", "canonical", "duplicate_effects", "service_log"]
