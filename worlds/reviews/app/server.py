"""The reviews service: a small code-review HTTP JSON API over its own PostgreSQL database.

Run: ``python3 server.py`` with ``REVIEWS_DSN`` (libpq connection string),
``REVIEWS_EMAIL_URL`` (the mail service), ``REVIEWS_PORT`` (default 8080) and
optionally ``REVIEWS_CLOCK`` (a frozen ISO-8601 instant its timestamps use).

Every request is one transaction. Answers are JSON: 2xx with the result, 4xx
``{"error": ...}`` when the request is refused, 502 when the mail service
failed. ``GET /health`` answers ``{"ok": true, "clock": ..., "os_time": ...}``.
The service keeps no state outside its database, so it needs no reset hook.
"""

from __future__ import annotations

import json
import os
import re
import sys
import urllib.parse
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import psycopg2

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from api import ROUTES  # noqa: E402
from store import Refused, Store, Unavailable, clock  # noqa: E402


def _compile(template: str) -> re.Pattern[str]:
    return re.compile("^" + re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", template) + "$")


COMPILED = [(method, _compile(path), fn) for method, path, fn in ROUTES]


class Handler(BaseHTTPRequestHandler):
    store: Store
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # one small answer per request: do not wait for the peer's ACK

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the driver records every call
        pass

    def _answer(self, status: int, data: Any) -> None:
        body = json.dumps(data, sort_keys=True).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _handle(self, method: str) -> None:
        url = urllib.parse.urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if url.path == "/health":
            self._answer(200, {"ok": True, "clock": clock(), "os_time": datetime.now().isoformat()})
            return
        for verb, pattern, fn in COMPILED:
            match = pattern.match(url.path)
            if verb != method or not match:
                continue
            try:
                body = json.loads(raw) if raw else {}
                if not isinstance(body, dict):
                    raise Refused(400, "the body must be a JSON object")
                args = {**dict(urllib.parse.parse_qsl(url.query)), **body,
                        **{k: urllib.parse.unquote(v) for k, v in match.groupdict().items()}}
                if "number" in args and not str(args["number"]).isdigit():
                    raise Refused(400, f"the pull request number must be a whole number, got {args['number']!r}")
                result = fn(self.store, self.headers.get("X-Actor", ""), args,
                            self.headers.get("Idempotency-Key", ""))
            except ValueError as exc:
                self._answer(400, {"error": f"the body is not valid JSON: {exc}"})
            except Refused as exc:
                self._answer(exc.status, {"error": str(exc)})
            except Unavailable as exc:
                self._answer(502, {"error": str(exc)})
            except psycopg2.Error as exc:
                self._answer(500, {"error": f"database error: {str(exc).strip().splitlines()[0]}"})
            else:
                self._answer(200, result)
            return
        self._answer(404, {"error": f"no endpoint {method} {url.path}"})

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_DELETE(self) -> None:
        self._handle("DELETE")


def main() -> None:
    Handler.store = Store(os.environ["REVIEWS_DSN"], os.environ.get("REVIEWS_EMAIL_URL", "http://email:8025"))
    server = ThreadingHTTPServer(("0.0.0.0", int(os.environ.get("REVIEWS_PORT", "8080"))), Handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
