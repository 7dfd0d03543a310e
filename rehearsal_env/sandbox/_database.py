"""The ``docker`` backend: a world's application in its sandbox, and its database as a :class:`Database`.

:class:`SandboxDatabase` starts a :class:`~._sandbox.Sandbox` (database, emulators,
application), builds the world's database inside it with the PostgreSQL
backend (``open_database(world, "postgres", dsn=...)``: the same template, the
same row-level reset log, the same read-only check role), and then:

* ``http`` tools call the application through :meth:`SandboxDatabase.request`
  (one HTTP request on a kept-alive connection);
* checks, agents' queries and digests go through the PostgreSQL backend, read-only;
* :meth:`SandboxDatabase.reset` restores the database with that backend's
  row-level restore (it tolerates the application's own connections and
  commits), calls the world's reset hook if it declares one, and then verifies
  the reset: the database digest and the answer to the world's probe request
  must equal those taken right after the first start, or the reset raises
  :class:`SandboxFailed` with cause ``world`` (the episode is not scored: the world's application keeps
  state outside its database).

**Healing.** An application that dies or stops answering (an agent's input crashed it, the memory
limit killed it) is restarted by :meth:`SandboxDatabase.heal`: the tool-call boundary
(``env._crash``) calls it when a request got no answer, so the call is the agent's tool error and the
episode goes on; :meth:`SandboxDatabase.reset` calls it too when the last request timed out or the
probe gets no answer, so the next episode starts on a healthy world.

Where the sandbox itself fails (its containers do not start or answer, cannot be restarted, the reset
hook fails, it is closed) the error is a :class:`SandboxFailed`: not scored with cause ``sandbox`` (and a
:class:`~rehearsal_env.backends.DatabaseError` too, so a worker reopens it as it reopens a failed
database). A request of an agent's tool call that fails keeps raising ``DatabaseError``: whether that is
the sandbox dying or the application's defect is decided where tool calls are judged (``env._crash``).

The containers are started once per :class:`SandboxDatabase` (one per worker)
and reused across episodes; :meth:`close` removes them, and so does process exit
or, after a crash, the next start (:func:`~._docker.clean_leftovers`). A sandbox the
garbage collector frees without ``close()`` is closed by the next one started or
closed, or at exit (a finalizer takes no lock; see :func:`close_unclosed`).
"""

from __future__ import annotations

import json
import time
import weakref
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

import httpx

from ..backends import Database, DatabaseError, DatabaseSpec, Dialect, digest, open_database
from ..verdict import NotScoredCause, NotScoredError
from ..worlds import ApplicationSpec, World, application_of
from . import _approle
from ._closing import close_parts, close_unclosed, close_unclosed_at_exit, defer_close
from ._docker import SandboxError
from ._images import folder_image
from ._isolation import SandboxFact, measure_isolation
from ._sandbox import START_TIMEOUT_S, Sandbox

Row = tuple[Any, ...]


class SandboxFailed(NotScoredError, DatabaseError):
    """The sandbox failed (or, with cause ``world``, the world's application did not reset): not scored."""

    def __init__(self, message: str, cause: NotScoredCause = NotScoredCause.SANDBOX) -> None:
        super().__init__(cause, message)

    def __reduce__(self) -> tuple[type[SandboxFailed], tuple[str, NotScoredCause]]:
        return type(self), (str(self), self.cause)  # travels back from a Ray actor as itself


class SandboxDatabase:
    """One env's sandboxed world (see the module docstring).

    Args:
        spec: The world (a folder world with an ``[application]``, or any world: then only the
            database and emulators run in the sandbox).
        verify_reset: Check the digest and the probe answer after every reset (default True).
    """

    dialect: Dialect = "postgres"

    def __init__(self, spec: DatabaseSpec, *, verify_reset: bool = True) -> None:
        if not isinstance(spec, World):
            raise TypeError(f"the docker backend runs a world's application; got {type(spec).__name__}")
        self.world = spec
        self.tables = spec.tables
        self.app: ApplicationSpec | None = application_of(spec)
        self.verify_reset = verify_reset
        self._inner: Database | None = None
        self._http: httpx.Client | None = None
        self._suspect = False
        """A request got no answer (the application died or stuck on it): :meth:`heal` restarts it."""
        self._check = False
        """A request failed on the server's side (5xx): the next reset checks the emulator still runs."""
        self.restarts = 0
        """How many times :meth:`heal` restarted the application (diagnostic)."""
        try:
            self.sandbox = Sandbox(spec.name, spec.now)
        except SandboxError as exc:
            raise SandboxFailed(str(exc)) from exc
        close_unclosed_at_exit()  # before this sandbox's finalizer (see there)
        self._finalizer = weakref.finalize(self, defer_close, self.sandbox, None, None)
        close_unclosed()  # sandboxes freed without close() since the last one was started or closed
        started = time.perf_counter()
        try:
            self._start()
        except SandboxError as exc:
            self.close()
            raise SandboxFailed(str(exc)) from exc
        except BaseException:
            self.close()
            raise
        self.start_seconds = time.perf_counter() - started
        """Wall time the sandbox took to start (diagnostic)."""
        self.first_digest = digest(self._db)
        self.first_probe = self.probe()

    # -- start --------------------------------------------------------------------
    def _start(self) -> None:
        box = self.sandbox
        box.start_database()
        box.wait_for_database()
        self._inner = open_database(self.world, "postgres", dsn=box.admin_dsn())
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, defer_close, box, self._inner, None)
        dbname = getattr(self._inner, "name", None)  # the PostgreSQL backend's env database, which the app uses
        if not isinstance(dbname, str):
            raise DatabaseError("the PostgreSQL backend did not name its env database; the app cannot find it")
        self.database_name = dbname
        """The env database inside the sandbox's PostgreSQL (the application's database)."""
        app_password, emulator_password = self._create_roles(dbname)
        box.start_emulator(box.inner_dsn(dbname, _approle.EMULATOR_ROLE, emulator_password))
        self._wait_http(f"http://{box.containers['emulator'].ip}:8025/health", "emulator")
        if self.app is not None:
            image = folder_image(f"app-{self.world.name}", self.app.folder)
            fill = {"dsn": box.inner_dsn(dbname, _approle.APP_ROLE, app_password), "email_url": "http://email:8025",
                    "payments_url": "http://payments:8025", "now": self.world.now}
            env = {k: str(v).format(**fill) for k, v in self.app.env.items()}
            box.start_bounded("app", image.tag, list(self.app.command), env, ("app",), self.app.limits)
            self._connect_app()

    def _create_roles(self, dbname: str) -> tuple[str, str]:
        """The application's and the emulator's database roles (see :mod:`._approle`): their passwords."""
        import psycopg

        passwords = _approle.new_password(), _approle.new_password()
        tables = [t.name for t in self.tables]
        key = next((t.primary_key for t in self.tables if t.name == _approle.SERVICE_TABLE), None)
        try:
            with psycopg.connect(self.sandbox.admin_dsn(), autocommit=True) as conn:
                for statement in _approle.server_sql(dbname, *passwords):
                    conn.execute(statement)
            with psycopg.connect(self.sandbox.admin_dsn(dbname), autocommit=True) as conn:
                for statement in _approle.database_sql(tables, service_key=key):
                    conn.execute(statement)
        except psycopg.Error as exc:
            raise SandboxError(f"could not create the application's database role: {exc}") from exc
        return passwords

    def _connect_app(self) -> None:
        """Wait for the application's health path, then (re)open the kept-alive client to it."""
        assert self.app is not None
        running = self.sandbox.containers["app"]
        base = f"http://{running.ip}:{self.app.port}"
        self._wait_http(base + self.app.health, "app")
        if self._http is not None:
            self._http.close()
        self._http = httpx.Client(base_url=base, timeout=httpx.Timeout(30.0, connect=5.0))
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, defer_close, self.sandbox, self._inner, self._http)

    def _wait_http(self, url: str, role: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                if httpx.get(url, timeout=2.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise SandboxFailed(f"the sandbox's {role} did not answer {url} in {START_TIMEOUT_S:.0f}s; "
                                    f"its logs: {self.sandbox.logs(role)}")
            time.sleep(0.1)

    @property
    def _db(self) -> Database:
        if self._inner is None:
            raise SandboxFailed("the sandbox is closed")
        return self._inner

    # -- the application ------------------------------------------------------------
    @property
    def application(self) -> SandboxDatabase | None:
        """What ``http`` tools call (None when the world declares no application)."""
        return self if self._http is not None else None

    def request(self, method: str, path: str, *, query: Mapping[str, Any], body: Mapping[str, Any] | None,
                headers: Mapping[str, str]) -> tuple[int, Any]:
        """One request to the application; (status, decoded JSON). No answer is a DatabaseError."""
        if self._http is None:
            raise DatabaseError("this sandbox runs no application")
        try:
            response = self._http.request(method, path, params=dict(query) or None,
                                          json=dict(body) if body is not None else None, headers=dict(headers))
        except httpx.HTTPError as exc:
            self._suspect = True  # died, or stuck on this request: heal() restarts it
            raise DatabaseError(f"the application did not answer {method} {path}: {exc}; "
                                f"its logs: {self.sandbox.logs('app')}") from exc
        if response.status_code >= 500:
            self._check = True  # perhaps the emulator behind it died: the next reset looks
        try:
            data = response.json()
        except ValueError:
            data = {"error": response.text[:500]}
        return response.status_code, data

    def probe(self) -> str:
        """The application's answer to the world's probe request, as canonical JSON ('' without an app)."""
        if self.app is None or self._http is None:
            return ""
        status, data = self.request("GET", self.app.probe, query={}, body=None, headers={})
        return json.dumps([status, data], sort_keys=True)

    # -- the Database protocol (delegated to the PostgreSQL backend) -----------------
    def query(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        return self._db.query(sql, params)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        return self._db.execute(sql, params)

    def transaction(self) -> AbstractContextManager[None]:
        return self._db.transaction()

    def check_value(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self._db.check_value(sql, params)

    def read_query(self, sql: str, *, max_rows: int, timeout_s: float) -> tuple[tuple[str, ...], list[Row], bool]:
        return self._db.read_query(sql, max_rows=max_rows, timeout_s=timeout_s)

    def touched(self) -> dict[str, set[Any]]:
        return self._db.touched()

    def state_mark(self) -> object:
        """The PostgreSQL backend's (its snapshot moves at the application's own commits too)."""
        mark = getattr(self._db, "state_mark", None)
        return mark() if mark is not None else None

    def heal(self) -> bool:
        """Restart what died: the emulator if it stopped, the application if it stopped, does not answer its
        health path or left a request unanswered since; True when everything answers again, False when the
        sandbox cannot be brought back (closed, a container gone or not starting). Restarting keeps each
        container's settings (limits, user, clock offset) and deletes its default route again."""
        if self._inner is None or self.app is None or self._http is None:
            return False
        try:
            if not self.sandbox.running("emulator"):
                self.sandbox.restart("emulator")
                self._wait_http(f"http://{self.sandbox.containers['emulator'].ip}:8025/health", "emulator")
            if self._suspect or not self._answers():
                self.sandbox.restart("app")
                self._connect_app()
                self.restarts += 1
        except (SandboxError, SandboxFailed):
            return False
        self._suspect = self._check = False
        return True

    def _answers(self) -> bool:
        assert self.app is not None and self._http is not None
        try:
            return self._http.get(self.app.health, timeout=5.0).status_code == 200
        except httpx.HTTPError:
            return False

    def reset(self) -> None:
        """Restore the snapshot, run the reset hook, and verify digest and probe (see the module docstring);
        an application that died or stuck since is restarted first (:meth:`heal`)."""
        if (self._suspect or self._check) and not self.heal():
            raise SandboxFailed(f"the sandbox's application died and could not be restarted; its logs: "
                                f"{self.sandbox.logs('app')}")
        self._db.reset()
        if self.app is not None and self.app.reset_hook:
            method, _, path = self.app.reset_hook.partition(" ")
            try:
                try:
                    status, data = self.request(method, path, query={}, body=None, headers={})
                except DatabaseError:
                    if not self.heal():  # it died since the last call: once restarted, the hook is asked again
                        raise
                    status, data = self.request(method, path, query={}, body=None, headers={})
            except DatabaseError as exc:
                raise SandboxFailed(f"the application's reset hook {self.app.reset_hook} got no answer: {exc}") from exc
            if status >= 300:
                raise SandboxFailed(f"the application's reset hook {self.app.reset_hook} answered {status}: {data}")
        if self.verify_reset:
            self.check_reset()

    def check_reset(self) -> None:
        """Raise :class:`SandboxFailed` (cause ``world``) unless the digest and the probe answer equal those
        after the first start."""
        now_digest = digest(self._db)
        try:
            now_probe = self.probe()
        except DatabaseError:
            if not self.heal():
                raise SandboxFailed(f"the sandbox's application does not answer its probe and could not be "
                                    f"restarted; its logs: {self.sandbox.logs('app')}") from None
            now_probe = self.probe()
        if now_digest != self.first_digest or now_probe != self.first_probe:
            raise SandboxFailed(
                f"the sandbox did not reset to its first state: digest {now_digest[:12]} (first "
                f"{self.first_digest[:12]}), probe {'same' if now_probe == self.first_probe else 'differs'}; "
                "the application keeps state outside its database: declare a reset_hook in world.toml",
                NotScoredCause.WORLD)

    def isolation_facts(self) -> tuple[SandboxFact, ...]:
        """Measure the sandbox's isolation and clock now (network, routes, outside, clock; see :mod:`._isolation`)."""
        return measure_isolation(self)

    def close(self) -> None:
        """Close the database and remove the sandbox's containers and network (and those of sandboxes freed
        without ``close()`` since, see :func:`close_unclosed`)."""
        found = self._finalizer.detach()
        if found is not None:
            close_parts(*found[2])
        self._inner, self._http = None, None
        close_unclosed()

    def __enter__(self) -> SandboxDatabase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def containers(self) -> Iterator[str]:
        """Names of the running containers (diagnostic)."""
        return iter(r.name for r in self.sandbox.containers.values())
