"""Who calls: one rule for every network transport (HTTP, WebSocket, MCP over HTTP).

A server with a keys file authenticates every request by its bearer key; a server without one is the single-principal
mode, ``local``, which accepts loopback clients only (and whose transports refuse to bind to any other address).
"""

from __future__ import annotations

import ipaddress

from ._keys import KeyStore, Scope
from ._session import Forbidden, Principal, Unauthorized

LOCAL = "local"
"""The key id of every client of a server without keys (loopback only)."""


def loopback(host: str | None) -> bool:
    """Whether ``host`` is a loopback address (127.0.0.0/8, ::1; ``localhost`` too)."""
    if host == "localhost":
        return True
    try:
        return host is not None and ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, keys: KeyStore | None) -> None:
    """Refuse to serve on ``host`` without keys unless it is a loopback address.

    Raises:
        ValueError: a non-loopback address and no keys file, saying how to fix it.
    """
    if keys is None and not loopback(host):
        raise ValueError(f"a server without keys accepts loopback clients only, so it binds to 127.0.0.1; got "
                         f"--host {host}. Create keys (`rehearsal keys create --scope evaluate`) and pass --keys FILE "
                         f"to serve other addresses")


def authenticate(keys: KeyStore | None, host: str | None, token: str | None) -> Principal:
    """Who a client at ``host`` with bearer ``token`` is.

    Raises:
        Unauthorized: the server has keys and the request carries none, or one it does not know (revoked, or from
            another keys file).
        Forbidden: the server has no keys and the client is not on loopback.
    """
    if keys is None:
        if not loopback(host):
            raise Forbidden(f"this server has no keys and accepts clients on 127.0.0.1 only; got a request from "
                            f"{host}. Start it with --keys FILE to accept others")
        return Principal(LOCAL, Scope.BUILD_AND_EVALUATE)
    if not token:
        raise Unauthorized("expected the header 'Authorization: Bearer <key>'; create a key with "
                           "`rehearsal keys create --scope evaluate`")
    entry = keys.authenticate(token.strip())
    if entry is None:
        raise Unauthorized("the key is not known to this server (revoked, or from another keys file)")
    return Principal(entry.id, entry.scope, entry.agents)
