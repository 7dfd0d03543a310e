"""``GET /health``: provenance and capabilities; answers while episodes reset and step."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from fastapi import APIRouter, HTTPException, Query

from .._version import __version__
from ..episodes import Scope
from ..rewards import EXTERNAL_MODE, profile_names
from ._deps import State

router = APIRouter(tags=["health"])
PUBLIC = "health"
"""The fair-share key of unauthenticated work (provenance computed for /health)."""


@router.get("/health", summary="Provenance and capabilities; answers while episodes reset and step")
async def health(state: State,
                 world: str | None = Query(None, max_length=200,
                                           description="The world whose provenance to return (default: the first "
                                                       "served)"),
                 profile: str | None = Query(None, max_length=200,
                                             description="The reward profile (default: outcome reward)")
                 ) -> dict[str, Any]:
    config, table = state.config, state.table
    name = world or (min(state.worlds) if state.worlds else None)
    body: dict[str, Any] = {"status": "ok"}
    if name is not None:
        state.world(name)
        if profile is not None and profile not in profile_names():
            raise HTTPException(422, f"unknown reward profile {profile[:80]!r}; known: {', '.join(profile_names())}")
        cached = state.provenance.get((name, profile))
        body.update(cached if cached is not None else await state.off_loop(PUBLIC, state.blob, name, profile))
    body["server"] = {
        "version": __version__, "api": "v1", "pid": os.getpid(), "backend": config.backend,
        "instance": state.identity.instance, "worker": state.identity.worker,
        "stress": config.stress, "auth": "keys" if state.keys is not None else "loopback-only",
        "worlds": sorted(state.worlds), "profiles": profile_names(), "scopes": [s.value for s in Scope],
        "sessions": {"live": table.live, "max": config.max_sessions, "per_key": table.per_key,
                     "started": table.started, "reaped": table.reaped, "idle_timeout_s": config.idle_timeout},
        "threads": {"total": config.threads,
                    "per_key": state.limiter.per_key if state.limiter is not None else config.threads},
        "max_body_bytes": config.max_body_bytes,
        "recording": str(Path(config.out).resolve()) if config.out else None, **state.spaces,
        "external_mode": EXTERNAL_MODE}
    return body
