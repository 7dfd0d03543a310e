"""Running the app under uvicorn: in this process, as ``--workers N`` processes, or in a thread (tests).

With several workers every process holds its own sessions, and any of them answers for any
episode: a request for another worker's episode is forwarded to it (``_route``, ``_peers``).
The socket is bound before serving, so port 0 works and the real
port is known (and printed) at once. It is made with ``IPPROTO_TCP`` so that asyncio sets
``TCP_NODELAY`` on every connection (uvicorn's own ``bind_socket`` leaves the protocol 0, and
then a response's headers and body wait out the client's 40 ms delayed ACK).
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI
from uvicorn.supervisors import Multiprocess

from ._app import create_app
from ._config import CONFIG_ENV, ServeConfig
from ._limits import KEEP_ALIVE_S, ws_max_size
from ._wsproto import PROTOCOL


class ServerThread:
    """A uvicorn server for ``app`` on ``host`` (port 0: a free one) in a daemon thread; a context manager.

    ``url`` is set once it listens. Leaving the context stops it (the app's shutdown runs: live
    sessions are recorded and databases closed).
    """

    def __init__(self, app: FastAPI, host: str = "127.0.0.1", port: int = 0, **options: Any) -> None:
        options.setdefault("timeout_keep_alive", KEEP_ALIVE_S)
        options.setdefault("ws", PROTOCOL)
        config = getattr(app.state, "config", None)  # create_app's ServeConfig; other apps (OpenEnv's) have none
        if config is not None:
            options.setdefault("ws_max_size", ws_max_size(config.max_body_bytes))
        self.config = uvicorn.Config(app, host=host, port=port, log_level="warning", **options)
        self.server = uvicorn.Server(self.config)
        self._sock = bind(host, port)
        self.host, self.port = self._sock.getsockname()[:2]
        self.url = f"http://{host}:{self.port}"
        self._thread = threading.Thread(target=self._serve, daemon=True, name=f"uvicorn:{self.port}")

    def _serve(self) -> None:
        try:
            self.server.run(sockets=[self._sock])
        except SystemExit:  # uvicorn exits when the app's startup fails; start() says so
            self.server.should_exit = True

    def start(self, timeout: float = 30.0) -> ServerThread:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self._thread.is_alive() or self.server.should_exit:
                self._thread.join(timeout)
                raise RuntimeError(f"the server on {self.url} failed to start (the app's startup failed; see the "
                                   f"log above)")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the server on {self.url} did not start within {timeout:g} s")
            time.sleep(0.01)
        return self

    def stop(self, timeout: float = 30.0) -> None:
        self.server.should_exit = True
        self._thread.join(timeout)

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def bind(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` (0: a free port), inheritable by worker processes."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise OSError(exc.errno, f"cannot listen on {host}:{port}: {exc.strerror}; choose another --port "
                                 f"(0: a free one)") from exc
    sock.set_inheritable(True)
    return sock


def run_server(config: ServeConfig, *, host: str = "127.0.0.1", port: int = 8000, workers: int = 1,
               log_level: str = "warning", keep_alive: float = KEEP_ALIVE_S, on_listen: Any = None) -> None:
    """Serve ``config`` until interrupted; ``on_listen(url)`` is called once the socket is bound."""
    if workers < 1:
        raise ValueError(f"expected --workers >= 1, got {workers}")
    own: Path | None = None  # a folder of this run's alone (no later server could find it): removed when it stops
    if config.peers is None:  # the workers find each other here, and a restarted server its dead predecessors
        # (see _peers): even one process journals its open episodes, so that a kill loses none of them
        if config.out:
            folder = Path(config.out) / ".workers"
        else:
            folder = own = Path(tempfile.mkdtemp(prefix="rehearsal-workers-"))
        config = replace(config, peers=str(folder.resolve()))
    try:
        _serve(config, host, port, workers, log_level, keep_alive, on_listen)
    finally:
        if own is not None:
            shutil.rmtree(own, ignore_errors=True)


def _serve(config: ServeConfig, host: str, port: int, workers: int, log_level: str, keep_alive: float,
           on_listen: Any) -> None:
    os.environ[CONFIG_ENV] = config.to_json()
    if workers == 1:
        uv = uvicorn.Config(create_app(config), host=host, port=port, log_level=log_level,
                            timeout_graceful_shutdown=10, timeout_keep_alive=int(keep_alive),
                            ws_max_size=ws_max_size(config.max_body_bytes), ws=PROTOCOL)
    else:
        uv = uvicorn.Config("rehearsal_env.serve:app_from_environment", factory=True, host=host, port=port,
                            workers=workers, log_level=log_level, timeout_graceful_shutdown=10,
                            timeout_keep_alive=int(keep_alive), timeout_worker_healthcheck=120,
                            ws_max_size=ws_max_size(config.max_body_bytes), ws=PROTOCOL)
        # a worker loads the worlds before it answers uvicorn's health check; 5 s is too short on a busy machine
    sock = bind(host, port)
    bound = sock.getsockname()[1]
    if on_listen is not None:
        on_listen(f"http://{host}:{bound}")
    if workers == 1:
        uvicorn.Server(uv).run(sockets=[sock])
    else:
        Multiprocess(uv, sockets=[sock]).run()
