"""Bounds on what a request may carry, enforced before it is read: body size (413), URL length (414),
and validation errors that never echo what arrived (a 1 MB name or a lone surrogate included)."""

from __future__ import annotations

import json
from typing import Any

from fastapi import HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

MAX_URL = 4096
"""Longest path plus query string."""
MAX_OTHER_BODY = 1 << 16
"""Largest body of any request but a step (starting an episode carries names and numbers only)."""
KEEP_ALIVE_S = 75
"""How long an idle connection stays open: an agent thinks between steps (uvicorn's own default is 5 s)."""


def ws_max_size(max_body_bytes: int) -> int:
    """The largest WebSocket message uvicorn reads (a longer one closes the connection, 1009): room for a
    frame just over ``--max-body-bytes``, which the session answers with 413 and goes on."""
    return 2 * max_body_bytes + 1024


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """``body`` as JSON text, ASCII only (a lone surrogate is written as its escape, never an encoding error)."""
    return Response(json.dumps(body, separators=(",", ":"), ensure_ascii=True), status_code=status,
                    headers=headers, media_type="application/json")


def too_large(limit: int, got: str) -> str:
    return (f"expected a request body of at most {limit} bytes; got {got}. Send shorter actions and names "
            f"(the server's --max-body-bytes)")


class BodyLimit:
    """ASGI middleware: a ``Content-Length`` over the bound is refused (413) before the body is read, a body
    sent in chunks is cut off (413) as soon as it passes the bound, a URL over :data:`MAX_URL` is 414. The
    bound is ``limit`` for a step (it carries the action) and :data:`MAX_OTHER_BODY` for anything else."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        url = len(scope.get("raw_path") or scope["path"]) + len(scope.get("query_string", b""))
        if url > MAX_URL:
            await json_response({"detail": f"expected a URL of at most {MAX_URL} characters; got {url}. World and "
                                           f"scenario names are short"}, 414)(scope, receive, send)
            return
        limit = self.limit if scope["path"].endswith("/step") else min(self.limit, MAX_OTHER_BODY)
        declared = [v for k, v in scope["headers"] if k == b"content-length"]
        if declared and (not declared[0].isdigit() or int(declared[0]) > limit):
            got = f"Content-Length {declared[0][:20].decode('latin-1')}"
            await json_response({"detail": too_large(limit, got)}, 413,
                                {"Connection": "close"})(scope, receive, send)
            return
        seen = 0

        async def bounded() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise HTTPException(413, too_large(limit, f"more than {limit} bytes"),
                                        headers={"Connection": "close"})
            return message

        await self.app(scope, bounded, send)


async def validation_failed(request: Request, exc: Exception) -> Response:
    """422 naming each field that failed and why, never the value that arrived (it may be huge, or hold a
    lone surrogate that no response can encode)."""
    assert isinstance(exc, RequestValidationError)
    return json_response({"detail": validation_errors(exc)}, 422)


def validation_errors(exc: RequestValidationError) -> list[dict[str, Any]]:
    """Each field that failed and why (at most 20), never the value that arrived."""
    return [{"loc": [p if isinstance(p, int) else _short(str(p)) for p in e.get("loc", ())],
             "msg": _short(str(e.get("msg", "")), 300), "type": str(e.get("type", ""))} for e in exc.errors()[:20]]


def _short(text: str, most: int = 80) -> str:
    return text[:most].encode("ascii", "backslashreplace").decode()
