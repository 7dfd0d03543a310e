"""Sessions kept open between episodes for the adapters whose trainer makes an environment per trajectory.

SkyRL makes a ``BaseTextEnv`` per trajectory, the Tinker cookbook an ``Env`` per rollout of a group, verl an agent
loop per row: each would open a :class:`~._session.Session` (a session table and a database from the world's
snapshot) and close it one episode later. Opening is most of an episode's cost on our side (measured with
``benchmarks/trainer_adapters.py``), so an adapter takes a session with :func:`take` and hands it back with
:func:`give`, which ends the open episode for its agent (``give_up``, recorded, as closing would) and keeps the
session, its database reset by the floor's pool, for the next trajectory of the same configuration. Records are
written by the shared recorder as for every adapter: every 32 episodes, every 30 s and at exit
(:func:`~._recording.flush_all` writes them now). At most :data:`MAX_IDLE` sessions per configuration are kept; the
rest are closed.
"""

from __future__ import annotations

import atexit
import threading
import weakref
from pathlib import Path
from typing import Any

from ..worlds import World, load_world
from ._session import Session

MAX_IDLE = 64
"""Idle sessions kept per configuration (a database each)."""

_idle: dict[tuple[Any, ...], list[Session]] = {}
_keys: weakref.WeakKeyDictionary[Session, tuple[Any, ...]] = weakref.WeakKeyDictionary()
_worlds: dict[str, World] = {}
_lock = threading.Lock()
_at_exit: list[bool] = []  # [True] once close_idle is registered to run at exit


def world(name: str) -> World:
    """The world ``name``, loaded once per process (its sessions are kept by world)."""
    with _lock:
        if name not in _worlds:
            _worlds[name] = load_world(name)
        return _worlds[name]


def _key(session_world: World, profile: str | None, backend: str, stress: bool, out: str | Path | None, agent: str,
         agent_version: str, backend_options: dict[str, Any]) -> tuple[Any, ...]:
    where = str(Path(out).resolve()) if out is not None else None
    return (id(session_world), profile, backend, stress, where, agent, agent_version,
            tuple(sorted((k, repr(v)) for k, v in backend_options.items())))


def take(session_world: World, *, profile: str | None, backend: str = "sqlite", stress: bool = True,
         out: str | Path | None = None, agent: str, agent_version: str, **backend_options: Any) -> Session:
    """An idle session of this configuration, or a new one."""
    key = _key(session_world, profile, backend, stress, out, agent, agent_version, backend_options)
    with _lock:
        kept = _idle.get(key)
        if kept:
            return kept.pop()
    session = Session(session_world, profile=profile, backend=backend, stress=stress, out=out, agent=agent,
                      agent_version=agent_version, **backend_options)
    with _lock:
        if not _at_exit:
            atexit.register(close_idle)
            _at_exit.append(True)
        _keys[session] = key  # where give() puts it back
    return session


def give(session: Session) -> None:
    """End ``session``'s open episode for its agent (recorded) and keep the session for the next trajectory (or
    close it when :data:`MAX_IDLE` of its configuration are kept already)."""
    session.end_open("closed")
    with _lock:
        key = _keys.get(session)
        kept = _idle.setdefault(key, []) if key is not None else None
        if kept is not None and len(kept) < MAX_IDLE and all(k is not session for k in kept):
            kept.append(session)
            return
    session.close()


def close_idle() -> None:
    """Close every idle session (their databases; at exit, and for a caller that wants them gone now)."""
    with _lock:
        sessions = [s for kept in _idle.values() for s in kept]
        _idle.clear()
    for session in sessions:
        session.close()
