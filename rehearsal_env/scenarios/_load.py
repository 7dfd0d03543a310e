"""Read scenario specs from TOML (one ``[[scenario]]`` table each)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from ..checks import Check
from ._spec import SPLITS, Fault, RequestChange, Scenario, Solution, ToolCall


class ScenarioFileError(ValueError):
    """A scenario file does not describe valid scenarios; the message says where and why."""


def _solution(raw: dict[str, Any], default_name: str) -> Solution:
    calls = tuple(ToolCall(c["tool"], dict(c.get("args", {}))) for c in raw["calls"])
    return Solution(
        name=raw.get("name", default_name),
        calls=calls,
        on_refusal=raw.get("on_refusal", "retry"),
        on_unknown=raw.get("on_unknown", "retry_operation"),
        on_held=raw.get("on_held", "resend"),
    )


def _checks(raw: list[dict[str, Any]]) -> tuple[Check, ...]:
    return tuple(
        Check(name=c["name"], sql=c["sql"], op=c["op"], want=c["want"], params=tuple(c.get("params", ())))
        for c in raw
    )


def _scenario(world: str, raw: dict[str, Any]) -> Scenario:
    if raw.get("split") not in SPLITS:
        raise ScenarioFileError(f"split must be one of {SPLITS}, got {raw.get('split')!r}")
    change = raw.get("change")
    return Scenario(
        id=raw["id"],
        world=world,
        split=raw["split"],
        role=raw["role"],
        category=raw.get("category", "other"),
        request=raw["request"],
        goal_checks=_checks(raw.get("goal_checks", [])),
        hard_rules=_checks(raw.get("hard_rules", [])),
        reference=_solution(raw["reference"], "reference"),
        wrong=tuple(_solution(w, w["name"]) for w in raw.get("wrong", [])),
        turn_limit=raw.get("turn_limit", 20),
        facts=tuple((k, v) for k, v in raw.get("facts", {}).items()),
        change=RequestChange(**change) if change else None,
        faults=tuple(Fault(**f) for f in raw.get("faults", [])),
        max_customer_contacts=raw.get("max_customer_contacts", 1),
        scope=tuple(raw.get("scope", ())),
        answer_sql=raw.get("answer_sql"),
        answer_tolerance=float(raw.get("answer_tolerance", 0.0)),
        method=raw.get("method"),
        required_actions=tuple(raw.get("required_actions", ())),
        forbidden_actions=tuple(raw.get("forbidden_actions", ())),
        turn_budget=raw.get("turn_budget"),
        tool_call_budget=raw.get("tool_call_budget"),
        token_budget=raw.get("token_budget"),
        scope_is_goal=bool(raw.get("scope_is_goal", False)),
    )


def load_scenarios(path: str | Path, world: str) -> tuple[Scenario, ...]:
    """Scenarios of ``world`` from a TOML file of ``[[scenario]]`` tables.

    Raises:
        ScenarioFileError: naming the scenario (by position and id) and the problem.
    """
    data = tomllib.loads(Path(path).read_text())
    out = []
    for i, raw in enumerate(data.get("scenario", [])):
        try:
            out.append(_scenario(world, raw))
        except (KeyError, TypeError, ValueError) as exc:
            ident = raw.get("id", "?") if isinstance(raw, dict) else "?"
            raise ScenarioFileError(
                f"{path}: scenario #{i + 1} ({ident}): {type(exc).__name__}: {exc}. "
                "Each [[scenario]] needs id, split, role, request, goal_checks and reference.calls"
            ) from exc
    return tuple(out)
