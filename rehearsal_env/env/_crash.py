"""Tool crashes: an exception raised while a world's tool handles an agent's call is the tool's error.

Attribution by construction, at the one place every tool call passes (:class:`~._dispatch.Dispatcher`):
whatever a tool raises while it handles the agent's call is *the tool's crash*, not a failure of the
environment. The call's transaction is rolled back (nothing it did stays), the agent reads ``status:
error`` with a short message, the episode goes on, and the traceback is kept in the episode's record
(``tool_crashes``), counted per tool in the run summary and on the world page, so that the world's
author sees the defect. An input that trips a bug in a world's code can therefore never hide a losing
episode as ``not_scored``.

Only what no agent input can cause stays a failure of the environment (:func:`infrastructure`):

- a :class:`~rehearsal_env.verdict.NotScoredError` (a sandbox that died, a model provider), with its cause;
- any exception after which the database no longer answers ``SELECT 1`` (a lost connection or server; a
  query error leaves the connection answering, on SQLite and PostgreSQL alike);
- a :class:`~rehearsal_env.backends.DatabaseError` after which a sandboxed application no longer answers its
  health path and cannot be brought back (the sandbox died).

A sandboxed application that stopped answering is restarted first (the database's ``heal()``): a call that
crashed it (a defect tripped by the agent's input, a memory limit it ran into) is then the tool's crash like
any other, and the episode goes on against the restarted application.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import Any

from ..backends import Database, DatabaseError
from ..verdict import NotScoredError, alive
from ..worlds import World
from ._action import record_text

MAX_TRACEBACK_CHARS = 16_000
"""Longest traceback kept in a record (the innermost frames are kept when one is cut)."""
MAX_MESSAGE_CHARS = 300
"""Longest exception text shown to the agent."""


@dataclass(frozen=True)
class ToolCrash:
    """One exception a world's tool raised while handling an agent's call."""

    turn: int
    """The turn of the call."""
    tool: str
    """The tool that raised."""
    error: str
    """The exception's type and message, short (what the agent was shown)."""
    traceback: str
    """The full traceback (innermost frames kept when cut at :data:`MAX_TRACEBACK_CHARS`)."""


def infrastructure(exc: BaseException, db: Database, world: World) -> bool:
    """Whether ``exc``, raised during a tool call, is a failure no agent input can cause (see the module
    docstring); everything else is the tool's crash."""
    if isinstance(exc, NotScoredError):
        return True
    if not alive(db):  # whatever was raised, a database that no longer answers is gone
        return True
    return isinstance(exc, DatabaseError) and not _application_answers(db, world) and not _healed(db)


def _healed(db: Database) -> bool:
    """Whether the database brought its application back (a sandbox's ``heal()``; False without one)."""
    heal = getattr(db, "heal", None)
    return bool(heal()) if callable(heal) else False


def _application_answers(db: Database, world: World) -> bool:
    app = getattr(db, "application", None)
    health = getattr(world.application, "health", None)
    if app is None or not isinstance(health, str):
        return True
    try:
        status, _ = app.request("GET", health, query={}, body=None, headers={})
    except Exception:  # no answer at all: the sandbox is gone
        return False
    return bool(200 <= status < 300)


def crash_of(exc: BaseException, tool: str, turn: int) -> ToolCrash:
    """The record of ``exc`` raised by ``tool`` at ``turn``."""
    text = "".join(traceback.format_exception(exc))
    if len(text) > MAX_TRACEBACK_CHARS:
        text = f"...[cut: {len(text)} characters in all]\n" + text[-MAX_TRACEBACK_CHARS:]
    message = record_text(_message(exc), MAX_MESSAGE_CHARS)
    return ToolCrash(turn, tool, f"{type(exc).__name__}: {message}", record_text(text))


def _message(exc: BaseException) -> str:
    try:
        return " ".join(str(exc).split())
    except Exception:  # an exception whose str() fails
        return "(no message)"


def crash_result(crash: ToolCrash) -> dict[str, Any]:
    """What the agent reads: ``status: error``, what failed, and that nothing was changed."""
    return {"status": "error", "error": f"the tool {crash.tool!r} failed while handling this call "
                                        f"({crash.error}); nothing was changed. The defect is the world's and is "
                                        "reported to its author; try other arguments or another tool"}
