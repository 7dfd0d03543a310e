"""Closing sandboxes that the garbage collector freed without ``close()`` (no lock taken in a finalizer).

A :class:`~._database.SandboxDatabase`'s finalizer only queues its parts (:func:`defer_close`); they are
closed by :func:`close_unclosed` when the next sandbox is started or closed, or at interpreter exit.
"""

from __future__ import annotations

import threading
import weakref
from collections import deque
from typing import Any

import httpx

from ..backends import Database
from ._sandbox import Sandbox


def close_parts(sandbox: Sandbox, inner: Database | None, http: httpx.Client | None) -> None:
    """Close the HTTP client and the env database, and remove the sandbox (never from a finalizer: each takes locks)."""
    for closer in (http.close if http else None, inner.close if inner else None, sandbox.close):
        if closer is None:
            continue
        try:
            closer()
        except Exception:  # best effort at shutdown; leftovers are removed by the next start
            pass


_Parts = tuple[Sandbox, Database | None, httpx.Client | None]
_UNCLOSED: deque[_Parts] = deque()
"""Sandboxes the garbage collector freed without :meth:`SandboxDatabase.close`, waiting to be closed."""
_AT_EXIT = threading.Lock()
_EXIT_DRAIN: list[weakref.finalize[Any, Any]] = []
"""The finalizer that runs :func:`close_unclosed` at exit (see :func:`close_unclosed_at_exit`)."""


def defer_close(sandbox: Sandbox, inner: Database | None, http: httpx.Client | None) -> None:
    """The finalizer of a :class:`SandboxDatabase` never closed: queue its close for :func:`close_unclosed`.

    It takes no lock: the collector runs it wherever an allocation triggers it, also while this thread holds a
    lock that closing takes (the PostgreSQL cluster's admin lock, the HTTP and Docker clients' pool locks), which
    would deadlock the process."""
    _UNCLOSED.append((sandbox, inner, http))  # one atomic append: no lock


def close_unclosed() -> int:
    """Close the sandboxes freed without ``close()``; the number closed. Called when a sandbox is started or
    closed, and at interpreter exit; never from a finalizer."""
    closed = 0
    while True:
        try:
            parts = _UNCLOSED.popleft()
        except IndexError:
            return closed
        close_parts(*parts)
        closed += 1


def close_unclosed_at_exit() -> None:
    """Have :func:`close_unclosed` run at exit, after the finalizers of the sandboxes still open then (once per
    process): a finalizer made before any sandbox's, and the remaining finalizers run newest first at exit."""
    with _AT_EXIT:
        if not _EXIT_DRAIN:
            _EXIT_DRAIN.append(weakref.finalize(_UNCLOSED, close_unclosed))
