"""The gateway app: an OpenAI-compatible endpoint that forwards to the real provider and logs every call.

A harness uses ``http://GATEWAY/episodes/LINK/v1`` as its model's base URL (or ``/v1`` with the header
``X-Rehearsal-Link: LINK``); ``LINK`` ties its calls to its episode (``rehearsal mcp --link``, or a fresh
random one the episode shows its client). ``POST .../chat/completions`` is forwarded to
``UPSTREAM/chat/completions`` as sent (the gateway's own ``--api-key-env`` replaces the harness's key when
given), streamed back as it arrives, and logged in the ledger: usage, latency (and time to the first byte),
finish reasons, and the logprobs and token ids the provider returned. For a stream the gateway asks the
provider for the usage chunk (``stream_options.include_usage``) and passes it on only when the harness asked
for it too.
``GET .../models`` is forwarded unlogged. A call the provider failed (timeout, broken connection, 408,
409, 429, 5xx) is answered with the provider's status (502 or 504 when there was none) and logged as
``provider_failed``: what decides whether an episode the harness then abandons is ``not_scored``. A stream the
harness hangs up before the provider ended it is logged as ``harness_closed``: the harness's doing, never the
provider's failure.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Protocol

import anyio
import anyio.to_thread
import httpx
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.background import BackgroundTask

from ._call import Call
from ._ledger import HARNESS_CLOSED, Ledger, check_link

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
    token_ids: bool = False
    """Ask the provider for the prompt's and the completion's token ids (vLLM's ``return_token_ids: true``) when the
    harness did not; a provider that does not know the parameter may refuse the call (OpenAI's API does)."""


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": "gateway_error", "code": status}}, status_code=status)


class _Log(Protocol):
    def __call__(self, link: str, call: Call, http_status: int | None, error: str | None = None, *,
                 status: str | None = None) -> Awaitable[None]: ...


class _Relay:
    """One provider stream passed on to the harness line by line, and logged once.

    The call is logged when the provider's stream ends (before its last line is passed on: a harness that hangs
    up on ``[DONE]`` cancels the relay, and a log left to the end would then be lost), as ``provider_failed``
    when reading from the provider raised (a timeout, a connection broken on its side), or, when the harness hung
    up first (the relay closed or cancelled mid-stream, or never started), as ``harness_closed``: whoever ended the
    stream is whose doing it is."""

    def __init__(self, link: str, call: Call, answer: httpx.Response, wants_usage: bool, log: _Log) -> None:
        self.link, self.call, self.answer, self.wants_usage, self.log = link, call, answer, wants_usage, log
        self.logged = False

    async def end(self, status: int | None, error: str | None, *, closed: bool = False) -> None:
        """Log the call unless it is logged already (``closed``: the harness hung up)."""
        if not self.logged:
            self.logged = True
            await self.log(self.link, self.call, status, error, status=HARNESS_CLOSED if closed else None)

    async def close(self) -> None:
        """Close the provider's stream; log it as the harness's hang-up if it was not logged yet. Shielded: it runs
        while the relay is being cancelled because the harness went away."""
        with anyio.CancelScope(shield=True):
            try:
                await self.end(self.answer.status_code, "the harness closed the stream before its end", closed=True)
            finally:
                await self.answer.aclose()

    async def lines(self) -> AsyncIterator[bytes]:
        """The provider's lines as the harness gets them (the usage chunk it did not ask for left out)."""
        call = self.call
        try:
            async for line in self.answer.aiter_lines():
                if call.first_byte_s is None:
                    call.first_byte_s = call.elapsed()
                data = line[5:].strip() if line.startswith("data:") else None
                if data == "[DONE]":
                    await self.end(200, None)
                elif data:
                    try:
                        chunk = json.loads(data)
                    except ValueError:
                        chunk = None
                    if isinstance(chunk, dict):
                        call.take(chunk)
                        if not self.wants_usage and not chunk.get("choices") and chunk.get("usage") is not None:
                            continue  # the usage chunk the gateway asked for, not the harness
                yield (line + "\n").encode()
            await self.end(200, None)
        except httpx.HTTPError as exc:  # raised by reading the provider's answer: the provider's side failed
            await self.end(None, f"the stream broke off: {type(exc).__name__}: {exc}")
            status = 504 if isinstance(exc, httpx.TimeoutException) else 502
            error = {"message": f"the model provider's stream broke off ({type(exc).__name__}); the answer above is "
                                f"incomplete", "type": "gateway_error", "code": status}
            # an error event, as OpenAI ends a stream that failed (its SDK raises APIError): the harness knows
            yield b"\ndata: " + json.dumps({"error": error}).encode() + b"\n\n"
        finally:  # ended, broken off, or the harness hung up mid-stream (closed or cancelled here): the last is its
            await self.close()


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

    async def log(link: str, call: Call, http_status: int | None, error: str | None = None, *,
                  status: str | None = None) -> None:
        async with lock:
            if link not in counters:
                counters[link] = len(await anyio.to_thread.run_sync(config.ledger.read, link))
            index = counters[link]
            counters[link] += 1
        await anyio.to_thread.run_sync(config.ledger.append, link, call.line(index, http_status, error, status=status))

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
        if config.token_ids and "return_token_ids" not in body:
            body["return_token_ids"] = True
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
        relay = _Relay(link, call, answer, wants_usage, log)
        # the background task closes a stream the harness hung up on before its first line was relayed
        return StreamingResponse(relay.lines(), media_type="text/event-stream", background=BackgroundTask(relay.close))

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
