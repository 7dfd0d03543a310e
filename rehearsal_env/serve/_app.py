"""The FastAPI app: routers for health, worlds and episodes; the server's state on ``app.state.serve``;
a lifespan that warms the worlds, reaps idle sessions, flushes records and, at shutdown, ends every
open episode as given up and judged.

Requests are bounded before they are read (:class:`BodyLimit`) and validation errors never echo what
arrived. Every database call runs in a worker thread within the key's fair share.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
from collections.abc import AsyncIterator, Sequence

import httpx
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response

from .._version import __version__
from ..episodes import AtCapacity, SessionError
from ..records import preload
from ..rewards import EXTERNAL_MODE
from ..worlds import World
from . import _episodes, _forks, _health, _worlds, _ws
from ._config import CONFIG_ENV, ServeConfig
from ._health import PUBLIC
from ._limits import KEEP_ALIVE_S, BodyLimit, json_response, validation_failed, ws_max_size
from ._models import ApiError
from ._peers import PrivateListener
from ._route import FORWARD_TIMEOUT, Forwarder
from ._state import ServerState

HOUSEKEEPING = "housekeeping"
"""The fair-share key of the server's own work (reaping, flushing records)."""


async def _housekeeping(state: ServerState) -> None:
    every = min(1.0, state.config.idle_timeout / 4)
    while True:
        await asyncio.sleep(every)
        await state.off_loop(HOUSEKEEPING, state.table.reap)
        await state.off_loop(HOUSEKEEPING, state.flush)
        if state.peers is not None:
            await state.off_loop(HOUSEKEEPING, state.sweep)


@contextlib.asynccontextmanager
async def _private(app: FastAPI, state: ServerState) -> AsyncIterator[None]:
    """A worker of several: its own address on 127.0.0.1, registered with the others (see ``_peers``), and the
    client that forwards their episodes' requests to them."""
    if state.peers is None:
        yield
        return
    listener = PrivateListener(app, ws_max_size=ws_max_size(state.config.max_body_bytes),
                               timeout_keep_alive=KEEP_ALIVE_S)
    state.private_port = listener.port
    state.http = httpx.AsyncClient(timeout=FORWARD_TIMEOUT, limits=httpx.Limits(max_connections=256))
    state.peers.register(await listener.start())
    await state.off_loop(HOUSEKEEPING, state.sweep)  # workers of an earlier server on this folder that died
    try:
        yield
    finally:
        await listener.stop()
        await state.http.aclose()


@contextlib.asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    state: ServerState = app.state.serve
    state.start()
    for name, world in state.worlds.items():
        await state.off_loop(PUBLIC, state.blob, name, None)
        await state.off_loop(PUBLIC, state.table.pool.warm, world)
    # what writing and reading parts import on first use (pandas, pyarrow.dataset): now, so that it is frozen below
    # instead of walked by every full collection (measured: 1.8 -> 2.3 ms of server CPU a WebSocket step without)
    await state.off_loop(PUBLIC, preload)
    gc.collect()
    gc.freeze()  # the worlds, their seed rows and snapshots live as long as the server: keep them out of
    # every garbage collection (with a thousand sessions a full collection otherwise walks them all)
    task = asyncio.create_task(_housekeeping(state))
    try:
        async with _private(app, state):
            yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await state.off_loop(HOUSEKEEPING, state.table.close)
        await state.off_loop(HOUSEKEEPING, state.flush)
        if state.peers is not None:
            state.peers.stopped()
        if state.limiter is not None:
            state.limiter.close()


async def _session_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, SessionError)
    headers = {"Retry-After": str(exc.retry_after)} if isinstance(exc, AtCapacity) else None
    return json_response({"detail": str(exc), **exc.extra}, exc.status, headers)


def create_app(config: ServeConfig | None = None, *, worlds: Sequence[World] = ()) -> FastAPI:
    """The API app for ``config``; ``worlds`` adds world objects to those named in the config."""
    config = config or ServeConfig()
    app = FastAPI(
        title="rehearsal-env", version=__version__, lifespan=_lifespan,
        description="Practice worlds for tool-using AI agents, over HTTP: start an episode of a scenario, send one "
                    "action per step (`step_index` makes a retry safe), read the verdict. Every episode is recorded "
                    "like a `rehearsal run` episode. Every served episode is an external-mode episode: "
                    + EXTERNAL_MODE,
        responses={401: {"model": ApiError}, 403: {"model": ApiError}, 413: {"model": ApiError},
                   422: {"model": ApiError}})
    app.state.serve = state = ServerState.build(config, worlds)
    app.state.table, app.state.recorder, app.state.config = state.table, state.recorder, config
    app.add_middleware(Forwarder)  # inside the body bound: a forwarded body is bounded as one served here
    app.add_middleware(BodyLimit, limit=config.max_body_bytes)
    app.add_exception_handler(SessionError, _session_error)
    app.add_exception_handler(RequestValidationError, validation_failed)
    for router in (_health.router, _worlds.router, _forks.router, _episodes.router, _ws.router):
        app.include_router(router)
    return app


def app_from_environment() -> FastAPI:
    """The app for the :class:`ServeConfig` in ``$REHEARSAL_SERVE_CONFIG`` (how ``--workers`` processes start)."""
    raw = os.environ.get(CONFIG_ENV)
    if not raw:
        raise RuntimeError(f"expected ${CONFIG_ENV} to hold a ServeConfig as JSON; "
                           f"start servers with `rehearsal serve`")
    return create_app(ServeConfig.from_json(raw))
