"""The gateway app: an OpenAI-compatible endpoint that forwards to the real provider and logs every call.

A harness uses ``http://GATEWAY/episodes/LINK/v1`` as its model's base URL (or ``/v1`` with the header
``X-Rehearsal-Link: LINK``); ``LINK`` ties its calls to its episode (``rehearsal mcp --link``, or the
episode id). ``POST .../chat/completions`` is forwarded to ``UPSTREAM/chat/completions`` as sent (the
gateway's own ``--api-key-env`` replaces the harness's key when given), streamed back as it arrives,
and logged in the ledger: usage, latency (and time to the first byte), finish reasons, and the logprobs
and token ids the provider returned. For a stream the gateway asks the provider for the usage chunk
(``stream_options.include_usage``) and passes it on only when the harness asked for it too.
``GET .../models`` is forwarded unlogged. A call the provider failed (timeout, broken connection, 408,
409, 429, 5xx) is answered with the provider's status (502 or 504 when there was none) and logged as
``provider_failed``: what decides whether an episode the harness then abandons is ``not_scored``.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio
import anyio.to_thread
import httpx
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from ._call import Call
from ._ledger import Ledger, check_link

LINK_HEADER = "x-rehearsal-link"
"""The header naming the episode link on the ``/v1/...`` routes."""
MAX_BODY = 32 << 20
"""Largest request body forwarded (32 MiB)."""


@dataclass(frozen=True)
class GatewayConfig:
    """Where the gateway forwards and logs."""

    upstream: str
    """The provider's OpenAI-compatible base URL (``http://host:port/v1``)."""
    ledger: Ledger
    """Where each link's calls are logged."""
    api_key_env: str | None = None
    """An environment variable holding the provider's key, sent instead of the harness's (None: pass it on)."""
    timeout: float = 600.0
    """Seconds a call may take (connect, and between bytes of the answer)."""
    logprobs: bool = False
    """Ask the provider for each sampled token's logprob (``logprobs: true``, ``top_logprobs: 1``) when the harness
    did not."""


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": "gateway_error", "code": status}}, status_code=status)


def gateway_app(config: GatewayConfig) -> FastAPI:
    """The gateway's FastAPI app."""
    upstream = config.upstream.rstrip("/")
    counters: dict[str, int] = {}
    lock = anyio.Lock()
    client: list[httpx.AsyncClient] = []

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with httpx.AsyncClient(timeout=httpx.Timeout(config.timeout), trust_env=False) as http:
            client.append(http)
            yield

    app = FastAPI(title="rehearsal-env model gateway", lifespan=lifespan, docs_url=None, redoc_url=None)

    def headers(request: Request) -> dict[str, str]:
        out = {"content-type": "application/json"}
        key = os.environ.get(config.api_key_env) if config.api_key_env else None
        if key:
            out["authorization"] = f"Bearer {key}"
        elif request.headers.get("authorization"):
            out["authorization"] = request.headers["authorization"]
        return out

    async def log(link: str, call: Call, http_status: int | None, error: str | None = None) -> None:
        async with lock:
            if link not in counters:
                counters[link] = len(await anyio.to_thread.run_sync(config.ledger.read, link))
            index = counters[link]
            counters[link] += 1
        await anyio.to_thread.run_sync(config.ledger.append, link, call.line(index, http_status, error))

    async def complete(link: str, request: Request) -> Response:
        try:
            check_link(link)
        except ValueError as exc:
            raise HTTPException(400, str(exc)) from None
        raw = await request.body()
        if len(raw) > MAX_BODY:
            return _error(413, f"expected a request body of at most {MAX_BODY} bytes, got {len(raw)}")
        try:
            body = json.loads(raw)
        except ValueError as exc:
            return _error(400, f"expected a JSON chat completion request, got invalid JSON ({exc})")
        if not isinstance(body, dict):
            return _error(400, f"expected a JSON object, got {type(body).__name__}")
        stream = body.get("stream") is True
        wants_usage = stream and isinstance(body.get("stream_options"), dict) and \
            body["stream_options"].get("include_usage") is True
        if stream:
            body["stream_options"] = {**(body.get("stream_options") or {}), "include_usage": True}
        if config.logprobs and "logprobs" not in body:
            body["logprobs"] = True
            body.setdefault("top_logprobs", 1)  # llama.cpp's server returns logprobs only with top_logprobs
        call = Call(stream=stream, model=body.get("model") if isinstance(body.get("model"), str) else None)
        http = client[0]
        send = http.build_request("POST", f"{upstream}/chat/completions", json=body, headers=headers(request))
        try:
            answer = await http.send(send, stream=True)
        except httpx.HTTPError as exc:
            await log(link, call, None, f"{type(exc).__name__}: {exc}")
            status = 504 if isinstance(exc, httpx.TimeoutException) else 502
            return _error(status, f"the model provider at {upstream} did not answer ({type(exc).__name__}: {exc})")
        if answer.status_code != 200 or not stream:
            call.first_byte_s = call.elapsed()
            try:
                content = await answer.aread()
            except httpx.HTTPError as exc:
                await log(link, call, None, f"{type(exc).__name__} reading the answer: {exc}")
                return _error(502, f"the model provider's answer broke off ({type(exc).__name__})")
            finally:
                await answer.aclose()
            error = None
            try:
                parsed = json.loads(content)
                if isinstance(parsed, dict):
                    call.take(parsed)
            except ValueError:
                parsed = None
            if answer.status_code != 200:
                error = content[:2000].decode("utf-8", "replace")
            await log(link, call, answer.status_code, error)
            return Response(content, status_code=answer.status_code,
                            media_type=answer.headers.get("content-type", "application/json"))
        return StreamingResponse(relay(link, call, answer, wants_usage), media_type="text/event-stream")

    async def relay(link: str, call: Call, answer: httpx.Response, wants_usage: bool) -> AsyncIterator[bytes]:
        """Pass the stream on line by line; the call is logged when the provider's stream ends (before its
        last line is passed on: a harness that hangs up on ``[DONE]`` cancels this generator, and a log left
        to ``finally`` would then be lost), or, failing that, when the stream breaks off or the harness goes."""
        logged = False

        async def end(status: int | None, error: str | None) -> None:
            nonlocal logged
            if not logged:
                logged = True
                await log(link, call, status, error)

        try:
            async for line in answer.aiter_lines():
                if call.first_byte_s is None:
                    call.first_byte_s = call.elapsed()
                data = line[5:].strip() if line.startswith("data:") else None
                if data == "[DONE]":
                    await end(200, None)
                elif data:
                    try:
                        chunk = json.loads(data)
                    except ValueError:
                        chunk = None
                    if isinstance(chunk, dict):
                        call.take(chunk)
                        if not wants_usage and not chunk.get("choices") and chunk.get("usage") is not None:
                            continue  # the usage chunk the gateway asked for, not the harness
                yield (line + "\n").encode()
            await end(200, None)
        except httpx.HTTPError as exc:
            await end(None, f"the stream broke off: {type(exc).__name__}: {exc}")
        finally:
            await answer.aclose()
            if not logged:  # the harness hung up mid-stream: log what was relayed, even while being cancelled
                logged = True
                await asyncio.shield(log(link, call, None, "the harness closed the stream before its end"))

    @app.post("/episodes/{link}/v1/chat/completions", summary="A chat completion of the episode LINK")
    async def by_path(link: str, request: Request) -> Response:
        return await complete(link, request)

    @app.post("/v1/chat/completions", summary="A chat completion of the episode named in X-Rehearsal-Link")
    async def by_header(request: Request) -> Response:
        link = request.headers.get(LINK_HEADER)
        if not link:
            return _error(400, f"expected the header {LINK_HEADER}: LINK, or the base URL /episodes/LINK/v1")
        return await complete(link, request)

    async def models(request: Request) -> Response:
        try:
            answer = await client[0].get(f"{upstream}/models", headers=headers(request))
        except httpx.HTTPError as exc:
            return _error(502, f"the model provider at {upstream} did not answer ({type(exc).__name__})")
        return Response(answer.content, status_code=answer.status_code,
                        media_type=answer.headers.get("content-type", "application/json"))

    app.add_api_route("/episodes/{link}/v1/models", models, methods=["GET"], summary="The provider's models")
    app.add_api_route("/v1/models", models, methods=["GET"], summary="The provider's models")
    return app
