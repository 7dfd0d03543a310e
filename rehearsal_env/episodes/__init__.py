"""Hosted episodes: the one floor every transport that plays an episode for an outside caller stands on.

``rehearsal serve`` (HTTP and WebSocket), ``rehearsal mcp`` (stdio and HTTP), the pool and the trainers' adapters are
transports over this package; none keeps its own copy of what it decides:

- who calls (:class:`Principal`, :func:`authenticate`, the keys file :class:`KeyStore`);
- the live episodes (:class:`SessionTable`: start, ``step``, end, abort, reap; one spare-database pool that always
  hands out a database in the world's snapshot state; one :class:`Recorder`);
- forks, checkpoints and restores (:func:`fork`, :func:`checkpoint`, :func:`restore`; checkpoints authenticated by
  :class:`CheckpointSeal`);
- what a caller may see of an ending (:func:`ending_view`; holdout: outcome, ending and reward only).

The contract, with who may do what and how each episode kind is counted, is ``docs/episodes.md``.
"""

from ._branches import MAX_CHECKPOINT_BYTES, checkpoint, fork, restore
from ._checkpoints import CheckpointSeal, Issued
from ._keys import SCOPES, ApiKey, KeyStore, Scope, default_keys_path
from ._pool import DatabasePool
from ._principal import LOCAL, authenticate, check_bind, loopback
from ._recorder import SERVE_FILE, Recorder, RunDir
from ._session import (
    AtCapacity,
    EnvironmentFailed,
    Forbidden,
    NotFound,
    Principal,
    Refused,
    Session,
    SessionError,
    StepConflict,
    Unauthorized,
)
from ._table import ENDINGS, Journal, SessionTable
from ._view import HOLDOUT_FIELDS, detail_view, ending_view, verdict_view

__all__ = [
    "ENDINGS",
    "HOLDOUT_FIELDS",
    "LOCAL",
    "MAX_CHECKPOINT_BYTES",
    "SCOPES",
    "SERVE_FILE",
    "ApiKey",
    "AtCapacity",
    "CheckpointSeal",
    "DatabasePool",
    "EnvironmentFailed",
    "Forbidden",
    "Issued",
    "Journal",
    "KeyStore",
    "NotFound",
    "Principal",
    "Recorder",
    "Refused",
    "RunDir",
    "Scope",
    "Session",
    "SessionError",
    "SessionTable",
    "StepConflict",
    "Unauthorized",
    "authenticate",
    "check_bind",
    "checkpoint",
    "default_keys_path",
    "detail_view",
    "ending_view",
    "fork",
    "loopback",
    "restore",
    "verdict_view",
]
