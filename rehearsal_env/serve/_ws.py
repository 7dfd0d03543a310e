"""The WebSocket session (``/v1/ws``): one connection plays episodes one frame per step, with the HTTP
API's semantics and none of its per-request cost (no headers, routing or dependency resolution per step).

Every frame is a JSON text (or binary) frame; every frame the client sends gets exactly one answer
``{"code": N, "body": B}``, where ``N`` and ``B`` are what the matching HTTP request answers
(``code`` is the HTTP status):

- ``{"op": "start", "world": ..., "scenario": ..., ...}``: ``POST /v1/episodes`` (201); the episode
  becomes the connection's episode.
- ``{"op": "attach", "episode_id": ...}``: take an episode of this key started elsewhere (over HTTP,
  or on a connection that dropped) as the connection's episode; ``GET /v1/episodes/{id}`` (200). With
  ``--workers N``, an episode another worker holds is reached through a relay (``_relay``): every later
  frame goes to that worker; an episode of another ``--instance`` is 421.
- ``{"action": ..., "step_index": N}``: ``POST /v1/episodes/{id}/step`` on the connection's episode:
  the same step indexes (409 with ``expected_step_index``), the same idempotent retry of the last
  step, the same caveats, the same 422 for a malformed frame and the same rejected attempt for an
  action the env cannot parse.
- ``{"op": "end"}``: ``DELETE /v1/episodes/{id}`` (200).
- ``{"op": "step_many", "steps": [{"episode_id": ..., "action": ..., "step_index": N}, ...]}``: several
  episodes' steps in one frame, one result each (``_batch``; no HTTP twin).

The key is checked once, at the handshake (``Authorization: Bearer <key>``, or loopback on a server
without keys); a refused key gets one answer (401/403) and the connection is closed (1008). Every
step goes through the session table and the key's fair share exactly as over HTTP, so records are
identical. A connection that drops leaves its episode open: a client may reconnect, attach it and
retry its last step; if none does, the idle timer ends it (given up, judged, recorded) as for HTTP.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from fastapi import APIRouter, HTTPException, WebSocket, WebSocketDisconnect
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from ..episodes import NotFound, Principal, Session, SessionError
from ._batch import OP as STEP_MANY
from ._batch import refusal, step_many
from ._deps import identify
from ._episodes import episode_state, load_body, open_episode, step_of, take_step
from ._limits import too_large
from ._models import CreateEpisode
from ._relay import Relay
from ._route import Refusal, route
from ._state import ServerState

router = APIRouter(tags=["episodes"])
PATH = "/v1/ws"
"""Where the WebSocket session listens."""
POLICY_VIOLATION = 1008
"""The close code for a refused key (RFC 6455)."""


def _token(websocket: WebSocket) -> str | None:
    scheme, _, token = websocket.headers.get("authorization", "").partition(" ")
    return token if scheme.lower() == "bearer" and token else None


class _Connection:
    """One WebSocket connection: who it is, and the episode its steps go to (here, or through a relay to the
    worker holding it)."""

    def __init__(self, state: ServerState, who: Principal, websocket: WebSocket) -> None:
        self.state, self.who = state, who
        self.session: Session | None = None
        self.relay: Relay | None = None
        self.authorization = websocket.headers.get("authorization")
        self.private = websocket.scope.get("server", (None, None))[1] == state.private_port

    def _current(self) -> Session:
        if self.session is None:
            raise NotFound('this connection has no episode; send {"op": "start", "world": ..., "scenario": ...} '
                           'or {"op": "attach", "episode_id": ...} first')
        return self.session

    async def answer(self, raw: str | bytes) -> tuple[int, Any]:
        """The code and body for one frame."""
        state, who, table = self.state, self.who, self.state.table
        if len(raw) > state.config.max_body_bytes:
            return 413, {"detail": too_large(state.config.max_body_bytes, f"a frame of {len(raw)} bytes")}
        data = await load_body(raw, state, who)
        op = data.pop("op", "step") if isinstance(data, dict) else "step"
        if op == "step":
            session = self._current()
            step_index, action = step_of(data)
            return 200, await take_step(session, step_index, action, state, table, who)
        if op == STEP_MANY and isinstance(data, dict):
            return await step_many(data, state, table, who)
        if op == "start":
            try:
                body = CreateEpisode.model_validate(data)
            except ValidationError as exc:
                raise RequestValidationError(exc.errors()) from None
            started = await open_episode(body, state, table, who)
            self.session = table.get(who, started["episode_id"], play=True)
            return 201, started
        if op == "attach":
            episode_id = data.get("episode_id")
            if not isinstance(episode_id, str):
                raise HTTPException(422, 'expected {"op": "attach", "episode_id": TEXT}')
            where = route(state, episode_id, self.private)
            if isinstance(where, Refusal):
                return where.status, where.body
            if isinstance(where, str):  # another worker holds it: relay this connection's frames there
                self.relay, answer = await Relay.open(state, where, episode_id, self.authorization, raw)
                self.session = None
                relayed = json.loads(answer)
                return relayed["code"], relayed["body"]
            self.session = table.get(who, episode_id, play=True)
            return 200, episode_state(self.session, who)
        if op == "end":
            session = self._current()
            await state.off_loop(who.key_id, table.end, session)
            return 200, episode_state(session, who)
        raise HTTPException(422, f"expected op 'start', 'attach', 'step', '{STEP_MANY}' or 'end'; got {str(op)[:40]!r}")


async def _send(websocket: WebSocket, code: int, body: Any) -> None:
    """One answer frame, ASCII only like the HTTP API's bodies (a lone surrogate is written as its escape)."""
    await websocket.send_text(json.dumps({"code": code, "body": body}, separators=(",", ":"), ensure_ascii=True))


@router.websocket(PATH)
async def session(websocket: WebSocket) -> None:
    state: ServerState = websocket.app.state.serve
    await websocket.accept()
    try:
        who = identify(state, websocket.client.host if websocket.client else None, _token(websocket))
    except HTTPException as exc:
        code, body = refusal(exc)
        await _send(websocket, code, body)
        await websocket.close(POLICY_VIOLATION)
        return
    connection = _Connection(state, who, websocket)
    try:
        await _serve(websocket, connection)
    finally:
        if connection.relay is not None:
            await connection.relay.close()


async def _serve(websocket: WebSocket, connection: _Connection) -> None:
    with contextlib.suppress(WebSocketDisconnect):
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            raw = message.get("text")
            raw = raw if raw is not None else message.get("bytes") or b""
            if connection.relay is not None:  # the episode's worker answers every frame
                answer = await connection.relay.exchange(raw)
                if connection.relay.broken:
                    connection.relay = None
                await websocket.send_text(answer)
                continue
            try:
                code, body = await connection.answer(raw)
            except (SessionError, RequestValidationError, HTTPException) as exc:
                code, body = refusal(exc)
            await _send(websocket, code, body)
