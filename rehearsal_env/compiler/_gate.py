"""Phase 8, *validate*: every proposal, derived or a model's, through the same gate, with a bounded repair loop.

A proposal is first read into a :class:`~rehearsal_env.scenarios.Scenario` (a check that is not one
read-only SELECT, an unknown tool or role, no goal check: kept out, saying which). Then two screens
and the existing gate (:func:`rehearsal_env.versions.validate_scenario`: the checks fail when
nothing is done, the reference passes, each wrong solution fails, a replay gives the same result,
every needed id is reachable), on the running application:

* *reachable keys*: every value the reference puts into a path (``/repos/{repo}/...``) must be
  shown by the request or by a tool result before the call that uses it; a job that needs an id
  no tool returns is unfair to the agent;
* the gate itself, whose failed findings become the reason, headed as the world page heads them.

A job that fails may be repaired: an evidence job whose goal checks already hold on the untouched
snapshot loses those checks (when others remain) and is tried again; a model's job goes back to the
model with the findings (``._model``), at most ``repairs`` rounds. What still fails is kept out,
with the reason.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..agents import ScriptedAgent
from ..checks import Check, CheckRefused
from ..env import RehearsalEnv
from ..scenarios import Fault, Scenario, Solution, ToolCall
from ..versions import validate_scenario
from ..worlds import World
from ._sandboxed import Runtime

Repairer = Callable[[Sequence[tuple[dict[str, Any], str]]], list[dict[str, Any]]]
"""Failing model jobs with their reasons -> the model's repaired jobs."""
REPAIRABLE = ("request", "reference", "goal_checks", "wrong")
"""What a model's repair may change of its job (its id, split, role and evidence-derived hard rules stay)."""
BUILTIN = frozenset({"finish", "give_up", "ask_customer", "retry_operation"})


class Unfair(ValueError):
    """A proposal kept out before the gate; the message is the reason."""


def _checks(raw: Any, what: str) -> tuple[Check, ...]:
    if not isinstance(raw, list):
        raise Unfair(f"{what} must be a list of checks")
    out = []
    for c in raw:
        if not isinstance(c, dict) or not {"name", "sql", "op", "want"} <= set(c):
            raise Unfair(f"each of the {what} needs name, sql, op and want; got {str(c)[:120]}")
        try:
            out.append(Check(str(c["name"]), str(c["sql"]), c["op"], c["want"], tuple(c.get("params") or ())))
        except (CheckRefused, ValueError, TypeError) as exc:
            raise Unfair(f"check {c['name']!r} is refused: {str(exc).splitlines()[0][:200]}") from None
    return tuple(out)


def _calls(raw: Any, tools: set[str]) -> tuple[ToolCall, ...]:
    if not isinstance(raw, list) or not raw:
        raise Unfair("a solution needs a non-empty list of calls")
    out = []
    for c in raw:
        if not isinstance(c, dict) or not isinstance(c.get("tool"), str) or not isinstance(c.get("args", {}), dict):
            raise Unfair(f"a call is {{tool, args}}; got {str(c)[:120]}")
        if c["tool"] not in tools | BUILTIN:
            raise Unfair(f"the job calls {c['tool']!r}, which no tool of the world is")
        out.append(ToolCall(c["tool"], dict(c.get("args", {}))))
    return tuple(out)


def scenario_of(world: World, job: Mapping[str, Any]) -> Scenario:
    """The scenario a proposal describes.

    Raises:
        Unfair: the proposal cannot be a fair scenario as written (the message says why).
    """
    tools = {t.name for t in world.tools}
    role = str(job.get("role", ""))
    if role not in {r.name for r in world.roles}:
        raise Unfair(f"the job plays role {role!r}, which the world does not have")
    if not isinstance(job.get("id"), str) or not re.match(r"^[a-z0-9][a-z0-9-]{0,99}$", job["id"]):
        raise Unfair(f"a job id is lowercase letters, digits and -; got {str(job.get('id'))[:60]!r}")
    if not isinstance(job.get("request"), str) or not job["request"].strip():
        raise Unfair("the job has no request in words")
    goals = _checks(job.get("goal_checks"), "goal checks")
    if not goals:
        raise Unfair("the job has no goal check")
    reference = job.get("reference", {})
    calls = _calls(reference.get("calls") if isinstance(reference, dict) else None, tools)
    if calls[-1].tool != "finish":
        calls = (*calls, ToolCall("finish", {"message": "Done."}))
    wrong = []
    for w in job.get("wrong", []) or []:
        if not isinstance(w, dict) or not str(w.get("name", "")).startswith("wrong:"):
            raise Unfair(f"a wrong solution is {{name: 'wrong:...', calls}}; got {str(w)[:120]}")
        on_unknown = w.get("on_unknown", "retry_operation")
        if on_unknown not in ("retry_operation", "repeat"):
            raise Unfair(f"on_unknown is retry_operation or repeat; got {str(on_unknown)[:40]!r}")
        wrong.append(Solution(str(w["name"]), _calls(w.get("calls"), tools), on_unknown=on_unknown))
    faults = []
    for f in job.get("faults", []) or []:
        if not isinstance(f, dict) or f.get("tool") not in tools or f.get("kind") not in ("refuse", "unknown_outcome"):
            raise Unfair(f"a fault is {{tool: a tool of the world, kind: refuse | unknown_outcome}}; got {str(f)[:99]}")
        faults.append(Fault(f["tool"], f["kind"]))
    return Scenario(id=job["id"], world=world.name, split=job.get("split", "train"), role=role,
                    category=str(job.get("category", "other")), request=job["request"].strip(), goal_checks=goals,
                    hard_rules=_checks(job.get("hard_rules", []), "hard rules"),
                    reference=Solution("reference", calls), wrong=tuple(wrong), faults=tuple(faults),
                    scope=tuple(str(s) for s in job.get("scope", ())))


def _shows(text: str, value: Any) -> bool:
    if isinstance(value, int) and not isinstance(value, bool):
        return re.search(rf"(?<![\d.]){value}(?!\d)", text) is not None
    return str(value) in text or json.dumps(value, ensure_ascii=True)[1:-1] in text


def unreachable(world: World, scenario: Scenario, db: Runtime, path_args: Mapping[str, Sequence[str]]) -> str:
    """'' when every path value the reference passes was shown before its call; else what was not."""
    env = RehearsalEnv(scenario, world, database=db, stress=False)
    agent = ScriptedAgent(scenario.reference)
    observation, info = env.reset(seed=0)
    seen = [scenario.request]
    while True:
        action = agent(observation, info)
        call = json.loads(action) if action.lstrip().startswith("{") else {}
        for name in path_args.get(str(call.get("tool")), ()):
            value = (call.get("args") or {}).get(name)
            if value is not None and not any(_shows(text, value) for text in seen):
                return (f"the job needs {name}={value!r} for {call.get('tool')}, which neither the request nor an "
                        "earlier tool result shows")
        observation, _, terminated, truncated, info = env.step(action)
        seen.append(observation)
        if terminated or truncated:
            return ""


def judge(world: World, job: Mapping[str, Any], db: Runtime,
          path_args: Mapping[str, Sequence[str]]) -> tuple[bool, list[str], dict[str, str]]:
    """(fair, reasons, proof): one proposal through the screens and the gate."""
    try:
        scenario = scenario_of(world, job)
    except Unfair as exc:
        return False, [f"malformed: {exc}"], {}
    missing = unreachable(world, scenario, db, path_args)
    if missing:
        return False, [f"a needed fact is not reachable: {missing}"], {}
    validation, _ = validate_scenario(world, scenario, db)
    proof = {name: f.detail for name, f in validation.findings.items()}
    return validation.fair, list(validation.reasons), proof


def _trim_snapshot_checks(world: World, job: dict[str, Any], db: Runtime) -> dict[str, Any] | None:
    """An evidence job without the goal checks that already hold on the untouched snapshot (None: nothing to trim,
    or nothing would remain)."""
    db.reset()
    keep = [c for c in job["goal_checks"] if not Check(c["name"], c["sql"], c["op"], c["want"],
                                                       tuple(c["params"])).compare(
        db.check_value(c["sql"], tuple(c["params"])))]
    if not keep or len(keep) == len(job["goal_checks"]):
        return None
    return {**job, "goal_checks": keep, "repaired": "goal checks that held on the untouched snapshot were dropped"}


def validate_all(world: World, jobs: Sequence[dict[str, Any]], db: Runtime,
                 path_args: Mapping[str, Sequence[str]], *, repair: Repairer | None = None,
                 repairs: int = 2) -> dict[str, Any]:
    """Every job through the gate, with the repair loop; the validate phase's result (JSON-able)."""
    kept: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = []
    pending = list(jobs)
    for round_ in range(repairs + 1):
        failing: list[tuple[dict[str, Any], str]] = []
        for job in pending:
            fair, reasons, proof = judge(world, job, db, path_args)
            if not fair and job.get("origin") == "evidence" and round_ == 0:
                trimmed = _trim_snapshot_checks(world, job, db)
                if trimmed is not None:
                    fair, reasons, proof = judge(world, trimmed, db, path_args)
                    job = trimmed if fair else job
            if fair:
                kept.append({**job, "proof": proof, "repair_rounds": round_})
            elif job.get("origin") == "model" and repair is not None and round_ < repairs \
                    and not reasons[0].startswith("malformed"):
                failing.append((job, "; ".join(reasons)))
            else:
                out.append({"id": str(job.get("id")), "origin": job.get("origin"), "reason": "; ".join(reasons),
                            "repair_rounds": round_})
        if not failing or repair is None:
            break
        answered = {j.get("id"): j for j in repair(failing)}
        pending = []
        for job, reason in failing:
            again = answered.get(job["id"])
            if again is None:
                out.append({"id": job["id"], "origin": "model", "reason": reason + " (the model did not repair it)",
                            "repair_rounds": round_ + 1})
            else:
                pending.append({**job, **{k: v for k, v in again.items() if k in REPAIRABLE}})
    return {"kept": sorted(kept, key=lambda j: j["id"]), "kept_out": sorted(out, key=lambda j: j["id"])}
