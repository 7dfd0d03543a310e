"""The routes' dependencies: the server's state, and who is asking (an API key through
:class:`fastapi.security.HTTPBearer`, or a loopback client on a server without keys).

They are ``async`` so that they run on the event loop: a sync dependency would take a thread
from FastAPI's own pool, outside the fair share of :class:`~rehearsal_env.serve.FairLimiter`.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from ..episodes import Forbidden, Principal, SessionTable, Unauthorized, authenticate
from ._state import ServerState

bearer = HTTPBearer(auto_error=False, description="An API key from `rehearsal keys create` (servers started "
                                                  "with --keys); without --keys, loopback clients only.")


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
    """Who a client at ``host`` with bearer ``token`` is (HTTP and WebSocket alike; the rule is
    :func:`rehearsal_env.episodes.authenticate`)."""
    try:
        return authenticate(state.keys, host, token)
    except Unauthorized as exc:
        raise HTTPException(401, str(exc), headers={"WWW-Authenticate": "Bearer"}) from None
    except Forbidden as exc:
        raise HTTPException(403, str(exc)) from None


State = Annotated[ServerState, Depends(server_state)]
Table = Annotated[SessionTable, Depends(session_table)]
Who = Annotated[Principal, Depends(principal)]
