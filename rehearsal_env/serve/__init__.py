"""``rehearsal serve``: the envs over HTTP for agents in any language and trainers on other machines.

:func:`create_app` builds the FastAPI app for a :class:`ServeConfig`; :class:`ServerThread` runs it
in a thread (tests, notebooks); :func:`run_server` runs it under uvicorn (``--workers N``).
Sessions live in a :class:`SessionTable`; keys (:class:`KeyStore`) carry a :class:`Scope`; each key's
requests get a fair share of the worker threads (:class:`FairLimiter`).
"""

from ._app import app_from_environment, create_app
from ._config import CONFIG_ENV, MAX_BODY_BYTES, ServeConfig
from ._fair import FairLimiter
from ._keys import SCOPES, ApiKey, KeyStore, Scope, default_keys_path
from ._recorder import SERVE_FILE, Recorder, RunDir
from ._server import KEEP_ALIVE_S, ServerThread, run_server
from ._session import (
    AtCapacity,
    EnvironmentFailed,
    Forbidden,
    NotFound,
    Principal,
    Session,
    SessionError,
    StepConflict,
    verdict_view,
)
from ._sessions import SessionTable

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
