"""The worlds a server serves and their scenarios (``/v1/worlds``); checks for build-and-evaluate keys."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Query

from ..episodes import Scope
from ..scenarios import Scenario
from ._deps import State, Who
from ._models import ApiError, ScenarioChecks, ScenarioInfo, WorldInfo

router = APIRouter(prefix="/v1/worlds", tags=["worlds"])


def scenario_info(s: Scenario) -> dict[str, Any]:
    return {"id": s.id, "split": s.split, "role": s.role, "category": s.category, "request": s.request,
            "turn_limit": s.turn_limit}


def _check(c: Any) -> dict[str, Any]:
    return {"name": c.name, "sql": c.sql, "params": list(c.params), "op": c.op, "want": c.want}


def _solution(sol: Any) -> dict[str, Any]:
    return {"name": sol.name, "calls": [{"tool": c.tool, "args": dict(c.args)} for c in sol.calls]}


@router.get("", response_model=list[WorldInfo], summary="The worlds this server serves")
async def worlds_list(state: State, who: Who) -> list[dict[str, Any]]:
    out = []
    for w in state.worlds.values():
        d = w.describe()
        out.append({"name": w.name, "description": d["description"], "data_anchor": d["data_anchor"],
                    "scenarios": d["scenarios"]})
    return out


@router.get("/{world}/scenarios", response_model=list[ScenarioInfo], summary="A world's scenarios")
async def scenarios(world: str, state: State, who: Who,
                    split: str | None = Query(None, max_length=20, description="train, dev or holdout")
                    ) -> list[dict[str, Any]]:
    if split not in (None, "train", "dev", "holdout"):
        raise HTTPException(422, f"expected split train, dev or holdout; got {split!r}")
    return [scenario_info(s) for s in state.world(world).scenarios(split)]  # type: ignore[arg-type]


@router.get("/{world}/scenarios/{scenario}/checks", response_model=ScenarioChecks,
            summary="A scenario's checks and solutions (build-and-evaluate; never holdout)",
            responses={403: {"model": ApiError}, 404: {"model": ApiError}})
async def checks(world: str, scenario: str, state: State, who: Who) -> dict[str, Any]:
    s = state.scenario(state.world(world), scenario)
    if s.split == "holdout":
        raise HTTPException(403, f"scenario {s.id!r} is a holdout scenario: it can be played, but its checks "
                                 f"and reference solution are never served, to any key")
    if who.scope is not Scope.BUILD_AND_EVALUATE:
        raise HTTPException(403, f"reading a scenario's checks needs a build-and-evaluate key; this key's "
                                 f"scope is {who.scope.value}")
    return {"id": s.id, "split": s.split, "goal_checks": [_check(c) for c in s.goal_checks],
            "hard_rules": [_check(c) for c in s.hard_rules], "reference": _solution(s.reference),
            "wrong": [_solution(w) for w in s.wrong]}
