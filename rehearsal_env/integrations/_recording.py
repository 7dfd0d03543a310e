"""One recorder per run directory root in a trainer's process, written at least every few seconds and at exit.

A trainer makes many environments (TRL one per rollout slot, openenv-core one per client session); they share the
:class:`~rehearsal_env.episodes.Recorder` of their ``out`` so that their episodes land in one run directory as
numbered parts under one seal. Records are buffered (a part per record would cost a seal of the whole directory
per episode) and written when :data:`FLUSH_EVERY` are waiting, when the oldest has waited :data:`FLUSH_AFTER_S`,
when an environment closes, and when the process exits; at exit an episode still open (a trainer's environment never
closed) is ended for its agent (``give_up``) and recorded first, so no episode is left out.
"""

from __future__ import annotations

import atexit
import threading
from pathlib import Path
from typing import Protocol

from ..episodes import Recorder

FLUSH_EVERY = 32
"""Records buffered before a part is written."""
FLUSH_AFTER_S = 30.0
"""Seconds the oldest buffered record waits at most (checked as the next one arrives, and at exit)."""

_recorders: dict[tuple[Path, str, bool], Recorder] = {}
_lock = threading.Lock()


class Ending(Protocol):
    """A recording session: it can end its open episode (``give_up``, recorded)."""

    def end_open(self, by: str) -> None: ...


_open: dict[int, Ending] = {}
"""The recording sessions of this process not closed, held until they close or the process exits: a trainer's
environment dropped with its episode open (never closed) still has that episode ended and recorded at exit."""


def on_exit(session: Ending) -> None:
    """Have ``session``'s open episode ended and recorded at exit (``session`` is held until :func:`closed`)."""
    with _lock:
        _open[id(session)] = session


def closed(session: Ending) -> None:
    """``session`` closed: nothing of it is left to record at exit."""
    with _lock:
        _open.pop(id(session), None)


def recorder(out: Path, *, backend: str, stress: bool) -> Recorder:
    """The process's recorder into ``out`` for ``backend`` and ``stress`` (made on first use)."""
    key = (out.resolve(), backend, stress)  # resolved now: a later chdir must not move where records go
    with _lock:
        if key not in _recorders:
            if not _recorders:
                atexit.register(_at_exit)
            _recorders[key] = Recorder(key[0], backend=backend, stress=stress, flush_every=FLUSH_EVERY,
                                       flush_after_s=FLUSH_AFTER_S)
        return _recorders[key]


def flush_all() -> None:
    """Write every buffered record of every recorder of this process."""
    with _lock:
        recorders = list(_recorders.values())
    for r in recorders:
        r.flush()


def _at_exit() -> None:
    """End every recording session's open episode (recorded), then write everything buffered."""
    with _lock:
        sessions = list(_open.values())
    for session in sessions:
        try:
            session.end_open("process_exit")
        except Exception:  # a session whose database is gone at exit: its episode cannot be judged
            pass
    flush_all()

