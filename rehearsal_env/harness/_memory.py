"""An in-process MCP session with an episode server: the SDK's in-memory transport and the initialize handshake.

The SDK 2.x's ``Client(server)`` speaks the stateless 2026-07-28 wire to an in-process server by default, where an
episode server plays nothing (no session holds the episode); ``mode="legacy"`` makes it one MCP session, one episode.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp import Client, ClientSession
from mcp.server.lowlevel import Server


@asynccontextmanager
async def connected(server: Server[Any], **options: Any) -> AsyncIterator[ClientSession]:
    """A client session with ``server`` in this process, initialized (one MCP session: one episode). ``options`` go
    to the SDK's :class:`mcp.Client` (``message_handler``, ``logging_callback``, ...); closing it settles an episode
    left running as a disconnect."""
    async with Client(server, mode="legacy", **options) as client:
        yield client.session
