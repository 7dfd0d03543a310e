"""Forks and checkpoints of episodes over the API: routes over :mod:`rehearsal_env.episodes`, which decides who may
fork, checkpoint or restore and what the new episode is (see its ``_branches`` module).

- ``POST /v1/episodes/{id}/fork``: a new episode (new id, one more of the same key's places) in exactly the
  state of episode ``id`` at its current turn; both go on independently. Only the episode's owner may fork it.
- ``GET /v1/episodes/{id}/checkpoint``: the episode's checkpoint bytes (``application/octet-stream``), authenticated
  by this server.
- ``POST /v1/episodes/restore``: bytes this server handed out to the same key, unchanged: a new episode in that state,
  recorded as a restore of the checkpointed episode under the agent it names. Anything else is 422 (403: another
  key's checkpoint).

As every handler, the database work runs in a worker thread within the key's fair share.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from ..episodes import MAX_CHECKPOINT_BYTES, Refused, Session, checkpoint, fork, restore
from ._deps import State, Table, Who
from ._limits import json_response
from ._models import ApiError
from ._state import ServerState

router = APIRouter(prefix="/v1/episodes", tags=["forks"])


def _started(session: Session, state: ServerState) -> dict[str, Any]:
    env = session.env
    assert env is not None
    last = env.episode.trace[-1].observation if env.episode.trace else session.opening
    lineage = env.episode.lineage
    return {"episode_id": session.id, "observation": last, "turn": env.episode.turn, "step_index": session.steps,
            "world": session.world.name, "scenario": session.scenario.id, "split": session.scenario.split,
            "tools": state.tools_of(session.scenario),
            "parent": None if lineage is None else {"episode_id": lineage.parent_episode, "turn": lineage.parent_turn,
                                                    "kind": lineage.kind}}


@router.post("/{episode_id}/fork", status_code=201, summary="Fork an episode at its current turn",
             responses={404: {"model": ApiError}, 409: {"model": ApiError}, 429: {"model": ApiError}})
async def fork_episode(episode_id: str, state: State, table: Table, who: Who) -> Response:
    parent = table.get(who, episode_id, play=True)
    session = await state.off_loop(who.key_id, fork, table, who, parent)
    return json_response(_started(session, state), 201)


@router.get("/{episode_id}/checkpoint", summary="The episode's checkpoint bytes (authenticated by this server)",
            responses={404: {"model": ApiError}, 409: {"model": ApiError}})
async def checkpoint_episode(episode_id: str, state: State, table: Table, who: Who) -> Response:
    session = table.get(who, episode_id, play=True)
    data = await state.off_loop(who.key_id, checkpoint, table, who, session)
    return Response(data, media_type="application/octet-stream")


@router.post("/restore", status_code=201, summary="Start an episode from checkpoint bytes this server handed out",
             responses={403: {"model": ApiError}, 413: {"model": ApiError}, 422: {"model": ApiError},
                        429: {"model": ApiError}})
async def restore_episode(request: Request, state: State, table: Table, who: Who) -> Response:
    data = await request.body()
    if len(data) > MAX_CHECKPOINT_BYTES:
        raise Refused(f"expected a checkpoint of at most {MAX_CHECKPOINT_BYTES} bytes, got {len(data)}")
    session = await state.off_loop(who.key_id, restore, table, who, data, state.find)
    return json_response(_started(session, state), 201)
