"""Several steps in one WebSocket frame (``{"op": "step_many", ...}``; issue 37, round 3).

A trainer that steps many episodes in lock-step (one batched policy call, then one action for each) can send
the batch as one frame::

    {"op": "step_many", "steps": [{"episode_id": ID, "action": A, "step_index": N}, ...]}

and gets one answer ``{"code": 200, "body": {"results": [{"code": N, "body": B}, ...]}}``: one result per item,
in order, each exactly what ``{"action": A, "step_index": N}`` on a connection attached to that episode answers
(200 with the step, 409 for a wrong index, the stored answer for a retried last step, 404/403 for an episode
this key may not play, 422 for a malformed item). The items are applied one after the other, in the order
sent, so two items of one episode are two successive steps. A frame whose answer was lost can be sent again
as it was: every item is then a retry of its episode's last step.

The episodes must be held by this process (started or attached on a connection to it); an item for one that
another ``--workers`` process holds is answered 421 (attach it, and step it on that connection). The steps
run in worker threads within the key's fair share like single steps, :data:`CHUNK` steps per hand-off, so a
key's batch is judged (light or heavy) by what a few of its steps cost, not by the batch's length.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import HTTPException
from fastapi.exceptions import RequestValidationError

from ..episodes import AtCapacity, Principal, Session, SessionError, SessionTable, ending_view
from ._episodes import step_of
from ._ids import owner_of
from ._limits import validation_errors
from ._state import ServerState

OP = "step_many"
"""The frame's ``op``."""
CHUNK = 16
"""Steps of one frame handed to a worker thread at once."""
MAX_STEPS = 1024
"""Most steps one frame may carry."""


@dataclass(frozen=True)
class _Item:
    """One item of a frame: a step to take, or the answer of an item that cannot be taken."""

    session: Session | None = None
    """The episode to step (None: ``refused`` answers the item)."""
    step_index: int = 0
    """The step's index."""
    action: str = ""
    """The step's action."""
    refused: tuple[int, dict[str, Any]] = (0, {})
    """The code and body answering an item that is not taken."""


def refusal(exc: Exception) -> tuple[int, dict[str, Any]]:
    """The HTTP API's answer to ``exc`` as a code and body."""
    if isinstance(exc, SessionError):
        extra = {"retry_after": exc.retry_after} if isinstance(exc, AtCapacity) else {}
        return exc.status, {"detail": str(exc), **exc.extra, **extra}
    if isinstance(exc, RequestValidationError):
        return 422, {"detail": validation_errors(exc)}
    assert isinstance(exc, HTTPException)
    return exc.status_code, {"detail": exc.detail}


def _item(raw: Any, state: ServerState, table: SessionTable, who: Principal) -> _Item:
    if not isinstance(raw, dict) or not isinstance(raw.get("episode_id"), str):
        return _Item(refused=(422, {"detail": 'expected {"episode_id": TEXT, "action": TEXT, "step_index": N}'}))
    fields = dict(raw)
    episode_id: str = fields.pop("episode_id")
    owner = owner_of(episode_id)
    if owner is not None and not state.identity.holds(owner):
        return _Item(refused=(421, {"detail": f"episode {episode_id} is held by another process of this server; "
                                              f'attach it ({{"op": "attach", "episode_id": ...}}) and step it on '
                                              f"that connection"}))
    try:
        step_index, action = step_of(fields)
        return _Item(table.get(who, episode_id, play=True), step_index, action)
    except (SessionError, RequestValidationError, HTTPException) as exc:
        return _Item(refused=refusal(exc))


def _take(table: SessionTable, items: list[_Item]) -> list[tuple[int, Any]]:
    """The items' steps, in order, in this (worker) thread."""
    answers: list[tuple[int, Any]] = []
    for item in items:
        if item.session is None:
            answers.append(item.refused)
            continue
        try:
            answers.append((200, table.step(item.session, item.step_index, item.action)))
        except SessionError as exc:
            answers.append(refusal(exc))
    return answers


async def step_many(data: dict[str, Any], state: ServerState, table: SessionTable,
                    who: Principal) -> tuple[int, dict[str, Any]]:
    """The answer to a ``step_many`` frame (its ``op`` taken out)."""
    steps = data.get("steps")
    if set(data) != {"steps"} or not isinstance(steps, list) or not 1 <= len(steps) <= MAX_STEPS:
        raise HTTPException(422, f'expected {{"op": "{OP}", "steps": [{{"episode_id": TEXT, "action": TEXT, '
                                 f'"step_index": N}}, ...]}} with 1 to {MAX_STEPS} steps')
    items = [_item(raw, state, table, who) for raw in steps]
    results: list[dict[str, Any]] = []
    for start in range(0, len(items), CHUNK):
        chunk = items[start:start + CHUNK]
        for item, (code, body) in zip(chunk, await state.off_loop(who.key_id, _take, table, chunk), strict=True):
            if code == 200 and item.session is not None and (body["terminated"] or body["truncated"]):
                ending = ending_view(item.session, who)
                body = {**body, "verdict": ending["verdict"], "reward_detail": ending["reward_detail"]}
            results.append({"code": code, "body": body})
    return 200, {"results": results}
