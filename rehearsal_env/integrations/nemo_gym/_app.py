"""A world as a NeMo Gym resources server: ``/seed_session``, one ``/<tool>`` endpoint per call, ``/verify``.

NeMo Gym's agents (``responses_api_agents/simple_agent``) run a rollout against a resources server over HTTP, all
with the cookies the server sets: ``POST /seed_session`` with the dataset row (``responses_create_params`` and the
row's own fields), then, for each function call the model makes, ``POST /<name>`` with the call's arguments as the
JSON body (its text is the ``function_call_output`` the model reads next), and at the end ``POST /verify`` with the
row and the whole ``response``, answered with the same body plus ``reward``. Here:

- ``/seed_session`` starts the row's ``scenario`` (and ``seed``) on a database in the snapshot state through the
  episodes floor's :class:`~rehearsal_env.episodes.SessionTable` and sets the cookie :data:`COOKIE` to the
  episode's id (an episode the cookie named before, still open, is ended for its agent and recorded);
- ``/<name>`` is one env step calling tool ``name`` with the body as its arguments (whatever arrives is judged by
  the env: an unknown tool or bad arguments is a rejected attempt, answered 200 with what was wrong); the answer is
  the tool message the served agent reads (:func:`~.._prompt.tool_text`), with ``"done": true`` once the episode
  ended (for agents run with ``use_done_flag``);
- ``/verify`` ends an episode still running the way the rollout ended: with ``finish(message=TEXT)`` when the
  response ends with the model's text (NeMo Gym's loop stops at a reply without calls: its last word to the
  customer), else ``give_up`` (:data:`~.._prompt.STOPPED_REASON`); it answers the body with ``reward`` (the
  episode's under the server's profile; 0 for an episode not scored, which ``scored: false`` marks so a trainer can
  drop it), ``verdict`` (:func:`~rehearsal_env.episodes.ending_view`: a holdout episode's outcome, ending and reward
  only) and ``episode_id``;
- an episode never verified is ended by the idle timer (``idle_timeout``), and every episode is recorded, sealed,
  into ``OUT/<world>-<profile>/``.

A server without keys plays every request as ``local`` and answers loopback clients only (the episodes floor's
rule); :func:`serve` refuses to bind elsewhere. Errors no agent caused (no session cookie, a full server) are
4xx with a message saying what to send.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from ...episodes import Session, SessionError, SessionTable, authenticate, check_bind, ending_view
from ...scenarios import Scenario, Split
from ...worlds import World, load_world
from .._prompt import STOPPED_REASON, system_prompt, tool_text
from .._recording import recorder

COOKIE = "rehearsal_episode"
"""The cookie naming a rollout's episode (NeMo Gym's agents send back every cookie the server set)."""
DEFAULT_OUT = "runs/nemo-gym"
"""Where the episodes are recorded unless ``out=`` names another place (None: not recorded)."""
AGENT = "nemo-gym"
"""The agent name on the records unless ``agent=`` names another."""
RESERVED = frozenset({"seed_session", "verify", "aggregate_metrics"})
"""The server's own endpoints, which no tool may take (NeMo Gym reserves them too)."""
MAX_TOOL_BODY = 1 << 20
"""Most bytes of a tool call's arguments."""
MAX_VERIFY_BODY = 32 << 20
"""Most bytes of a ``/verify`` or ``/seed_session`` body (it carries the whole conversation)."""
REAP_EVERY_S = 5.0
"""How often episodes idle for ``idle_timeout`` are ended."""


class _BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


async def _json(request: Request, limit: int) -> Any:
    size = request.headers.get("content-length")
    if size is not None and size.isdigit() and int(size) > limit:
        raise _BadRequest(413, f"expected a body of at most {limit} bytes, got {size}; send less")
    raw = await request.body()
    if len(raw) > limit:
        raise _BadRequest(413, f"expected a body of at most {limit} bytes, got {len(raw)}; send less")
    try:
        return json.loads(raw) if raw.strip() else {}
    except ValueError as exc:
        raise _BadRequest(400, f"expected a JSON body, got {raw[:80]!r} ({exc})") from exc


def _final_text(response: Any) -> str:
    """The text of the last output item when it is the model's message (Responses API ``output``), else ''."""
    output = response.get("output") if isinstance(response, dict) else None
    if not isinstance(output, list) or not output or not isinstance(output[-1], dict):
        return ""
    last = output[-1]
    if last.get("type") != "message" or last.get("role") != "assistant":
        return ""
    content = last.get("content")
    if isinstance(content, str):
        return content
    return "".join(str(p.get("text", "")) for p in content or () if isinstance(p, dict))


def make_app(world: str | World, split: Split | None = None, profile: str | None = "rl", *, backend: str = "sqlite",
             stress: bool = True, out: str | Path | None = DEFAULT_OUT, agent: str = AGENT,
             agent_version: str = "unversioned", max_sessions: int = 256, idle_timeout: float = 600.0,
             **backend_options: Any) -> FastAPI:
    """The resources server of ``world`` (scenarios of ``split``; None: any) as a FastAPI app (see the module doc)."""
    w = load_world(world) if isinstance(world, str) else world
    for s in w.scenarios():
        taken = RESERVED & set(w.tools_for(s.role, offers_retry=s.offers_retry))
        if taken:
            raise ValueError(f"tool {sorted(taken)[0]!r} of world {w.name!r} cannot be a NeMo Gym endpoint: the "
                             f"resources server uses that path itself (one of {sorted(RESERVED)}); rename the tool")
    table = SessionTable(backend=backend, backend_options=backend_options, stress=stress, max_sessions=max_sessions,
                         idle_timeout=idle_timeout,
                         recorder=recorder(Path(out), backend=backend, stress=stress) if out is not None else None)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async def reap() -> None:
            while True:
                await asyncio.sleep(REAP_EVERY_S)
                await run_in_threadpool(table.reap)

        reaper = asyncio.create_task(reap())
        try:
            yield
        finally:
            reaper.cancel()
            await run_in_threadpool(table.close)
            if table.recorder is not None:
                await run_in_threadpool(table.recorder.flush)

    app = FastAPI(title=f"rehearsal-env {w.name} (NeMo Gym resources server)", lifespan=lifespan)
    app.state.table = table

    def who(request: Request) -> Any:
        return authenticate(None, request.client.host if request.client else None, None)

    def current(request: Request) -> Session:
        episode_id = request.cookies.get(COOKIE)
        if not episode_id:
            raise _BadRequest(400, f"expected the cookie {COOKIE!r} that /seed_session set; call /seed_session "
                                   "first and send back its cookies")
        return table.get(who(request), episode_id, play=True)

    def scenario_of(row: dict[str, Any]) -> Scenario:
        name = row.get("scenario")
        if not isinstance(name, str) or not name:
            raise _BadRequest(400, f"expected the row's 'scenario' (a scenario id of world {w.name!r}), got the "
                                   f"fields {sorted(row)[:20]}; build the rows with "
                                   "rehearsal_env.integrations.nemo_gym.dataset_rows")
        try:
            chosen = w.scenario(name.rpartition("/")[2])
        except KeyError as exc:
            raise _BadRequest(400, f"world {w.name!r} has no scenario {name[:200]!r}") from exc
        if split is not None and chosen.split != split:
            raise _BadRequest(400, f"scenario {chosen.id!r} is in split {chosen.split!r}; this server serves split "
                                   f"{split!r}")
        return chosen

    @app.exception_handler(_BadRequest)
    async def bad_request(request: Request, exc: _BadRequest) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=exc.status)

    @app.exception_handler(SessionError)
    async def refused(request: Request, exc: SessionError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=exc.status)

    @app.post("/seed_session")
    async def seed_session(request: Request) -> JSONResponse:
        row = await _json(request, MAX_VERIFY_BODY)
        if not isinstance(row, dict):
            raise _BadRequest(400, f"expected the dataset row as a JSON object, got {type(row).__name__}")
        chosen, seed = scenario_of(row), row.get("seed", 0)
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise _BadRequest(400, f"expected the row's 'seed' as an integer, got {seed!r}")
        principal = who(request)
        before = request.cookies.get(COOKIE)
        if before:
            with contextlib.suppress(SessionError):
                await run_in_threadpool(table.end, table.get(principal, before, play=True), "replaced")
        session = await run_in_threadpool(lambda: table.create(principal, w, chosen, seed=seed, profile=profile,
                                                               agent=agent, agent_version=agent_version))
        answer = JSONResponse({"episode_id": session.id, "scenario": chosen.id, "seed": seed})
        answer.set_cookie(COOKIE, session.id, httponly=True, samesite="strict")
        return answer

    @app.post("/verify")
    async def verify(request: Request) -> JSONResponse:
        body = await _json(request, MAX_VERIFY_BODY)
        if not isinstance(body, dict):
            raise _BadRequest(400, f"expected the verify request as a JSON object, got {type(body).__name__}")
        session = current(request)

        def settle() -> None:
            if session.env is not None:
                text = _final_text(body.get("response"))
                tool, args = ("finish", {"message": text}) if text.strip() else ("give_up", {"reason": STOPPED_REASON})
                table.step(session, session.steps, json.dumps({"tool": tool, "args": args}))

        await run_in_threadpool(settle)
        view = ending_view(session, who(request))
        reward = session.reward
        return JSONResponse({**body, "reward": reward if reward is not None else 0.0, "scored": reward is not None,
                             "verdict": view["verdict"], "episode_id": session.id})

    @app.post("/{tool}")
    async def call(tool: str, request: Request) -> Response:
        args = await _json(request, MAX_TOOL_BODY)
        session = current(request)

        def step() -> str:
            if session.env is None:
                return json.dumps({"status": "not_run", "error": "the episode has ended; this call was not carried "
                                   "out", "done": True}, sort_keys=True)
            answer = table.step(session, session.steps, json.dumps({"tool": tool, "args": args}, default=str))
            text = tool_text(str(answer["observation"]))
            if answer["terminated"] or answer["truncated"]:
                text = json.dumps({**json.loads(text), "done": True}, sort_keys=True)
            return text

        return Response(await run_in_threadpool(step), media_type="application/json")

    return app


def serve(app: FastAPI, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Run ``app`` with uvicorn on ``host`` (loopback only: a server without keys answers local clients only)."""
    import uvicorn

    check_bind(host, None)
    uvicorn.run(app, host=host, port=port, log_level="warning")


def dataset_rows(world: str | World, split: Split = "train", *, seeds: int = 1) -> list[dict[str, Any]]:
    """One NeMo Gym row per scenario of ``split`` and seed: ``responses_create_params`` (the served agent's system
    message and the customer's request as ``input``, the role's tools in the Responses API's form) and the
    ``world``, ``scenario``, ``seed`` and ``split`` the server reads."""
    if seeds < 1:
        raise ValueError(f"seeds must be at least 1, got {seeds}")
    w = load_world(world) if isinstance(world, str) else world
    rows = []
    for s in w.scenarios(split):
        system = system_prompt(w, s)
        tools = [{"type": "function", "name": t.name, "description": t.description,
                  "parameters": dict(t.parameters), "strict": False}
                 for t in w.tools_for(s.role, offers_retry=s.offers_retry).values()]
        for seed in range(seeds):
            rows.append({"responses_create_params": {"input": [{"role": "system", "content": system},
                                                               {"role": "user", "content": s.request}],
                                                     "tools": tools},
                         "world": w.name, "scenario": s.id, "seed": seed, "split": s.split})
    return rows
