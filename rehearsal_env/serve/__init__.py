"""``rehearsal serve``: the envs over HTTP for agents in any language and trainers on other machines.

:func:`create_app` builds the FastAPI app for a :class:`ServeConfig`; :class:`ServerThread` runs it
in a thread (tests, notebooks); :func:`run_server` runs it under uvicorn (``--workers N``).
The routes are a transport over :mod:`rehearsal_env.episodes` (keys, sessions, forks, what a caller sees); each key's
requests get a fair share of the worker threads (:class:`FairLimiter`). The names of the hosted-episode floor are
re-exported here for the code that imported them from ``rehearsal_env.serve``.
"""

from ..episodes import (
    SCOPES,
    SERVE_FILE,
    ApiKey,
    AtCapacity,
    EnvironmentFailed,
    Forbidden,
    KeyStore,
    NotFound,
    Principal,
    Recorder,
    RunDir,
    Scope,
    Session,
    SessionError,
    SessionTable,
    StepConflict,
    default_keys_path,
    verdict_view,
)
from ._app import app_from_environment, create_app
from ._config import CONFIG_ENV, MAX_BODY_BYTES, ServeConfig
from ._fair import FairLimiter
from ._server import KEEP_ALIVE_S, ServerThread, run_server

__all__ = [
    "CONFIG_ENV",
    "KEEP_ALIVE_S",
    "MAX_BODY_BYTES",
    "SCOPES",
    "SERVE_FILE",
    "ApiKey",
    "AtCapacity",
    "EnvironmentFailed",
    "FairLimiter",
    "Forbidden",
    "KeyStore",
    "NotFound",
    "Principal",
    "Recorder",
    "RunDir",
    "Scope",
    "ServeConfig",
    "ServerThread",
    "Session",
    "SessionError",
    "SessionTable",
    "StepConflict",
    "app_from_environment",
    "create_app",
    "default_keys_path",
    "run_server",
    "verdict_view",
]
