"""One running sandbox: an internal Docker network with the database, the emulators and the application.

Per :class:`Sandbox` (one per env database, so one per worker, reused across
episodes):

* a Docker network created with ``internal=True`` (no route off the bridge), and the
  host rule that drops its connections to this machine (:mod:`._hostguard`);
* ``db``: PostgreSQL from Debian (the base image), its data on a tmpfs (no
  volume), a random password, on the real clock (see :func:`faketime_env`);
* ``email`` / ``payments``: the emulator container, recording every request in
  the application's ``service_requests`` table;
* ``app``: the world's application image.

The emulators and the application run under libfaketime, so their clocks read
the world's clock when the sandbox starts.

Every container's default route is deleted right after it starts (a helper
container joins its network namespace with ``NET_ADMIN``; the application
itself never gets that capability), so nothing inside can address anything but
the bridge's own subnet.

**How the driver reaches the containers.** An internal network publishes no
ports, but this machine's kernel owns the bridge, so the driver process talks to
the containers' bridge addresses directly (PostgreSQL for checks and resets,
HTTP for tools). Docker's isolation rules drop anything the bridge would
forward to another interface, and the containers have no default route, so
the only peers a container can reach are its sandbox's containers and this
machine's address on that bridge, and the host rule (:mod:`._hostguard`, installed
right after the network is made) drops every connection a container opens to this
machine. No second network is attached and no ``docker exec`` sits on the hot path:
a tool call is one HTTP request.

The application and the emulator are bounded (:mod:`._limits`: nobody, no
capability, read-only root, a bounded ``/tmp``, pid, memory and CPU limits) and
reach the database as their own roles (:mod:`._approle`), never the superuser.
"""

from __future__ import annotations

import itertools
import os
import re
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..worlds import ApplicationLimits
from ._docker import LABEL, OWNER, SandboxError, clean_leftovers, docker_client, owner
from ._hostguard import GuardError, install_guard, remove_guard
from ._images import FAKETIME_LIB, BuiltImage, base_image, folder_image
from ._limits import DATABASE_BOUNDS, bounded, bounded_env

EMULATOR = Path(__file__).resolve().parent / "emulator"
EMULATOR_PORT = 8025
PG_PORT = 5432
START_TIMEOUT_S = 60.0
_COUNTER = itertools.count(1)

_DB_SCRIPT = r"""set -e
mkdir -p /pg && chown postgres /pg
printf '%s\n' "$PGPASSWORD" > /tmp/pw && chown postgres /tmp/pw
runuser -u postgres -- /usr/lib/postgresql/15/bin/initdb -D /pg/data -U postgres --pwfile=/tmp/pw \
  -A scram-sha-256 --encoding=UTF8 --locale=C >/dev/null
rm -f /tmp/pw
{ echo "host all postgres $DRIVER_ADDRESS/32 scram-sha-256"; echo "host all postgres 0.0.0.0/0 reject";
  echo "host all all 0.0.0.0/0 scram-sha-256"; } >> /pg/data/pg_hba.conf
exec runuser -u postgres -- /usr/lib/postgresql/15/bin/postgres -D /pg/data -c listen_addresses='*' \
  -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=60 \
  -c unix_socket_directories=/pg
"""


def faketime_env(now: str) -> dict[str, str]:
    """libfaketime settings that move a container's clock to ``now`` (ISO-8601, UTC) and let it run.

    A fixed offset from the real clock, the same for every process of the container. Not for
    PostgreSQL: under libfaketime (offset or ``@start`` mode, monotonic clock moved or not) its
    session timeouts fired seconds after they were armed (a 10-minute idle-in-transaction timeout
    after 10 to 15 s), so the database runs on the real clock; nothing of the world reads it
    (checks refuse the server clock, tools write the world's clock as a value).
    """
    target = datetime.fromisoformat(now).replace(tzinfo=UTC)
    offset = int((target - datetime.now(UTC)).total_seconds())
    return {"LD_PRELOAD": FAKETIME_LIB, "FAKETIME": f"{offset:+d}"}


@dataclass(frozen=True)
class Running:
    """One started container."""

    name: str
    """Container name."""
    ip: str
    """Its address on the sandbox network."""
    container: Any
    """The Docker SDK container object."""


def _exited(container: Any) -> str:
    """How a container ended and the last of its output (for an error message)."""
    try:
        container.reload()
        output = container.logs(tail=5).decode(errors="replace").strip()[-300:]
        return f"exited with status {container.attrs['State']['ExitCode']}; its output: {output or 'none'}"
    except Exception as exc:  # only a diagnostic
        return f"its state unknown: {exc}"


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:20] or "world"


class Sandbox:
    """The containers of one world's sandbox (see the module docstring).

    Args:
        world_name: The world's name (labels and names).
        now: The world's clock, ISO-8601; every container's clock starts there.
        app_folder: The application's files, or None for a sandbox with only the database and emulators.
        app_command: How the application starts.
        app_port: The port it listens on.
        app_env: Its environment (``{dsn}``, ``{email_url}``, ``{payments_url}``, ``{now}`` filled in).
    """

    def __init__(self, world_name: str, now: str) -> None:
        clean_leftovers()
        self.client = docker_client()
        self.world_name, self.now = world_name, now
        self.prefix = f"rh-{slug(world_name)}-{os.getpid()}-{next(_COUNTER)}"
        self.password = secrets.token_hex(16)
        self.labels = {LABEL: "sandbox", OWNER: owner(), "rehearsal.world": world_name}
        self.base: BuiltImage = base_image()
        self.containers: dict[str, Running] = {}
        self.network = self.client.networks.create(self.prefix, driver="bridge", internal=True,
                                                   labels={**self.labels, LABEL: "network"})
        try:
            install_guard(self.network.id)
        except GuardError as exc:
            self.close()
            raise SandboxError(str(exc)) from exc

    def gateway(self) -> str:
        """This machine's address on the sandbox network's bridge (what the host rule guards)."""
        self.network.reload()
        return str(self.network.attrs["IPAM"]["Config"][0]["Gateway"])

    # -- containers ---------------------------------------------------------------
    def start(self, role: str, image: str, command: list[str], env: Mapping[str, str],
              aliases: tuple[str, ...], *, fake_clock: bool = True, **extra: Any) -> Running:
        """Start one container on the sandbox network and delete its default route."""
        name = f"{self.prefix}-{role}"
        clock = faketime_env(self.now) if fake_clock else {}
        container = self.client.containers.create(
            image, command, name=name, environment={**clock, **env},
            labels={**self.labels, "rehearsal.role": role}, network=self.network.name, detach=True,
            hostname=role, **extra)
        self.network.disconnect(container)
        self.network.connect(container, aliases=list(aliases))
        container.start()
        return self._started(role, name, container)

    def _started(self, role: str, name: str, container: Any) -> Running:
        container.reload()
        ip = container.attrs["NetworkSettings"]["Networks"][self.network.name]["IPAddress"]
        running = Running(name, ip, container)
        self.containers[role] = running
        self._drop_default_route(running)
        return running

    def running(self, role: str) -> bool:
        """Whether ``role``'s container is running now (one Docker API call)."""
        import docker.errors

        try:
            self.containers[role].container.reload()
        except (KeyError, docker.errors.NotFound):
            return False
        return bool(self.containers[role].container.status == "running")

    def restart(self, role: str) -> Running:
        """Restart ``role``'s container (killed if it still runs) with its settings, on the same network.

        Raises:
            SandboxError: it is gone or does not start."""
        import docker.errors

        old = self.containers.get(role)
        if old is None:
            raise SandboxError(f"the sandbox has no {role} container to restart")
        try:
            old.container.restart(timeout=1)
            return self._started(role, old.name, old.container)
        except docker.errors.DockerException as exc:
            raise SandboxError(f"the sandbox's {role} container could not be restarted: {exc}") from exc

    def _drop_default_route(self, running: Running) -> None:
        import docker.errors

        helper = f"{running.name}-route"  # named, so that a helper whose run failed is removed here, not left over
        try:
            out = self.client.containers.run(
                self.base.tag, ["sh", "-c", "ip route del default 2>/dev/null; ip route show default | wc -l"],
                network_mode=f"container:{running.container.id}", cap_add=["NET_ADMIN"], remove=True, name=helper,
                labels={**self.labels, "rehearsal.role": "route-helper"}, environment={})
        except docker.errors.DockerException as exc:  # e.g. the container stopped at once (its command exited)
            try:
                self.client.containers.get(helper).remove(force=True)
            except docker.errors.DockerException:
                pass
            raise SandboxError(f"{running.name} stopped before its default route was deleted "
                               f"({_exited(running.container)}; {exc})") from exc
        if out.decode().strip() != "0":
            raise SandboxError(f"could not delete the default route of {running.name}: {out!r}")

    def start_database(self) -> Running:
        env = {"PGPASSWORD": self.password, "DRIVER_ADDRESS": self.gateway()}
        return self.start("db", self.base.tag, ["sh", "-c", _DB_SCRIPT], env, ("db",), fake_clock=False,
                          tmpfs={"/pg": "rw,size=512m"}, **DATABASE_BOUNDS)

    def start_bounded(self, role: str, image: str, command: list[str], env: Mapping[str, str],
                      aliases: tuple[str, ...], limits: ApplicationLimits) -> Running:
        """Start an untrusted container under ``limits`` (see :mod:`._limits`)."""
        return self.start(role, image, command, {**bounded_env(), **env}, aliases, **bounded(limits))

    def admin_dsn(self, dbname: str = "postgres") -> str:
        return (f"host={self.containers['db'].ip} port={PG_PORT} user=postgres password={self.password} "
                f"dbname={dbname} connect_timeout=5")

    @staticmethod
    def inner_dsn(dbname: str, user: str, password: str) -> str:
        """The DSN a container uses to reach the database (by its network alias) as ``user``."""
        return f"host=db port={PG_PORT} user={user} password={password} dbname={dbname}"

    def wait_for_database(self) -> None:
        import psycopg

        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                with psycopg.connect(self.admin_dsn(), connect_timeout=2) as conn:
                    conn.execute("SELECT 1")
                return
            except psycopg.Error as exc:
                if time.monotonic() > deadline:
                    raise SandboxError(f"the sandbox database did not come up in {START_TIMEOUT_S:.0f}s: {exc}; "
                                       f"logs: {self.logs('db')}") from exc
                time.sleep(0.1)

    def start_emulator(self, dsn: str) -> Running:
        image = folder_image("emulator", EMULATOR, target="/emulator")
        return self.start_bounded("emulator", image.tag, ["python3", "/emulator/server.py"],
                                  {"EMULATOR_DSN": dsn, "EMULATOR_CLOCK": self.now,
                                   "EMULATOR_PORT": str(EMULATOR_PORT)}, ("email", "payments"), ApplicationLimits())

    def logs(self, role: str) -> str:
        try:
            return str(self.containers[role].container.logs(tail=20).decode(errors="replace")).strip()[-1500:]
        except Exception as exc:  # the logs are only diagnostics for an error message
            return f"(no logs: {exc})"

    def exec(self, role: str, command: list[str]) -> tuple[int, str]:
        """Run a command in a container (measurements only; never on the hot path)."""
        code, out = self.containers[role].container.exec_run(command, environment={})
        return int(code), out.decode(errors="replace")

    def close(self) -> None:
        """Remove every container and the network (idempotent)."""
        import docker.errors

        for running in list(self.containers.values()):
            try:
                running.container.remove(force=True, v=True)
            except docker.errors.NotFound:
                pass
        self.containers.clear()
        try:
            self.network.remove()
        except docker.errors.NotFound:
            pass
        remove_guard(self.network.id)
