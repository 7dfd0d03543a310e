"""The outside-service emulator container: payments and email, every request recorded.

Runs inside the sandbox (stdlib + psycopg2 from Debian; it does not import
rehearsal_env). ``POST /<service>/<operation>`` with a JSON body and an
``Idempotency-Key`` header is recorded in the ``service_requests`` table of the
application's database (``EMULATOR_DSN``), stamped with the world's clock
(``EMULATOR_CLOCK``), exactly as the in-process emulators record it: the same
key answers the first response again (with ``"replayed": true``) and records
nothing; the same request under a new key is recorded twice (a duplicate
effect the checks can see). Services: ``email`` (``send``) and ``payments``
(``charge``, ``refund``).
"""

from __future__ import annotations

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import psycopg2

OPERATIONS = {"email": {"send": {"status": "sent"}},
              "payments": {"charge": {"status": "captured"}, "refund": {"status": "refunded"}}}
LOCK = threading.Lock()


def canonical(data: dict[str, Any]) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # one small answer per request: do not wait for the peer's ACK
    conn: Any = None

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _answer(self, status: int, data: dict[str, Any]) -> None:
        body = json.dumps(data, sort_keys=True).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._answer(200 if self.path == "/health" else 404, {"ok": self.path == "/health"})

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        parts = self.path.strip("/").split("/")
        if len(parts) != 2 or parts[1] not in OPERATIONS.get(parts[0], {}):
            self._answer(404, {"error": f"no operation {self.path}; known: {sorted(OPERATIONS)}"})
            return
        service, operation = parts
        try:
            payload = json.loads(raw or b"{}")
        except ValueError as exc:
            self._answer(400, {"error": f"the body is not JSON: {exc}"})
            return
        key = self.headers.get("Idempotency-Key", "")
        with LOCK:
            try:
                self._answer(200, record(service, operation, payload, key))
            except psycopg2.Error as exc:
                Handler.conn = None
                self._answer(500, {"error": f"recording failed: {exc}"})


def connection() -> Any:
    if Handler.conn is None or Handler.conn.closed:
        Handler.conn = psycopg2.connect(os.environ["EMULATOR_DSN"])
    return Handler.conn


def record(service: str, operation: str, payload: dict[str, Any], key: str) -> dict[str, Any]:
    conn = connection()
    with conn, conn.cursor() as cur:
        cur.execute("SELECT response FROM service_requests WHERE service = %s AND operation = %s "
                    "AND idempotency_key = %s", (service, operation, key))
        seen = cur.fetchone()
        if seen:
            return dict(json.loads(seen[0]), replayed=True)
        cur.execute("SELECT COUNT(*) FROM service_requests")
        (count,) = cur.fetchone()
        response = {**OPERATIONS[service][operation], "request_ref": f"{service[:3]}_{count + 1:06d}"}
        cur.execute("INSERT INTO service_requests (service, operation, payload, idempotency_key, requested_at, "
                    "response) VALUES (%s, %s, %s, %s, %s, %s)",
                    (service, operation, canonical(payload), key, os.environ["EMULATOR_CLOCK"],
                     canonical(response)))
        return response


if __name__ == "__main__":
    server = ThreadingHTTPServer(("0.0.0.0", int(os.environ.get("EMULATOR_PORT", "8025"))), Handler)
    server.daemon_threads = True
    server.serve_forever()
