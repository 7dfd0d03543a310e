"""The routes' dependencies: the server's state, and who is asking (an API key through
:class:`fastapi.security.HTTPBearer`, or a loopback client on a server without keys).

They are ``async`` so that they run on the event loop: a sync dependency would take a thread
from FastAPI's own pool, outside the fair share of :class:`~rehearsal_env.serve.FairLimiter`.
"""

from __future__ import annotations

import ipaddress
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from ._keys import Scope
from ._session import Principal
from ._sessions import SessionTable
from ._state import ServerState

LOCAL = "local"
"""The key id of every client of a server without keys (loopback only)."""
bearer = HTTPBearer(auto_error=False, description="An API key from `rehearsal keys create` (servers started "
                                                  "with --keys); without --keys, loopback clients only.")


def _loopback(host: str | None) -> bool:
    try:
        return host is not None and ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def server_state(request: Request) -> ServerState:
    """The :class:`ServerState` of the app serving ``request``."""
    state: ServerState = request.app.state.serve
    return state


async def session_table(state: Annotated[ServerState, Depends(server_state)]) -> SessionTable:
    """The session table."""
    return state.table


async def principal(request: Request, state: Annotated[ServerState, Depends(server_state)],
              credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> Principal:
    """Who sends ``request``: its key (401 without a known one), or ``local`` on a server without keys (403 for
    anyone not on loopback)."""
    return identify(state, request.client.host if request.client else None,
                    credentials.credentials if credentials is not None else None)


def identify(state: ServerState, host: str | None, token: str | None) -> Principal:
    """Who a client at ``host`` with bearer ``token`` is (HTTP and WebSocket alike; see :func:`principal`)."""
    if state.keys is None:
        if not _loopback(host):
            raise HTTPException(403, f"this server has no keys and accepts clients on 127.0.0.1 only; got a "
                                     f"request from {host}. Start it with --keys FILE to accept others")
        return Principal(LOCAL, Scope.BUILD_AND_EVALUATE)
    if not token:
        raise HTTPException(401, "expected the header 'Authorization: Bearer <key>'; create a key with "
                                 "`rehearsal keys create --scope evaluate`", headers={"WWW-Authenticate": "Bearer"})
    entry = state.keys.authenticate(token.strip())
    if entry is None:
        raise HTTPException(401, "the key is not known to this server (revoked, or from another keys file)",
                            headers={"WWW-Authenticate": "Bearer"})
    return Principal(entry.id, entry.scope, entry.agents)


State = Annotated[ServerState, Depends(server_state)]
Table = Annotated[SessionTable, Depends(session_table)]
Who = Annotated[Principal, Depends(principal)]
