"""The process's own PostgreSQL server, kept in a cache folder and stopped at exit.

When no DSN is given (``dsn=`` or ``REHEARSAL_POSTGRES_DSN``), the PostgreSQL
backend calls :func:`shared_dsn`: the first call starts a :class:`PrivateServer`
on a cluster under the cache folder (``$REHEARSAL_POSTGRES_DATA``, else
``$XDG_CACHE_HOME/rehearsal-env`` or ``~/.cache/rehearsal-env``; under root,
when that folder is out of the server account's reach, ``/var/tmp/rehearsal-env-root``).
Every env of the process shares it; it stops at exit.

Clusters are kept between runs (world templates survive too), one per
concurrent process: ``postgres-<major>/cluster-<n>`` is claimed with an
exclusive ``flock`` on ``cluster-<n>.lock``. The server runs with ``fsync=off``,
so a cluster that was not shut down cleanly before the machine rebooted is
re-initialised.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import threading
from pathlib import Path

from filelock import FileLock, Timeout

from ._pgcluster import forget
from ._pgserver import PostgresUnavailable, PrivateServer, find_binaries, major_version, reachable, run_as

MAX_CLUSTERS = 16
_LOCK = threading.Lock()
_shared: CachedServer | None = None


def cache_root() -> Path:
    """The folder holding cached clusters (see the module docstring)."""
    if os.environ.get("REHEARSAL_POSTGRES_DATA"):
        return Path(os.environ["REHEARSAL_POSTGRES_DATA"]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    root = (Path(xdg) if xdg else Path.home() / ".cache") / "rehearsal-env"
    user = run_as()
    if user is not None and not reachable(root, user):
        root = Path("/var/tmp/rehearsal-env-root")
    return root


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"


class CachedServer:
    """A :class:`PrivateServer` on a claimed cluster of the cache folder."""

    def __init__(self, root: Path) -> None:
        self.base = root / f"postgres-{major_version(find_binaries())}"
        self.base.mkdir(parents=True, exist_ok=True)
        owner = self.base.stat().st_uid
        if owner != os.geteuid():
            raise PostgresUnavailable(
                f"the cache folder {self.base} belongs to uid {owner}, not to this user ({os.geteuid()}); "
                "set REHEARSAL_POSTGRES_DATA to a folder of your own"
            )
        user = run_as()
        if user is not None:
            self.base.chmod(0o755)
        self._lock_file, data_dir = self._claim()
        self.state_file = data_dir.with_name(data_dir.name + ".state")
        if self._unclean_after_reboot():
            shutil.rmtree(data_dir, ignore_errors=True)
        self.server = PrivateServer(data_dir)
        self.pid = os.getpid()

    def _claim(self) -> tuple[FileLock, Path]:
        for n in range(MAX_CLUSTERS):
            # held for the process's life; filelock takes the same exclusive flock the OS drops if we die
            lock = FileLock(self.base / f"cluster-{n}.lock", timeout=0, thread_local=False)
            try:
                lock.acquire()
            except Timeout:
                continue
            return lock, self.base / f"cluster-{n}"
        raise PostgresUnavailable(
            f"all {MAX_CLUSTERS} cached clusters under {self.base} are in use by other processes; "
            "stop some, or pass dsn= to share one server"
        )

    def _unclean_after_reboot(self) -> bool:
        try:
            state = json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return False
        return not state.get("clean") and state.get("boot_id") != _boot_id()

    def _write_state(self, clean: bool) -> None:
        self.state_file.write_text(json.dumps({"boot_id": _boot_id(), "clean": clean}))

    def start(self) -> str:
        self._write_state(clean=False)
        return self.server.start()

    def stop(self) -> None:
        if os.getpid() != self.pid:
            return  # a forked child must not stop its parent's server
        self.server.stop()
        self._write_state(clean=True)
        self._lock_file.release()


def shared_dsn() -> str:
    """The DSN of the process's private server, started on first use and stopped at exit."""
    global _shared
    with _LOCK:
        if _shared is None or _shared.pid != os.getpid():
            server = CachedServer(cache_root())
            server.start()
            _shared = server
            atexit.register(stop_shared_server)
        return _shared.server.dsn


def shared_server_running() -> bool:
    """Whether this process has started its private server (and not stopped it)."""
    return _shared is not None and _shared.pid == os.getpid()


def stop_shared_server() -> None:
    """Stop the process's private server, if it started one (also run at exit)."""
    global _shared
    with _LOCK:
        server, _shared = _shared, None
    if server is not None:
        if server.server.running:
            forget(server.server.dsn)
        server.stop()
