"""Serving an MCP server over stdio or streamable HTTP (the SDK's own transports).

Over HTTP every request is authenticated by :func:`rehearsal_env.episodes.authenticate`, the rule ``rehearsal serve``
uses: with a keys file, its bearer key (401 without a known one); without one, the single ``local`` principal, for
loopback clients only (a server without keys never binds to another address). The principal rides on the request
(:func:`principal_of`); the MCP handlers read it from there, never from the server's own options.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.routing import Route

from ..episodes import KeyStore, Principal, SessionError, Unauthorized, authenticate, check_bind

MCP_PATH = "/mcp"
"""Where the streamable HTTP endpoint is."""
PRINCIPAL = "rehearsal_principal"
"""The key of a request's state (``scope["state"]``) that holds who sent it."""


def principal_of(request: Any) -> Principal | None:
    """Who sent ``request`` (an HTTP request the endpoint authenticated); None for stdio, which has no request."""
    state = getattr(request, "scope", {}).get("state") if request is not None else None
    who = state.get(PRINCIPAL) if isinstance(state, dict) else None
    return who if isinstance(who, Principal) else None


async def serve_stdio(server: Server[Any]) -> None:
    """Serve ``server`` on this process's stdin and stdout until stdin closes."""
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


class _Endpoint:
    """The session manager as an ASGI app (a Starlette route's endpoint) that authenticates every request first."""

    def __init__(self, manager: StreamableHTTPSessionManager, keys: KeyStore | None) -> None:
        self.manager, self.keys = manager, keys

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        request = Request(scope)
        header = request.headers.get("authorization", "")
        token = header[7:] if header[:7].lower() == "bearer " else None
        try:
            who = authenticate(self.keys, request.client.host if request.client else None, token)
        except SessionError as exc:
            headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, Unauthorized) else None
            await JSONResponse({"detail": str(exc)}, exc.status, headers=headers)(scope, receive, send)
            return
        scope.setdefault("state", {})[PRINCIPAL] = who
        await self.manager.handle_request(scope, receive, send)


LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


def security(host: str) -> TransportSecuritySettings:
    """DNS-rebinding protection: only requests whose ``Host`` (and ``Origin``, when sent) name the address the server
    listens on are served; a loopback server accepts every loopback spelling."""
    hosts = list(LOOPBACK_HOSTS) if host in ("127.0.0.1", "localhost", "::1") else [
        f"[{host}]" if ":" in host else host]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=[f"{h}:*" for h in hosts],
                                     allowed_origins=[f"{scheme}://{h}:*" for h in hosts for scheme in ("http",
                                                                                                         "https")])


def http_app(server: Server[Any], *, host: str = "127.0.0.1", session_idle_timeout: float | None = None,
             keys: KeyStore | None = None) -> FastAPI:
    """An ASGI app serving ``server`` over streamable HTTP at :data:`MCP_PATH` for clients that reach it at ``host``
    (stateful sessions; an MCP session unused for ``session_idle_timeout`` seconds is closed by the SDK), each request
    authenticated by ``keys`` (None: the ``local`` principal, loopback clients only).

    Raises:
        ValueError: ``host`` is not a loopback address and there are no keys.
    """
    check_bind(host, keys)
    manager = StreamableHTTPSessionManager(app=server, session_idle_timeout=session_idle_timeout,
                                           security_settings=security(host))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with manager.run():
            yield

    app = FastAPI(lifespan=lifespan, openapi_url=None, docs_url=None, redoc_url=None)
    app.router.routes.append(Route(MCP_PATH, endpoint=_Endpoint(manager, keys), methods=["GET", "POST", "DELETE"]))
    return app
