"""OpenAI's form of structured output, read by ``rehearsal models serve``.

OpenAI's API, vLLM, SGLang and llama.cpp's own server take a JSON schema for the answer as
``response_format: {"type": "json_schema", "json_schema": {"name": ..., "schema": S}}``; llama-cpp-python's
server, which ``rehearsal models serve`` runs, takes it only as ``{"type": "json_object", "schema": S}`` and
refuses the other form (422). :class:`SchemaForm` rewrites the first form into the second before that server
reads a chat request, so a client written for OpenAI's API (the world compiler's, for one) gets its answer
constrained to the schema here too (:func:`~rehearsal_env.agents._local_server.answer_grammar`).
"""

from __future__ import annotations

import json
from typing import Any

MAX_BODY_BYTES = 16 * 1024 * 1024
"""The largest request body rewritten; a larger one is passed on as it came."""


def rewritten(body: bytes) -> bytes:
    """``body`` (a chat request) with a ``json_schema`` response format in llama-cpp-python's form; any other body
    unchanged."""
    try:
        request = json.loads(body)
    except ValueError:
        return body
    form = request.get("response_format") if isinstance(request, dict) else None
    if not isinstance(form, dict) or form.get("type") != "json_schema":
        return body
    schema = (form.get("json_schema") or {}).get("schema") if isinstance(form.get("json_schema"), dict) else None
    request["response_format"] = {"type": "json_object", **({"schema": schema} if isinstance(schema, dict) else {})}
    return json.dumps(request).encode()


class SchemaForm:
    """ASGI middleware: each POST to a ``.../chat/completions`` path has its body read whole and
    :func:`rewritten`; every other request passes as it came.

    Args:
        app: The ASGI application it wraps (llama-cpp-python's server).
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or not scope["path"].endswith("/chat/completions"):
            await self.app(scope, receive, send)
            return
        parts: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client left before it sent the body
                return
            parts.append(message.get("body", b""))
            size += len(parts[-1])
            if not message.get("more_body", False) or size > MAX_BODY_BYTES:
                more = message.get("more_body", False)
                break
        body = b"".join(parts) if more else rewritten(b"".join(parts))
        first = {"type": "http.request", "body": body, "more_body": more}
        given = False

        async def replay() -> dict[str, Any]:
            nonlocal given
            if not given:
                given = True
                return first
            message: dict[str, Any] = await receive()  # the rest of an oversized body, or the client leaving
            return message

        if more:  # passed on as it came
            await self.app(scope, replay, send)
            return
        headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"content-length"]
        await self.app({**scope, "headers": [*headers, (b"content-length", str(len(body)).encode())]}, replay, send)
