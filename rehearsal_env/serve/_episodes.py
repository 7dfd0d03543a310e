"""Episodes (``/v1/episodes``): start, step, read, end.

Handlers never touch a database themselves: every reset, step, check and record runs in a worker
thread within the key's fair share (:class:`~rehearsal_env.serve.FairLimiter`), so ``/health`` and
other keys' requests keep answering while one key's episodes reset and step.
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import ValidationError

from ..episodes import Principal, Session, SessionTable, ending_view
from ..rewards import profile_names
from ._deps import State, Table, Who
from ._limits import json_response
from ._models import ApiError, CreateEpisode, EpisodeStarted, EpisodeState, Step, StepResult
from ._state import ServerState

router = APIRouter(prefix="/v1/episodes", tags=["episodes"])
PARSE_ON_LOOP = 1 << 16
"""Longest step body parsed on the event loop; a longer one is parsed in a worker thread."""


def _turn(session: Session) -> int:
    if session.env is not None:
        return session.env.episode.turn
    return session.verdict.metrics.turns if session.verdict is not None else session.steps


def episode_state(session: Session, who: Principal) -> dict[str, Any]:
    """An episode as ``who`` may read it."""
    return {"episode_id": session.id, "state": "active" if session.env is not None else "ended",
            "world": session.world.name, "scenario": session.scenario.id, "split": session.scenario.split,
            "agent": {"name": session.agent, "version": session.agent_version}, "seed": session.seed,
            "profile": session.profile, "turn": _turn(session), "step_index": session.steps,
            "ended_by": session.ended_by,
            "verdict": ending_view(session, who)["verdict"],
            "run_dir": str(session.run_dir.path) if session.run_dir else None, "caveats": session.caveats}


async def _step_body(request: Request, state: ServerState, who: Principal) -> tuple[int, str]:
    """The step's index and action from the request's raw body (see :func:`parse_step`)."""
    return await parse_step(await request.body(), state, who)


async def parse_step(raw_body: bytes | str, state: ServerState, who: Principal) -> tuple[int, str]:
    """The step's index and action from a raw body (see :func:`load_body` and :func:`step_of`)."""
    return step_of(await load_body(raw_body, state, who))


async def load_body(raw_body: bytes | str, state: ServerState, who: Principal) -> Any:
    """A raw body (an HTTP body or a WebSocket frame) as JSON; a long one is parsed in a worker thread, within
    the key's share, never on the event loop."""
    try:
        return (json.loads(raw_body) if len(raw_body) <= PARSE_ON_LOOP
                else await state.off_loop(who.key_id, json.loads, raw_body))
    except ValueError:
        raise HTTPException(422, 'expected a JSON object {"action": TEXT, "step_index": N}; the body is not '
                                 'JSON (or not UTF-8)') from None
    except RecursionError:  # the parser's own depth bound: malformed input, answered like any other
        raise HTTPException(422, 'expected a JSON object {"action": TEXT, "step_index": N}; the body is nested '
                                 'deeper than the JSON parser reads (send the action as one JSON string)') from None


def step_of(data: Any) -> tuple[int, str]:
    """The step's index and action from a parsed body. An action that no response could echo (a lone
    surrogate) still reaches the env, which rejects it as a malformed action: a rejected attempt."""
    action = data.get("action") if isinstance(data, dict) else None
    raw = isinstance(action, str) and not _encodable(action)
    try:
        step = Step.model_validate({**data, "action": ""} if raw else data)
    except ValidationError as exc:
        raise RequestValidationError(exc.errors()) from None
    return step.step_index, action if raw else step.action  # type: ignore[return-value]


def _encodable(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


@router.post("", response_model=EpisodeStarted, status_code=201, summary="Start an episode",
             responses={429: {"model": ApiError}, 404: {"model": ApiError}, 503: {"model": ApiError}})
async def start(body: CreateEpisode, state: State, table: Table, who: Who) -> Response:
    return json_response(await open_episode(body, state, table, who), 201)


async def open_episode(body: CreateEpisode, state: ServerState, table: SessionTable, who: Principal) -> dict[str, Any]:
    """Start an episode for ``who`` (HTTP and WebSocket alike); the started episode's body."""
    world = state.world(body.world)
    scenario = state.scenario(world, body.scenario)
    if body.profile is not None and body.profile not in profile_names():
        raise HTTPException(422, f"unknown reward profile {body.profile[:80]!r}; known: "
                                 f"{', '.join(profile_names())} (or null for the outcome reward)")
    if who.agents and body.agent.name not in who.agents:
        raise HTTPException(403, f"this key (id {who.key_id}) plays only as agent(s) {', '.join(who.agents)}; got "
                                 f"agent name {body.agent.name[:80]!r}. Use one of those names, or a key made for "
                                 f"this agent (`rehearsal keys create --agent NAME`)")
    session = await state.off_loop(who.key_id, partial(
        table.create, who, world, scenario, seed=body.seed, profile=body.profile, agent=body.agent.name,
        agent_version=body.agent.version, request_id=body.request_id))
    return {"episode_id": session.id, "observation": session.opening, "tools": state.tools_of(scenario),
            "policies": [p.text for p in world.policies], "turn": 0, "step_index": 0, "world": world.name,
            "scenario": scenario.id, "split": scenario.split, "role": scenario.role, **state.spaces,
            "caveats": session.caveats}


@router.post("/{episode_id}/step", response_model=StepResult, summary="Take one step",
             responses={409: {"model": ApiError}, 404: {"model": ApiError}},
             openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
                 "schema": Step.model_json_schema(ref_template="#/components/schemas/{model}")}}}})
async def step(episode_id: str, request: Request, state: State, table: Table, who: Who) -> Response:
    session = table.get(who, episode_id, play=True)
    step_index, action = await _step_body(request, state, who)
    return json_response(await take_step(session, step_index, action, state, table, who))


async def take_step(session: Session, step_index: int, action: str, state: ServerState, table: SessionTable,
                    who: Principal) -> dict[str, Any]:
    """Step ``session`` through the table (within ``who``'s fair share; HTTP and WebSocket alike); the step's
    body with the verdict as ``who`` may read it."""
    result = await state.off_loop(who.key_id, table.step, session, step_index, action)
    if result["terminated"] or result["truncated"]:
        ending = ending_view(session, who)
        result = {**result, "verdict": ending["verdict"], "reward_detail": ending["reward_detail"]}
    return result


@router.get("/{episode_id}", response_model=EpisodeState, summary="An episode as it stands (does not keep it "
                                                                  "alive: only steps reset the idle timer)")
async def read(episode_id: str, table: Table, who: Who) -> dict[str, Any]:
    return episode_state(table.get(who, episode_id), who)


@router.delete("/{episode_id}", response_model=EpisodeState,
               summary="End an episode (its verdict if it ended, else gave_up) and free it")
async def end(episode_id: str, state: State, table: Table, who: Who) -> dict[str, Any]:
    session = table.get(who, episode_id, play=True)
    await state.off_loop(who.key_id, table.end, session)
    return episode_state(session, who)
