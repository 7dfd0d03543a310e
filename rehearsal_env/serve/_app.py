"""The FastAPI app: health, worlds and scenarios, episodes (start, step, read, end).

Handlers are ``async`` and never touch a database themselves: every reset, step, check and
record runs in a worker thread (``anyio.to_thread`` with one capacity limiter), so ``/health``
and every other request keep answering while episodes reset and step.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import ipaddress
import json
import os
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import JSONResponse, Response
from gymnasium import spaces as gym_spaces

from .._version import __version__
from ..env import RehearsalEnv
from ..provenance import provenance_of
from ..rewards import EXTERNAL_MODE, profile_names
from ..scenarios import Scenario
from ..worlds import World, load_world, world_names
from ._keys import KeyStore, Scope
from ._models import (
    ApiError,
    CreateEpisode,
    EpisodeStarted,
    EpisodeState,
    ScenarioChecks,
    ScenarioInfo,
    Step,
    StepResult,
    WorldInfo,
)
from ._recorder import Recorder
from ._sessions import NotFound, Principal, Session, SessionError, SessionTable, verdict_view

CONFIG_ENV = "REHEARSAL_SERVE_CONFIG"
"""The environment variable that carries a :class:`ServeConfig` (JSON) to ``--workers`` processes."""
LOCAL = "local"
T = TypeVar("T")


@dataclass(frozen=True)
class ServeConfig:
    """How a server runs (``rehearsal serve`` options)."""

    worlds: tuple[str, ...] = ()
    """Worlds served (empty: every registered world)."""
    backend: str = "sqlite"
    """sqlite or postgres."""
    backend_options: dict[str, Any] = field(default_factory=dict)
    """Backend options (PostgreSQL: ``dsn``)."""
    max_sessions: int = 1000
    """Live sessions one process holds; one more is answered 429 with Retry-After."""
    idle_timeout: float = 300.0
    """Seconds without a request after which a session is ended (gave up) and recorded."""
    out: str | None = None
    """Where served episodes are recorded (``OUT/<world>-<profile>/`` run directories); None: not recorded."""
    keys: str | None = None
    """The keys file (``rehearsal keys create``); None: no keys, loopback clients only."""
    stress: bool = True
    """Whether the stress layer is on."""
    flush_every: int = 32
    """Records per part file (buffered records are also written about every second)."""
    threads: int = 8
    """Worker threads for database work."""

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ServeConfig:
        raw: dict[str, Any] = json.loads(text)
        known = {f.name for f in fields(cls)}
        values: dict[str, Any] = {k: tuple(v) if k == "worlds" else v for k, v in raw.items() if k in known}
        return cls(**values)


def _loopback(host: str | None) -> bool:
    try:
        return host is not None and ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _scenario_info(s: Scenario) -> dict[str, Any]:
    return {"id": s.id, "split": s.split, "role": s.role, "category": s.category, "request": s.request,
            "turn_limit": s.turn_limit}


def _check(c: Any) -> dict[str, Any]:
    return {"name": c.name, "sql": c.sql, "params": list(c.params), "op": c.op, "want": c.want}


def _solution(sol: Any) -> dict[str, Any]:
    return {"name": sol.name, "calls": [{"tool": c.tool, "args": dict(c.args)} for c in sol.calls]}


def _json(body: Any, status: int = 200) -> Response:
    """``body`` as a JSON response, encoded once (the hot paths skip FastAPI's re-validation of their own output;
    their ``response_model`` still documents them)."""
    return Response(json.dumps(body, separators=(",", ":")), status_code=status, media_type="application/json")


def create_app(config: ServeConfig | None = None, *, worlds: Sequence[World] = ()) -> FastAPI:
    """The API app for ``config``; ``worlds`` adds world objects to those named in the config."""
    config = config or ServeConfig()
    served: dict[str, World] = {w.name: w for w in worlds}
    for name in config.worlds or ([] if worlds else world_names()):
        served.setdefault(name, load_world(name))
    keys = KeyStore(config.keys) if config.keys is not None else None
    if keys is not None and not keys.path.exists():
        raise FileNotFoundError(f"expected a keys file at {keys.path}; create keys with "
                                f"`rehearsal keys create --scope evaluate --file {keys.path}`")
    recorder = (Recorder(config.out, backend=config.backend, stress=config.stress, flush_every=config.flush_every)
                if config.out is not None else None)
    table = SessionTable(backend=config.backend, backend_options=config.backend_options, stress=config.stress,
                         max_sessions=config.max_sessions, idle_timeout=config.idle_timeout, recorder=recorder)
    provenance: dict[tuple[str, str | None], dict[str, Any]] = {}
    spaces: dict[str, Any] = {}
    limiter: list[anyio.CapacityLimiter] = []

    async def off_loop(fn: Callable[..., T], *args: Any) -> T:
        return await anyio.to_thread.run_sync(partial(fn, *args), limiter=limiter[0])

    def blob(world: str, profile: str | None) -> dict[str, Any]:
        if (world, profile) not in provenance:
            provenance[(world, profile)] = provenance_of(served[world], profile).to_dict()
        return provenance[(world, profile)]

    async def housekeeping() -> None:
        every = min(1.0, config.idle_timeout / 4)
        while True:
            await asyncio.sleep(every)
            await off_loop(table.reap)
            if recorder is not None:
                await off_loop(recorder.flush)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        limiter.append(anyio.CapacityLimiter(config.threads))
        for name in served:
            await off_loop(blob, name, None)
            await off_loop(table.warm, served[name])
        if served:
            sample = RehearsalEnv(next(iter(served.values())).scenarios()[0], next(iter(served.values())))
            for kind, space in (("observation_space", sample.observation_space), ("action_space", sample.action_space)):
                assert isinstance(space, gym_spaces.Text)
                spaces[kind] = {"max_length": space.max_length, "charset": "".join(sorted(space.character_set))}
        gc.collect()
        gc.freeze()  # the worlds, their seed rows and snapshots live as long as the server: keep them out of
        # every garbage collection (with a thousand sessions a full collection otherwise walks them all)
        task = asyncio.create_task(housekeeping())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await off_loop(table.close)
            if recorder is not None:
                await off_loop(recorder.flush)

    app = FastAPI(
        title="rehearsal-env", version=__version__, lifespan=lifespan,
        description="Practice worlds for tool-using AI agents, over HTTP: start an episode of a scenario, send one "
                    "action per step (`step_index` makes a retry safe), read the verdict. Every episode is recorded "
                    "like a `rehearsal run` episode. Every served episode is an external-mode episode: "
                    + EXTERNAL_MODE,
        responses={401: {"model": ApiError}, 403: {"model": ApiError}})
    app.state.table, app.state.recorder, app.state.config = table, recorder, config

    @app.exception_handler(SessionError)
    async def session_error(request: Request, exc: SessionError) -> JSONResponse:
        headers = {"Retry-After": str(table.retry_after())} if exc.status == 429 else None
        return JSONResponse({"detail": str(exc), **exc.extra}, status_code=exc.status, headers=headers)

    async def principal(request: Request) -> Principal:
        if keys is None:
            host = request.client.host if request.client else None
            if not _loopback(host):
                raise HTTPException(403, f"this server has no keys and accepts clients on 127.0.0.1 only; got a "
                                         f"request from {host}. Start it with --keys FILE to accept others")
            return Principal(LOCAL, Scope.BUILD_AND_EVALUATE)
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise HTTPException(401, "expected the header 'Authorization: Bearer <key>'; create a key with "
                                     "`rehearsal keys create --scope evaluate`", headers={"WWW-Authenticate": "Bearer"})
        entry = keys.authenticate(token.strip())
        if entry is None:
            raise HTTPException(401, "the key is not known to this server (revoked, or from another keys file)",
                                headers={"WWW-Authenticate": "Bearer"})
        return Principal(entry.id, entry.scope)

    Who = Depends(principal)

    def world_of(name: str) -> World:
        if name not in served:
            raise NotFound(f"this server does not serve world {name!r}; it serves: {', '.join(sorted(served))}")
        return served[name]

    def scenario_of(world: World, scenario_id: str) -> Scenario:
        try:
            return world.scenario(scenario_id)
        except KeyError as exc:
            raise NotFound(str(exc.args[0]) if exc.args else str(exc)) from None

    schemas: dict[tuple[str, str, bool], list[dict[str, Any]]] = {}

    def tools_of(scenario: Scenario) -> list[dict[str, Any]]:
        """The role's tools in OpenAI format (what the env's reset info holds), computed once per role."""
        key = (scenario.world, scenario.role, scenario.offers_retry)
        if key not in schemas:
            tools = served[scenario.world].tools_for(scenario.role, offers_retry=scenario.offers_retry)
            schemas[key] = [t.schema() for t in tools.values()]
        return schemas[key]

    def policies_of(world: World) -> list[str]:
        return [p.text for p in world.policies]

    def turn_of(session: Session) -> int:
        if session.env is not None:
            return session.env.episode.turn
        return session.verdict.metrics.turns if session.verdict is not None else session.steps

    def state(session: Session, who: Principal) -> dict[str, Any]:
        return {"episode_id": session.id, "state": "active" if session.env is not None else "ended",
                "world": session.world.name, "scenario": session.scenario.id, "split": session.scenario.split,
                "agent": {"name": session.agent, "version": session.agent_version}, "seed": session.seed,
                "profile": session.profile, "turn": turn_of(session),
                "step_index": session.steps, "ended_by": session.ended_by,
                "verdict": verdict_view(session.verdict, session.reward, who.scope, session.scenario.split),
                "run_dir": str(session.run_dir.path) if session.run_dir else None, "caveats": session.caveats}

    @app.get("/health", summary="Provenance and capabilities; answers while episodes reset and step")
    async def health(world: str | None = Query(None, description="The world whose provenance to return "
                                                                 "(default: the first served)"),
                     profile: str | None = Query(None, description="The reward profile (default: outcome reward)")
                     ) -> dict[str, Any]:
        name = world or (min(served) if served else None)
        body: dict[str, Any] = {"status": "ok"}
        if name is not None:
            world_of(name)
            if profile is not None and profile not in profile_names():
                raise HTTPException(422, f"unknown reward profile {profile!r}; known: {', '.join(profile_names())}")
            cached = provenance.get((name, profile))
            body.update(cached if cached is not None else await off_loop(blob, name, profile))
        body["server"] = {
            "version": __version__, "api": "v1", "pid": os.getpid(), "backend": config.backend,
            "stress": config.stress, "auth": "keys" if keys is not None else "loopback-only",
            "worlds": sorted(served), "profiles": profile_names(), "scopes": [s.value for s in Scope],
            "sessions": {"live": table.live, "max": config.max_sessions, "started": table.started,
                         "reaped": table.reaped, "idle_timeout_s": config.idle_timeout},
            "recording": str(Path(config.out).resolve()) if config.out else None, **spaces,
            "external_mode": EXTERNAL_MODE}
        return body

    @app.get("/v1/worlds", response_model=list[WorldInfo], summary="The worlds this server serves")
    async def worlds_list(who: Principal = Who) -> list[dict[str, Any]]:
        out = []
        for w in served.values():
            d = w.describe()
            out.append({"name": w.name, "description": d["description"], "data_anchor": d["data_anchor"],
                        "scenarios": d["scenarios"]})
        return out

    @app.get("/v1/worlds/{world}/scenarios", response_model=list[ScenarioInfo], summary="A world's scenarios")
    async def scenarios(world: str, split: str | None = Query(None, description="train, dev or holdout"),
                        who: Principal = Who) -> list[dict[str, Any]]:
        if split not in (None, "train", "dev", "holdout"):
            raise HTTPException(422, f"expected split train, dev or holdout; got {split!r}")
        return [_scenario_info(s) for s in world_of(world).scenarios(split)]  # type: ignore[arg-type]

    @app.get("/v1/worlds/{world}/scenarios/{scenario}/checks", response_model=ScenarioChecks,
             summary="A scenario's checks and solutions (build-and-evaluate; never holdout)",
             responses={403: {"model": ApiError}, 404: {"model": ApiError}})
    async def checks(world: str, scenario: str, who: Principal = Who) -> dict[str, Any]:
        s = scenario_of(world_of(world), scenario)
        if s.split == "holdout":
            raise HTTPException(403, f"scenario {s.id!r} is a holdout scenario: it can be played, but its checks "
                                     f"and reference solution are never served, to any key")
        if who.scope is not Scope.BUILD_AND_EVALUATE:
            raise HTTPException(403, f"reading a scenario's checks needs a build-and-evaluate key; this key's "
                                     f"scope is {who.scope.value}")
        return {"id": s.id, "split": s.split, "goal_checks": [_check(c) for c in s.goal_checks],
                "hard_rules": [_check(c) for c in s.hard_rules], "reference": _solution(s.reference),
                "wrong": [_solution(w) for w in s.wrong]}

    @app.post("/v1/episodes", response_model=EpisodeStarted, status_code=201, summary="Start an episode",
              responses={429: {"model": ApiError}, 404: {"model": ApiError}, 503: {"model": ApiError}})
    async def start(body: CreateEpisode, who: Principal = Who) -> Response:
        world = world_of(body.world)
        scenario = scenario_of(world, body.scenario)
        if body.profile is not None and body.profile not in profile_names():
            raise HTTPException(422, f"unknown reward profile {body.profile!r}; known: {', '.join(profile_names())} "
                                     f"(or null for the outcome reward)")
        session = await off_loop(
            partial(table.create, who, world, scenario, seed=body.seed, profile=body.profile,
                    agent=body.agent.name, agent_version=body.agent.version, request_id=body.request_id))
        return _json({"episode_id": session.id, "observation": session.opening, "tools": tools_of(scenario),
                      "policies": policies_of(world), "turn": 0, "step_index": 0, "world": world.name,
                      "scenario": scenario.id, "split": scenario.split, "role": scenario.role, **spaces,
                      "caveats": session.caveats}, 201)

    @app.post("/v1/episodes/{episode_id}/step", response_model=StepResult, summary="Take one step",
              responses={409: {"model": ApiError}, 404: {"model": ApiError}})
    async def step(episode_id: str, body: Step, who: Principal = Who) -> Response:
        session = table.get(who, episode_id, play=True)
        result = await off_loop(table.step, session, body.step_index, body.action)
        if result["terminated"] or result["truncated"]:
            result = {**result, "verdict": verdict_view(session.verdict, session.reward, who.scope,
                                                        session.scenario.split)}
        return _json(result)

    @app.get("/v1/episodes/{episode_id}", response_model=EpisodeState, summary="An episode as it stands")
    async def read(episode_id: str, who: Principal = Who) -> dict[str, Any]:
        return state(table.get(who, episode_id), who)

    @app.delete("/v1/episodes/{episode_id}", response_model=EpisodeState,
                summary="End an episode (its verdict if it ended, else gave_up) and free it")
    async def end(episode_id: str, who: Principal = Who) -> dict[str, Any]:
        session = table.get(who, episode_id, play=True)
        await off_loop(table.end, session)
        return state(session, who)

    return app


def app_from_environment() -> FastAPI:
    """The app for the :class:`ServeConfig` in ``$REHEARSAL_SERVE_CONFIG`` (how ``--workers`` processes start)."""
    raw = os.environ.get(CONFIG_ENV)
    if not raw:
        raise RuntimeError(f"expected ${CONFIG_ENV} to hold a ServeConfig as JSON; "
                           f"start servers with `rehearsal serve`")
    return create_app(ServeConfig.from_json(raw))
