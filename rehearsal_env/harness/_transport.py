"""Serving an MCP server over stdio or streamable HTTP (the SDK's own transports)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.routing import Route

MCP_PATH = "/mcp"
"""Where the streamable HTTP endpoint is."""


async def serve_stdio(server: Server[Any, Any]) -> None:
    """Serve ``server`` on this process's stdin and stdout until stdin closes."""
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


class _Endpoint:
    """The session manager as an ASGI app (a Starlette route's endpoint)."""

    def __init__(self, manager: StreamableHTTPSessionManager) -> None:
        self.manager = manager

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
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


def http_app(server: Server[Any, Any], *, host: str = "127.0.0.1", session_idle_timeout: float | None = None
             ) -> FastAPI:
    """An ASGI app serving ``server`` over streamable HTTP at :data:`MCP_PATH` for clients that reach it at ``host``
    (stateful sessions; an MCP session unused for ``session_idle_timeout`` seconds is closed by the SDK)."""
    manager = StreamableHTTPSessionManager(app=server, session_idle_timeout=session_idle_timeout,
                                           security_settings=security(host))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with manager.run():
            yield

    app = FastAPI(lifespan=lifespan, openapi_url=None, docs_url=None, redoc_url=None)
    app.router.routes.append(Route(MCP_PATH, endpoint=_Endpoint(manager), methods=["GET", "POST", "DELETE"]))
    return app
