"""A private PostgreSQL server run from the local binaries: initdb once, postgres on a Unix socket.

:class:`PrivateServer` owns one data directory. ``start()`` initialises it if
needed (``initdb``, C locale, UTF-8, trust authentication) and runs ``postgres``
listening only on a Unix socket in a fresh private directory, with
``synchronous_commit=off`` and ``fsync=off`` (a throwaway sandbox; see
:mod:`._pgcache` for how a cached cluster is re-initialised after an OS crash).
``stop()`` asks for a fast shutdown. Every start writes ``pg_hba.conf`` (the readers'
rules of :mod:`._pgsandbox`; everyone else: trust on the private socket).

PostgreSQL refuses to run as root, so under root the server runs as an
unprivileged user: ``$REHEARSAL_POSTGRES_USER``, else ``postgres``, else
``nobody``. Binaries are taken from ``$REHEARSAL_POSTGRES_BIN`` when set, else
looked up on ``PATH``, then in the usual install folders.
"""

from __future__ import annotations

import glob
import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import psycopg
from psycopg.conninfo import make_conninfo

from ._database import DatabaseError
from ._pgsandbox import HBA_RULES

SUPERUSER = "rehearsal"
"""The superuser initdb creates in a private cluster."""
START_TIMEOUT_S = 60.0
_SEARCH = (
    "/usr/lib/postgresql/*/bin",
    "/usr/pgsql-*/bin",
    "/usr/local/pgsql/bin",
    "/usr/local/opt/postgresql*/bin",
    "/opt/homebrew/opt/postgresql*/bin",
    "/opt/homebrew/bin",
    "/Applications/Postgres.app/Contents/Versions/*/bin",
)


class PostgresUnavailable(DatabaseError):
    """No usable PostgreSQL binaries, or the private server could not start."""


def _version_key(path: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", path)) or (0,)


def find_binaries() -> Path:
    """The folder holding ``initdb`` and ``postgres`` (only ``$REHEARSAL_POSTGRES_BIN`` when set).

    Raises:
        PostgresUnavailable: naming every place searched and how to point at an install.
    """
    chosen = os.environ.get("REHEARSAL_POSTGRES_BIN")
    if chosen:
        folder = Path(chosen)
        if (folder / "initdb").is_file() and (folder / "postgres").is_file():
            return folder
        raise PostgresUnavailable(
            f"REHEARSAL_POSTGRES_BIN={chosen} holds no initdb and postgres; point it at the bin folder "
            "of a PostgreSQL install (e.g. /usr/lib/postgresql/15/bin), or unset it to search PATH"
        )
    candidates: list[Path] = []
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)
    for pattern in _SEARCH:
        candidates.extend(Path(p) for p in sorted(glob.glob(pattern), key=_version_key, reverse=True))
    for folder in candidates:
        if (folder / "initdb").is_file() and (folder / "postgres").is_file():
            return folder
    raise PostgresUnavailable(
        "PostgreSQL binaries (initdb, postgres) were not found on PATH nor in "
        f"{', '.join(_SEARCH)}. Install PostgreSQL (e.g. `apt-get install postgresql`), set "
        "REHEARSAL_POSTGRES_BIN to the folder holding initdb, or pass dsn= / set REHEARSAL_POSTGRES_DSN "
        "to use a running server"
    )


def major_version(bin_dir: Path) -> str:
    """The major version of the server in ``bin_dir`` (``postgres --version``), e.g. ``"15"``."""
    out = subprocess.run([str(bin_dir / "postgres"), "--version"],
                         capture_output=True, text=True, check=False)
    match = re.search(r"(\d+)(?:\.\d+)?", out.stdout)
    if out.returncode != 0 or not match:
        raise PostgresUnavailable(
            f"{bin_dir / 'postgres'} --version failed (exit {out.returncode}): "
            f"{out.stdout}{out.stderr}".strip()
        )
    return match.group(1)


@dataclass(frozen=True)
class RunAs:
    """The unprivileged account server processes run as when this process is root."""

    name: str
    uid: int
    gid: int


def run_as() -> RunAs | None:
    """None when not root; else the account to run PostgreSQL as."""
    if os.geteuid() != 0:
        return None
    wanted = os.environ.get("REHEARSAL_POSTGRES_USER")
    for name in ([wanted] if wanted else ["postgres", "nobody"]):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        return RunAs(name, entry.pw_uid, entry.pw_gid)
    raise PostgresUnavailable(
        f"running as root, PostgreSQL needs an unprivileged account; none of "
        f"{[wanted] if wanted else ['postgres', 'nobody']} exists. Create one, or set REHEARSAL_POSTGRES_USER"
    )


def reachable(path: Path, user: RunAs | None) -> bool:
    """Whether ``user`` can traverse every existing folder above ``path`` (always true without root)."""
    if user is None:
        return True
    for folder in (path, *path.parents):
        if not folder.exists():
            continue
        st = folder.stat()
        bit = 0o100 if st.st_uid == user.uid else 0o010 if st.st_gid == user.gid else 0o001
        if not st.st_mode & bit:
            return False
    return True


class PrivateServer:
    """One PostgreSQL server on ``data_dir`` (created by initdb when absent), reachable by Unix socket."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.bin = find_binaries()
        self.user = run_as()
        self._proc: subprocess.Popen[bytes] | None = None
        self._socket_dir: Path | None = None

    @property
    def dsn(self) -> str:
        if self._socket_dir is None:
            raise RuntimeError("the private PostgreSQL server is not running; call start() first")
        return make_conninfo(host=str(self._socket_dir), port=5432, user=SUPERUSER, dbname="postgres")

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def log_path(self) -> Path:
        return self.data_dir.with_name(self.data_dir.name + ".log")

    def start(self) -> str:
        """Initialise the cluster if needed, start the server and return its DSN."""
        if not reachable(self.data_dir.parent, self.user):
            raise PostgresUnavailable(
                f"{self.data_dir.parent} is not reachable by user {self.user.name if self.user else '?'}, "
                "which runs PostgreSQL under root; choose a data folder outside /root"
            )
        if not (self.data_dir / "PG_VERSION").is_file():
            self._initdb()
        self._stop_orphan()
        self._write_hba()
        self._socket_dir = Path(tempfile.mkdtemp(prefix="rehearsal-pg-"))
        self._give(self._socket_dir)
        args = [str(self.bin / "postgres"), "-D", str(self.data_dir), "-p", "5432",
                "-c", "listen_addresses=", "-c", f"unix_socket_directories={self._socket_dir}",
                "-c", "synchronous_commit=off", "-c", "fsync=off", "-c", "full_page_writes=off",
                "-c", "max_connections=200", "-c", "timezone=UTC", "-c", "log_checkpoints=off"]
        keep = self.log_path.exists() and self.log_path.stat().st_size < 1 << 20
        with open(self.log_path, "ab" if keep else "wb") as log:
            self._proc = self._spawn(args, log)
        self._wait_ready()
        return self.dsn

    def stop(self) -> None:
        """Fast shutdown (waits up to 30 s, then an immediate one); removes the socket folder."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGQUIT)
                proc.wait(timeout=30)
        if self._socket_dir is not None:
            shutil.rmtree(self._socket_dir, ignore_errors=True)
            self._socket_dir = None

    # -- internals -----------------------------------------------------------
    def _write_hba(self) -> None:
        """The readers' rules of :mod:`._pgsandbox` (a reader logs in only to its own database)."""
        hba = self.data_dir / "pg_hba.conf"
        hba.write_text(HBA_RULES)
        self._give(hba)
        hba.chmod(0o600)

    def _give(self, path: Path) -> None:
        if self.user is not None:
            os.chown(path, self.user.uid, self.user.gid)

    def _spawn(self, args: list[str], log: IO[bytes]) -> subprocess.Popen[bytes]:
        env = {**os.environ, "LC_ALL": "C", "TZ": "UTC"}
        if self.user is not None:
            env["HOME"] = str(self.data_dir.parent)
            return subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    env=env, user=self.user.uid, group=self.user.gid, extra_groups=[],
                                    start_new_session=True)
        return subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                env=env, start_new_session=True)

    def _initdb(self) -> None:
        if self.data_dir.exists():
            shutil.rmtree(self.data_dir)
        self.data_dir.mkdir(mode=0o700, parents=True)
        self._give(self.data_dir)
        args = [str(self.bin / "initdb"), "-D", str(self.data_dir), "-U", SUPERUSER, "-A", "trust",
                "-E", "UTF8", "--locale=C", "--no-sync"]
        with open(self.log_path, "wb") as log:
            proc = self._spawn(args, log)
            code = proc.wait(timeout=300)
        if code != 0:
            raise PostgresUnavailable(
                f"initdb failed (exit {code}) for {self.data_dir}: {self._log_tail()}"
            )

    def _stop_orphan(self) -> None:
        """Stop a server left running on this data folder by a process that died without stopping it."""
        pid_file = self.data_dir / "postmaster.pid"
        try:
            lines = pid_file.read_text().split("\n")
            pid = int(lines[0])
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, ValueError):
            pid_file.unlink(missing_ok=True)
            return
        if b"postgres" not in cmdline or str(self.data_dir).encode() not in cmdline:
            pid_file.unlink(missing_ok=True)  # the pid was reused by another program
            return
        os.kill(pid, signal.SIGQUIT)
        deadline = time.monotonic() + 30
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        socket_dir = Path(lines[4]) if len(lines) > 4 else None  # postmaster.pid: line 5
        if socket_dir and socket_dir.name.startswith("rehearsal-pg-"):
            shutil.rmtree(socket_dir, ignore_errors=True)

    def _wait_ready(self) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self._proc.poll() is not None:
                raise PostgresUnavailable(
                    f"postgres exited with code {self._proc.returncode} while starting on {self.data_dir}: "
                    f"{self._log_tail()}"
                )
            try:
                psycopg.connect(self.dsn, connect_timeout=2).close()
                return
            except psycopg.OperationalError as exc:
                if time.monotonic() > deadline:
                    self.stop()
                    raise PostgresUnavailable(
                        f"postgres did not accept connections within {START_TIMEOUT_S:.0f} s ({exc}); "
                        f"log: {self._log_tail()}"
                    ) from exc
                time.sleep(0.05)

    def _log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-1500:].strip() or "(empty log)"
        except OSError:
            return "(no log)"
