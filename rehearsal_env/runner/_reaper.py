"""A watchdog that ends the local Ray of a run when the driver process dies without shutting it down.

Ray starts its head processes to die with the driver, but not all of them do: the
raylet's agents (``ray::DashboardAgent`` and the runtime-env agent) outlive a
SIGKILLed driver by many seconds. While a run's local Ray is up, :func:`watch`
keeps a small watchdog process beside the driver; it notes the driver's Ray
descendants every :data:`POLL_S` seconds and, once the driver is gone, SIGKILLs
those still running (each checked by its start time, so a reused pid is never
hit). :meth:`Watchdog.stop` ends it when the run shuts Ray down itself.

This file runs as a plain script in the watchdog (``python _reaper.py PID``), so
that process imports nothing but the standard library.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

POLL_S = 0.5
"""How often the watchdog looks at the driver and its Ray processes."""
_RAY_MARKS = (b"ray::", b"/ray/", b"raylet", b"gcs_server", b"ray_")


def _start_time(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _ray_descendants(root: int) -> dict[int, int]:
    """The Ray processes below ``root``, with their start times."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(stat.parent.name))
    found: dict[int, int] = {}
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            todo.append(child)
            try:
                cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
            except OSError:
                continue
            started = _start_time(child)
            if started is not None and child != os.getpid() and any(m in cmdline for m in _RAY_MARKS):
                found[child] = started
    return found


def _reap(driver: int) -> None:
    born = _start_time(driver)
    seen: dict[int, int] = {}
    while born is not None and _start_time(driver) == born:
        seen.update(_ray_descendants(driver))
        time.sleep(POLL_S)
    for pid, started in seen.items():
        if _start_time(pid) == started:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


class Watchdog:
    """The watchdog process of one local Ray (see the module docstring)."""

    def __init__(self) -> None:
        self._proc = subprocess.Popen([sys.executable, "-S", __file__, str(os.getpid())],
                                      stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, start_new_session=True)

    def stop(self) -> None:
        """End the watchdog (Ray was shut down by the driver itself)."""
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()


def watch() -> Watchdog:
    """Start a watchdog over this process's local Ray."""
    return Watchdog()


if __name__ == "__main__":
    _reap(int(sys.argv[1]))
