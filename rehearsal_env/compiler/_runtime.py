"""Phases 2-3, *plan* and *materialize*: the application running on its own database, as a :class:`Database`.

Where no Docker daemon answers (this is said plainly in the plan), the runtime is a **local process**:
the world's database on the PostgreSQL backend (its own private server, the same template, row-level
reset log and read-only check role as every PostgreSQL env), the outside-service emulator and the
application each started as a child process of the compile, given a free port on this machine. The
application and the emulator bind what their own code binds (the reviews service binds every
interface); the compile talks to them on 127.0.0.1. This runs the application's code on this
machine without the sandbox's isolation: compile only applications you would run yourself.
Where a daemon answers, the plan says ``docker`` and the compile runs on the existing sandbox
(``rehearsal_env.sandbox``: the same world folder, ``--backend docker``).

:class:`LocalRuntime` is the Database protocol plus ``application``/``request`` (what ``http`` tools
call), exactly as the sandbox's database is. Its children die with the compile (``PR_SET_PDEATHSIG``),
and :meth:`LocalRuntime.close` (or exit) stops them, so a failed or killed compile leaves nothing running.
"""

from __future__ import annotations

import atexit
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx

from ..backends import Database, DatabaseError, Dialect, digest, open_database
from ..worlds import CHILD_ENV, World, application_of
from ._errors import CompileError

START_TIMEOUT_S = 30.0
"""How long the application has to answer its health check."""
EMULATOR = Path(__file__).resolve().parents[1] / "sandbox" / "emulator" / "server.py"
Row = tuple[Any, ...]
_LIVE: set[subprocess.Popen[bytes]] = set()


def docker_available() -> bool:
    """Whether a Docker daemon answers here (the sandbox needs one)."""
    try:
        import docker  # type: ignore[import-untyped]

        docker.from_env(timeout=3).ping()
        return True
    except Exception:
        return False


def free_port() -> int:
    """A port nothing listens on now, on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=5)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=5)
    _LIVE.discard(proc)


@atexit.register
def _stop_all() -> None:
    for proc in list(_LIVE):
        _stop(proc)


def app_environment(env: Mapping[str, str], home: Path) -> dict[str, str]:
    """The environment an application's process gets: untrusted code's minimal one (:data:`~rehearsal_env.worlds.
    CHILD_ENV`, ``HOME``/``TMPDIR`` in ``home``, no bytecode written into the folder it runs from, which may be the
    compiled world's own) and what its description sets; never this process's own."""
    return {**CHILD_ENV, "HOME": str(home), "TMPDIR": str(home), "PYTHONDONTWRITEBYTECODE": "1", **env}


def _start(command: Sequence[str], env: Mapping[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        proc = subprocess.Popen(list(command), env=app_environment(env, log.parent), stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                                preexec_fn=_die_with_parent)
    _LIVE.add(proc)
    return proc


def fill(template: str, values: Mapping[str, str]) -> str:
    """``template`` with ``{name}`` placeholders filled; an unknown placeholder is an error."""
    try:
        return template.format(**values)
    except (KeyError, IndexError, ValueError) as exc:
        raise CompileError("plan", f"expected placeholders among {{{', '.join(sorted(values))}}} in {template!r}; "
                           f"found {exc}. Fix: use only those") from None


class LocalRuntime:
    """The world's application as local processes on its own PostgreSQL database (see the module docstring).

    Args:
        world: A folder world with an ``[application]``.
        app_folder: The application's files on this machine (``{app}`` in the command).
        command: The local command (``{python}``, ``{app}`` and the env's placeholders filled here).
        env: The application's environment, placeholders filled here (``{port}`` too).
        phase: The phase starting it (named in errors).
    """

    dialect: Dialect = "postgres"

    def __init__(self, world: World, app_folder: Path, command: Sequence[str], env: Mapping[str, str], *,
                 phase: str = "materialize", verify_reset: bool = True, start_timeout_s: float = START_TIMEOUT_S
                 ) -> None:
        spec = application_of(world)
        if spec is None:
            raise CompileError(phase, "expected a world with an [application]; found none")
        self.world, self.spec, self.phase, self.verify_reset = world, spec, phase, verify_reset
        self.start_timeout_s = start_timeout_s
        self.tables = world.tables
        self._procs: list[subprocess.Popen[bytes]] = []
        self._logs = Path(tempfile.mkdtemp(prefix="rehearsal-compile-"))
        self._http: httpx.Client | None = None
        started = time.perf_counter()
        try:
            self._db: Database | None = open_database(world, "postgres")
        except Exception as exc:
            raise CompileError(phase, f"expected a PostgreSQL database for the application; none could be made "
                               f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}). Fix: install "
                               "the PostgreSQL server binaries or set REHEARSAL_POSTGRES_DSN") from None
        try:
            self._start(app_folder, command, env)
            self.first_digest = digest(self._db)
            self.first_probe = self.probe()
        except BaseException:
            self.close()
            raise
        self.start_seconds = time.perf_counter() - started
        """Wall time the start took (diagnostic)."""

    def _start(self, app_folder: Path, command: Sequence[str], app_env: Mapping[str, str]) -> None:
        import psycopg

        from ..backends.postgres import server_dsn

        name = getattr(self._db, "name", None)
        if not isinstance(name, str):
            raise CompileError(self.phase, "expected the PostgreSQL backend to name its env database; it did not")
        dsn = psycopg.conninfo.make_conninfo(server_dsn()[0], dbname=name)
        emulator_port, app_port = free_port(), free_port()
        self._procs.append(_start([sys.executable, str(EMULATOR)],
                                  {"EMULATOR_DSN": dsn, "EMULATOR_CLOCK": self.world.now,
                                   "EMULATOR_PORT": str(emulator_port)}, self._logs / "emulator.log"))
        self._wait(f"http://127.0.0.1:{emulator_port}/health", "the emulator", self._procs[-1], "emulator.log")
        values = {"python": sys.executable, "app": str(app_folder), "dsn": dsn, "now": self.world.now,
                  "email_url": f"http://127.0.0.1:{emulator_port}",
                  "payments_url": f"http://127.0.0.1:{emulator_port}", "port": str(app_port)}
        env = {k: fill(v, values) for k, v in app_env.items()}
        argv = [fill(c, values) for c in command]
        try:
            self._procs.append(_start(argv, env, self._logs / "app.log"))
        except OSError as exc:
            raise CompileError(self.phase, f"expected the application's command {argv[:3]} to start; it did not "
                               f"({exc}). Fix: correct [application] command") from None
        base = f"http://127.0.0.1:{app_port}"
        self._wait(base + self.spec.health, "the application", self._procs[-1], "app.log")
        self._http = httpx.Client(base_url=base, timeout=httpx.Timeout(30.0, connect=5.0))

    def _log(self, name: str) -> str:
        try:
            text = (self._logs / name).read_text(errors="replace").strip()
        except OSError:
            return ""
        return " | ".join(text.splitlines()[-3:])[-400:]

    def _wait(self, url: str, who: str, proc: subprocess.Popen[bytes], log: str) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while True:
            if proc.poll() is not None:
                raise CompileError(self.phase, f"expected {who} to start and answer {url}; it exited with status "
                                   f"{proc.returncode} ({self._log(log) or 'no output'}). Fix: check its command "
                                   "and environment in the description")
            try:
                if httpx.get(url, timeout=2.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise CompileError(self.phase, f"expected {who} to answer 200 at {url} within "
                                   f"{self.start_timeout_s:.0f}s; it never became healthy "
                                   f"({self._log(log) or 'no output'}). Fix: check its "
                                   "health path and port")
            time.sleep(0.05)

    # -- the application ------------------------------------------------------------------
    @property
    def application(self) -> LocalRuntime | None:
        """What ``http`` tools call."""
        return self if self._http is not None else None

    def request(self, method: str, path: str, *, query: Mapping[str, Any], body: Mapping[str, Any] | None,
                headers: Mapping[str, str]) -> tuple[int, Any]:
        """One request to the application; (status, decoded JSON). No answer is a DatabaseError."""
        if self._http is None:
            raise DatabaseError("the application is not running")
        try:
            response = self._http.request(method, path, params=dict(query) or None,
                                          json=dict(body) if body is not None else None, headers=dict(headers))
        except httpx.HTTPError as exc:
            raise DatabaseError(f"the application did not answer {method} {path}: {exc}; its log: "
                                f"{self._log('app.log')}") from exc
        try:
            data = response.json()
        except ValueError:
            data = {"error": response.text[:500]}
        return response.status_code, data

    def probe(self) -> str:
        status, data = self.request("GET", self.spec.probe, query={}, body=None, headers={})
        return json.dumps([status, data], sort_keys=True)

    # -- the Database protocol -------------------------------------------------------------
    @property
    def db(self) -> Database:
        if self._db is None:
            raise DatabaseError("the runtime is closed")
        return self._db

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        return self.db.query(sql, params)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        return self.db.execute(sql, params)

    def transaction(self) -> AbstractContextManager[None]:
        return self.db.transaction()

    def check_value(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self.db.check_value(sql, params)

    def read_query(self, sql: str, *, max_rows: int, timeout_s: float) -> tuple[tuple[str, ...], list[Row], bool]:
        return self.db.read_query(sql, max_rows=max_rows, timeout_s=timeout_s)

    def touched(self) -> dict[str, set[Any]]:
        return self.db.touched()

    def reset(self) -> None:
        """Restore the snapshot, call the reset hook, and (by default) verify digest and probe."""
        self.db.reset()
        if self.spec.reset_hook:
            method, _, path = self.spec.reset_hook.partition(" ")
            status, data = self.request(method, path, query={}, body=None, headers={})
            if status >= 300:
                raise DatabaseError(f"the reset hook {self.spec.reset_hook} answered {status}: {data}")
        if self.verify_reset and (digest(self.db) != self.first_digest or self.probe() != self.first_probe):
            raise DatabaseError("the application did not reset to its first state (digest or probe differs): it "
                                "keeps state outside its database; declare a reset_hook")

    def close(self) -> None:
        """Stop the application and the emulator, drop the database, remove their logs' folder (an error that
        needed a log has quoted its last lines already)."""
        if self._http is not None:
            self._http.close()
            self._http = None
        for proc in reversed(self._procs):
            _stop(proc)
        self._procs = []
        if self._db is not None:
            self._db.close()
            self._db = None
        shutil.rmtree(self._logs, ignore_errors=True)

    def __enter__(self) -> LocalRuntime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def running(self) -> list[int]:
        """Process ids still running (diagnostic; empty once closed)."""
        return [p.pid for p in self._procs if p.poll() is None]
