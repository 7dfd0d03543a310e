"""Forks and checkpoints of episodes over the API (issue 23).

- ``POST /v1/episodes/{id}/fork``: a new episode (new id, one more of the same key's places) in exactly the
  state of episode ``id`` at its current turn; both go on independently. The new episode's record names
  ``id`` and the turn as its parent. Only the episode's owner may fork it; an ended episode cannot be.
- ``GET /v1/episodes/{id}/checkpoint``: the episode's checkpoint bytes (``application/octet-stream``; see
  :meth:`rehearsal_env.RehearsalEnv.checkpoint`).
- ``POST /v1/episodes/restore``: checkpoint bytes in the body (the server's own, or one of the same world
  version and package version): a new episode of the caller's key in that state, whose parent they name.

As every handler, the database work runs in a worker thread within the key's fair share.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import Response

from ..backends import Database
from ..env import CheckpointError, RehearsalEnv, read_header, restore
from ._deps import State, Table, Who
from ._limits import json_response
from ._models import ApiError
from ._session import Principal, Session
from ._sessions import SessionTable
from ._state import ServerState

router = APIRouter(prefix="/v1/episodes", tags=["forks"])
MAX_CHECKPOINT_BYTES = 16 << 20
"""The largest checkpoint body ``/restore`` reads."""


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


def _live(session: Session, what: str) -> RehearsalEnv:
    if session.env is None:
        raise HTTPException(409, f"episode {session.id} has ended ({session.ended_by}); only an episode still "
                                 f"going can be {what}")
    return session.env


def _fork(table: SessionTable, who: Principal, parent: Session) -> Session:
    def make(db: Database) -> RehearsalEnv:
        env = _live(parent, "forked")
        env.episode.id = parent.id
        return env.fork(database=db)
    return table.branch(who, parent, make, world=parent.world, scenario=parent.scenario, seed=parent.seed,
                        profile=parent.profile, agent=parent.agent, agent_version=parent.agent_version,
                        steps=parent.steps)


@router.post("/{episode_id}/fork", status_code=201, summary="Fork an episode at its current turn",
             responses={404: {"model": ApiError}, 409: {"model": ApiError}, 429: {"model": ApiError}})
async def fork(episode_id: str, state: State, table: Table, who: Who) -> Response:
    parent = table.get(who, episode_id, play=True)
    session = await state.off_loop(who.key_id, _fork, table, who, parent)
    return json_response(_started(session, state), 201)


def _checkpoint(session: Session) -> bytes:
    with session.lock:
        env = _live(session, "checkpointed")
        env.episode.id = session.id
        return env.checkpoint()


@router.get("/{episode_id}/checkpoint", summary="The episode's checkpoint bytes",
            responses={404: {"model": ApiError}, 409: {"model": ApiError}})
async def checkpoint(episode_id: str, state: State, table: Table, who: Who) -> Response:
    session = table.get(who, episode_id, play=True)
    data = await state.off_loop(who.key_id, _checkpoint, session)
    return Response(data, media_type="application/octet-stream")


def _restore(table: SessionTable, state: ServerState, who: Principal, data: bytes) -> Session:
    try:
        header = read_header(data)
        world = state.world(str(header["world"]))
        scenario = state.scenario(world, str(header["scenario"]))
    except CheckpointError as exc:
        raise HTTPException(422, str(exc)) from None

    def make(db: Database) -> RehearsalEnv:
        try:
            return restore(data, world=world, backend=table.backend, database=db)
        except CheckpointError as exc:
            raise HTTPException(422, str(exc)) from None
    session = table.branch(who, None, make, world=world, scenario=scenario, seed=0, profile=None,
                           agent="restored", agent_version="unversioned", steps=0)
    session.profile = session.env.profile if session.env is not None else None
    return session


@router.post("/restore", status_code=201, summary="Start an episode from checkpoint bytes",
             responses={413: {"model": ApiError}, 422: {"model": ApiError}, 429: {"model": ApiError}})
async def restore_episode(request: Request, state: State, table: Table, who: Who) -> Response:
    data = await request.body()
    if len(data) > MAX_CHECKPOINT_BYTES:
        raise HTTPException(413, f"expected a checkpoint of at most {MAX_CHECKPOINT_BYTES} bytes, got {len(data)}")
    session = await state.off_loop(who.key_id, partial(_restore, table, state, who, data))
    return json_response(_started(session, state), 201)
