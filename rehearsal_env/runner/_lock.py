"""The run directory's lock: one run writes into a directory at a time.

A run holds an exclusive lock (:class:`filelock.FileLock` on ``RUN_DIR/.rehearsal-run.lock``,
released by the operating system if the process dies) from planning to its summary, and
says who holds it in ``RUN_DIR/.rehearsal-run.holder.json``. A second run into the same
``--out`` is refused at once, naming the holder.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

LOCK_FILE = ".rehearsal-run.lock"
HOLDER_FILE = ".rehearsal-run.holder.json"


class RunLocked(ValueError):
    """Another run holds the run directory."""


def holder_of(out: Path) -> str:
    """Who holds ``out``'s lock, in words (from the holder file; ``unknown`` if it cannot be read)."""
    try:
        h = json.loads((out / HOLDER_FILE).read_text())
        since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(h["since"]))
        return f"run {h['run_id']} (pid {h['pid']} on {h['host']}, since {since})"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process (unknown run)"


@contextmanager
def run_lock(out: Path, run_id: str) -> Iterator[None]:
    """Hold ``out`` for run ``run_id`` while the body runs (a folder this makes is removed again when the body
    wrote nothing into it: a run that could not start leaves no half-made run directory).

    Raises:
        RunLocked: another run holds it (at once, naming the holder).
    """
    made = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(out / LOCK_FILE), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise RunLocked(f"{out} is in use by {holder_of(out)}; wait for it to finish, or write this run to "
                        "another --out") from None
    holder = out / HOLDER_FILE
    try:
        holder.write_text(json.dumps({"run_id": run_id, "pid": os.getpid(), "host": socket.gethostname(),
                                      "since": time.time()}))
        yield
    finally:
        holder.unlink(missing_ok=True)
        lock.release()
        if made and {p.name for p in out.iterdir()} <= {LOCK_FILE}:  # a run that could not start leaves no folder
            (out / LOCK_FILE).unlink(missing_ok=True)
            try:
                out.rmdir()
            except OSError:
                pass
