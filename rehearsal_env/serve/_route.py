"""One address for every worker: a request for an episode another worker holds is forwarded to it.

An episode id names its instance and worker (:mod:`._ids`). :class:`Forwarder` (ASGI middleware, inside
the body bound) looks at every ``/v1/episodes/<id>...`` request: an episode of this process goes on to
the app; one of another worker of this server is sent to that worker's private address (the key is
checked here first, then again by the owner; the body is bounded as here; the answer comes back
unchanged, status, headers such as ``Retry-After`` and body, streamed); one of another instance is
``421`` (the proxy in front routes on the id's prefix). A worker that cannot be reached is never
waited for past :data:`FORWARD_TIMEOUT`: ``410`` with the cause when it stopped or died (its open
episodes recorded, see :mod:`._peers`), ``503`` with ``Retry-After`` while it starts or stops, ``504``
when it did not answer in time.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from fastapi import HTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from ._deps import identify
from ._ids import owner_of
from ._limits import json_response
from ._peers import SERVING, STOPPED, alive
from ._state import ServerState

EPISODE_PATH = re.compile(r"/v1/episodes/(ep_[^/]{1,120})(?:/.*)?")
FORWARD_TIMEOUT = httpx.Timeout(connect=2.0, read=120.0, write=30.0, pool=30.0)
"""How long a forwarded request may take: connecting (the owner is on this host), and each read."""
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
                        "transfer-encoding", "upgrade", "host", "date", "server"})
DYING_S = 2.0
"""How long a worker whose address refuses connections may take to exit before the caller is told 503 (retry)."""
FORWARDED_BY = "x-rehearsal-forwarded-by"
"""A response header naming the worker that received a request and forwarded it to the episode's owner."""


@dataclass(frozen=True)
class Refusal:
    """An answer in place of the owner's."""

    status: int
    """The HTTP status."""
    body: dict[str, Any]
    """The JSON body (``detail``, and ``cause`` where the owner is gone)."""
    headers: dict[str, str] = field(default_factory=dict)
    """Extra headers (``Retry-After``)."""


def route(state: ServerState, episode_id: str, private: bool) -> str | Refusal | None:
    """Where a request for ``episode_id`` goes: None (this process answers it), the owner's private URL, or a
    :class:`Refusal` (``private``: it came in on this worker's private address, so it is never sent on)."""
    owner, identity = owner_of(episode_id), state.identity
    if owner is None or identity.holds(owner):
        return None
    if owner.instance != identity.instance:
        theirs, ours = owner.instance or "(none)", identity.instance or "(none)"
        return Refusal(421, {"detail": f"episode {episode_id} was started by server instance {theirs}; this is "
                                       f"instance {ours}. Send every request of an episode to the address that routes "
                                       f"on the id's prefix (a reverse proxy, see docs/serve-scale.md) or to that "
                                       f"instance", "instance": owner.instance})
    if state.peers is None or private or owner.worker is None:
        return None  # the session table answers 404
    return state.peers.url_of(owner.worker) or gone(state, episode_id, owner.worker)


def gone(state: ServerState, episode_id: str, tag: str) -> Refusal:
    """Why worker ``tag`` cannot answer for ``episode_id`` (file work: call it off the event loop). A worker
    found dead is adopted now (its open episodes recorded ``not_scored``, cause ``worker``)."""
    peers = state.peers
    assert peers is not None
    entry = peers.entry(tag)
    if entry is None:
        return Refusal(404, {"detail": f"no episode {episode_id!r}: no worker {tag} of this server ever held it (an id "
                                       f"from another server run?); start one with POST /v1/episodes"})
    if entry.get("state") == SERVING:
        deadline = time.monotonic() + DYING_S  # its address refused us: it is most likely exiting
        while alive(entry) and time.monotonic() < deadline:
            time.sleep(0.05)
        if alive(entry):
            return Refusal(503, {"detail": f"the server process holding episode {episode_id} (worker {tag}) does not "
                                           f"answer (starting or stopping); retry (a step with the same step_index is "
                                           f"never applied twice)", "retry_after": 1}, {"Retry-After": "1"})
        if peers.adopt(tag, state.record_lost) and state.recorder is not None:
            state.recorder.flush()
        entry = peers.entry(tag) or entry
    if entry.get("state") == STOPPED:
        return Refusal(410, {"detail": f"the server process that held episode {episode_id} (worker {tag}) stopped; "
                                       f"every episode it held was ended and recorded (an open one as given up, "
                                       f"ended_by server_shutdown). Start a new episode", "cause": "server_shutdown"})
    lost = peers.lost(tag, episode_id)
    if lost is not None and lost.get("record_error"):
        failed = lost["record_error"]
        return Refusal(410, {"detail": f"{lost['reason']}. Recording episode {episode_id} failed ({failed}). Start a "
                                       f"new episode", "cause": "worker", "outcome": "not_scored", "recorded_in": None})
    if lost is None or lost.get("recorded_in") is None:
        return Refusal(410, {"detail": f"the server process that held episode {episode_id} (worker {tag}, pid "
                                       f"{entry.get('pid')}) died; the episode was not open then (it had ended and its "
                                       f"record was written). Start a new episode", "cause": "worker"})
    return Refusal(410, {"detail": f"{lost['reason']}. Episode {episode_id} was recorded not_scored (cause worker) in "
                                   f"{lost['recorded_in']}. Start a new episode", "cause": "worker",
                         "outcome": "not_scored", "recorded_in": lost["recorded_in"]})


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return None


def check_key(state: ServerState, client: Any, authorization: str | None) -> Refusal | None:
    """The refusal :func:`~._deps.identify` answers for this client, or None when it may go on."""
    scheme, _, token = (authorization or "").partition(" ")
    try:
        identify(state, client[0] if client else None, token if scheme.lower() == "bearer" and token else None)
    except HTTPException as exc:
        return Refusal(exc.status_code, {"detail": exc.detail}, dict(exc.headers or {}))
    return None


class Forwarder:
    """ASGI middleware: requests for other workers' episodes go to them (see the module's docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        match = EPISODE_PATH.fullmatch(scope["path"]) if scope["type"] == "http" else None
        state: ServerState | None = scope["app"].state.serve if match is not None else None
        if match is None or state is None or state.peers is None and state.identity.instance is None:
            await self.app(scope, receive, send)
            return
        where = route(state, match[1], private=scope.get("server", (None, None))[1] == state.private_port)
        if where is None:
            await self.app(scope, receive, send)
            return
        refusal = check_key(state, scope.get("client"), _header(scope, b"authorization"))
        if refusal is None and isinstance(where, str):
            refusal = await _forward(state, where, match[1], scope, receive, send)
        elif refusal is None:
            assert isinstance(where, Refusal)
            refusal = where
        if refusal is not None:
            await json_response(refusal.body, refusal.status, refusal.headers or None)(scope, receive, send)


async def _forward(state: ServerState, url: str, episode_id: str, scope: Scope, receive: Receive,
                   send: Send) -> Refusal | None:
    """Send the request to the owner at ``url`` and its answer back; a refusal when the owner cannot answer."""
    chunks, more = [], True
    try:
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
    except HTTPException as exc:  # the body bound, raised by BodyLimit's receive
        return Refusal(exc.status_code, {"detail": exc.detail}, dict(exc.headers or {}))
    path = (scope.get("raw_path") or scope["path"].encode()).decode("latin-1")
    query = scope.get("query_string", b"").decode("latin-1")
    headers = [(k, v) for k, v in scope["headers"] if k.decode("latin-1").lower() not in HOP_BY_HOP]
    assert state.http is not None and state.peers is not None
    request = state.http.build_request(scope["method"], url + path + (f"?{query}" if query else ""),
                                       headers=headers, content=b"".join(chunks))
    owner = owner_of(episode_id)
    assert owner is not None and owner.worker is not None
    try:
        response = await state.http.send(request, stream=True)
    except httpx.TimeoutException:
        return Refusal(504, {"detail": f"the server process holding episode {episode_id} (worker {owner.worker}) did "
                                       f"not answer in time; retry (a step with the same step_index is never applied "
                                       f"twice)", "retry_after": 1}, {"Retry-After": "1"})
    except httpx.TransportError:
        state.peers.forget_url(owner.worker)
        return await state.off_loop("housekeeping", gone, state, episode_id, owner.worker)
    try:
        own = [(k, v) for k, v in response.headers.raw if k.decode("latin-1").lower() not in HOP_BY_HOP]
        forwarded_by = (state.identity.worker or "").encode()
        await send({"type": "http.response.start", "status": response.status_code,
                    "headers": [*own, (FORWARDED_BY.encode(), forwarded_by)]})
        async for chunk in response.aiter_raw():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    finally:
        await response.aclose()
    return None
