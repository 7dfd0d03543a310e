"""Episode records as ATIF trajectories (the ``atif`` package's models, ATIF v1.8) and back.

One trajectory per episode:

- step 1 (``user``): the customer's request (from the world, when it loads; the record does not hold it);
- one ``agent`` step per turn: the tool call (``arguments`` parsed from the action; the action text exactly
  as sent, its reported tokens and the turn's other fields in ``extra``), and the env's observation as the
  result, its status, fault and latency in the result's ``extra``;
- ``agent``: the agent's name, version and model, the role's tools (OpenAI function format) when the world
  loads at the recorded version;
- with the episode's model calls (:func:`~rehearsal_env.trajectories.gateway_calls`, or an in-process policy's own
  :class:`~rehearsal_env.trajectories.ModelCall` list): each turn's step carries the engine's tokens of the call
  whose reply led to it in ``metrics`` (``prompt_token_ids``, ``completion_token_ids``, ``logprobs``,
  ``prompt_tokens``, ``completion_tokens``; ``llm_call_count`` 1); a call whose reply led to no tool call of its
  own (a text reply the harness answered by calling again) is an agent step of its own before the turn's, with
  no tool call; calls whose turn is not known are in ``extra.rehearsal.unplaced_model_calls``; the turn-boundary
  check of the calls (:func:`~rehearsal_env.trajectories.check_boundaries`) is ``extra.rehearsal.token_boundaries``;
- ``final_metrics``: steps, and our token count in ``extra`` (we record one total per action, not prompt and
  completion tokens);
- ``extra.rehearsal``: everything else of the record: verdict (outcome, ending, reason, not-scored cause),
  rewards and their components, checks, provenance, row changes, service requests, sampling.

:func:`to_record` rebuilds the :class:`~rehearsal_env.records.EpisodeRecord` exactly from a trajectory this
module wrote (the round trip), except that a holdout scenario's checks are exported without their SQL, bound
values and wanted value unless ``holdout_checks=True``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from atif import Agent, FinalMetrics, Metrics, Observation, ObservationResult, Step, ToolCall, Trajectory

from ..identity import world_version
from ..records import CheckRecord, EpisodeRecord, from_row, to_row
from ..worlds import load_world
from ._boundaries import check_boundaries
from ._calls import ModelCall

SCHEMA_VERSION = "ATIF-v1.8"
"""The ATIF version written (the ``atif`` package's models)."""
WITHHELD = '"withheld: holdout check"'
"""The ``want`` of an exported holdout check (its SQL and parameters are null)."""
_KEY = "rehearsal"
_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


def _world_context(record: EpisodeRecord) -> tuple[str | None, list[dict[str, Any]] | None]:
    """The scenario's request and the role's tools, when the world loads at the recorded version."""
    try:
        world = load_world(record.world)
        scenario = world.scenario(record.scenario)
    except (KeyError, ValueError, FileNotFoundError):
        return None, None
    tools = None
    if world_version(world) == record.world_version:
        tools = [t.schema() for t in world.tools_for(scenario.role, offers_retry=scenario.offers_retry).values()]
    return scenario.request, tools


def _arguments(action: str) -> tuple[str | None, dict[str, Any], int | None]:
    """The tool, arguments and reported tokens of an action, as far as it parses (a malformed one: ``{}``)."""
    try:
        data = json.loads(action)
    except (ValueError, RecursionError):
        return None, {}, None
    if not isinstance(data, dict):
        return None, {}, None
    args = data.get("args")
    usage = data.get("usage")
    tokens = usage.get("tokens") if isinstance(usage, dict) and isinstance(usage.get("tokens"), int) else None
    tool = data.get("tool") if isinstance(data.get("tool"), str) else None
    return tool, args if isinstance(args, dict) else {}, tokens


def _withhold(check: CheckRecord) -> CheckRecord:
    return replace(check, sql=None, params=None, want=WITHHELD)


def _metrics(call: ModelCall | None, tokens: int | None) -> Metrics | None:
    """A step's metrics: the engine's tokens of ``call`` and the tokens the turn's action reported."""
    extra = {"tokens": tokens} if tokens is not None else None
    if call is None:
        return Metrics(extra=extra) if extra else None
    ids = call.prompt_token_ids, call.completion_token_ids, call.logprobs
    return Metrics(prompt_tokens=call.prompt_tokens, completion_tokens=call.completion_tokens,
                   prompt_token_ids=None if ids[0] is None else list(ids[0]),
                   completion_token_ids=None if ids[1] is None else list(ids[1]),
                   logprobs=None if ids[2] is None else list(ids[2]), extra=extra)


def _call_view(call: ModelCall) -> dict[str, Any]:
    return {"index": call.index, "turn": call.turn, "status": call.status, "note": call.note}


def _unplaced(call: ModelCall) -> dict[str, Any]:
    metrics = _metrics(call, None)
    return {**_call_view(call), **(metrics.model_dump(exclude_none=True) if metrics else {})}


def to_trajectory(record: EpisodeRecord, *, holdout_checks: bool = False,
                  calls: Sequence[ModelCall] = ()) -> Trajectory:
    """The episode as an ATIF trajectory (validated by the ``atif`` models as it is built).

    ``calls``: the episode's model calls with the engine's tokens, in the order they were made (see the module
    docstring); empty: the trajectory carries no token ids and no boundary check."""
    request, tools = _world_context(record)
    withheld = record.split == "holdout" and not holdout_checks
    steps: list[Step] = [Step(step_id=1, source="user", message=request or "",
                              extra={_KEY: {"request_known": request is not None}})]
    turns = {turn.turn for turn in record.trace}
    by_turn: dict[int, list[ModelCall]] = {}
    for call in calls:
        if call.turn is not None and call.turn in turns:
            by_turn.setdefault(call.turn, []).append(call)
    for turn in record.trace:
        tool, args, tokens = _arguments(turn.action)
        placed = by_turn.get(turn.turn, [])
        earlier, last = placed[:-1], placed[-1] if placed else None
        for call in earlier:  # replies that led to no tool call of their own, then the one that led to this turn
            steps.append(Step(step_id=len(steps) + 1, source="agent", message="", model_name=record.model,
                              metrics=_metrics(call, None), llm_call_count=1,
                              extra={_KEY: {"model_call": _call_view(call)}}))
        call_id = f"turn-{turn.turn}"
        rest = {k: v for k, v in to_row(turn).items() if k not in ("action", "observation")}
        mine: dict[str, Any] = {"action": turn.action, "turn": rest}
        if last is not None:
            mine["model_call"] = _call_view(last)
        steps.append(Step(
            step_id=len(steps) + 1, source="agent", message="", model_name=record.model,
            tool_calls=[ToolCall(tool_call_id=call_id, function_name=turn.tool or tool or "<malformed action>",
                                 arguments=args)],
            observation=Observation(results=[ObservationResult(
                source_call_id=call_id, content=turn.observation,
                extra={"status": turn.status, "fault": turn.fault, "rejected": turn.rejected,
                       "latency_ms": turn.latency_ms})]),
            metrics=_metrics(last, tokens), llm_call_count=1 if last is not None else None,
            extra={_KEY: mine}))
    body = to_row(record)
    body.pop("trace")
    if withheld:
        body["checks"] = [to_row(_withhold(c)) for c in record.checks]
    ours: dict[str, Any] = {
        "record": body, "holdout_checks_withheld": withheld,
        "verdict": {"outcome": record.outcome, "ending": record.ending, "reward": record.reward,
                    "outcome_reward": record.outcome_reward, "reason": record.reason,
                    "not_scored_cause": record.not_scored_cause}}
    if calls:
        ours["token_boundaries"] = check_boundaries(calls).to_dict()
        unplaced = [_unplaced(c) for c in calls if c.turn not in turns]
        if unplaced:
            ours["unplaced_model_calls"] = unplaced
    return Trajectory(
        schema_version=SCHEMA_VERSION, session_id=record.run_id,
        trajectory_id=f"{record.scenario}#{record.agent}@{record.agent_version}#{record.repeat}",
        agent=Agent(name=record.agent, version=record.agent_version, model_name=record.model,
                    tool_definitions=tools),
        steps=steps,
        notes="rehearsal-env episode record; the verdict, checks and provenance are in extra.rehearsal",
        final_metrics=FinalMetrics(total_steps=len(steps), extra={"tokens": record.tokens, "turns": record.turns,
                                                                  "tool_calls": record.tool_calls}),
        extra={_KEY: ours})


def to_record(trajectory: Trajectory | dict[str, Any]) -> EpisodeRecord:
    """The episode record back from a trajectory :func:`to_trajectory` wrote.

    Raises:
        ValueError: the trajectory does not carry a rehearsal-env record (``extra.rehearsal.record``).
    """
    traj = trajectory if isinstance(trajectory, Trajectory) else Trajectory.model_validate(trajectory)
    ours = (traj.extra or {}).get(_KEY)
    if not isinstance(ours, dict) or not isinstance(ours.get("record"), dict):
        raise ValueError(f"expected an ATIF trajectory written by `rehearsal eval export --format atif` (with "
                         f"extra.{_KEY}.record); trajectory {traj.trajectory_id!r} has none")
    trace = []
    for step in traj.steps:
        mine = (step.extra or {}).get(_KEY) or {}
        if step.source != "agent" or "turn" not in mine:
            continue
        content = step.observation.results[0].content if step.observation and step.observation.results else ""
        trace.append({**mine["turn"], "action": mine["action"], "observation": content})
    return from_row(EpisodeRecord, {**ours["record"], "trace": trace})  # type: ignore[no-any-return]


def file_name(index: int, record: EpisodeRecord) -> str:
    """A safe, unique file name for the trajectory of a run's ``index``-th record."""
    return _NAME.sub("_", f"{index:05d}-{record.scenario}-{record.agent}-r{record.repeat}") + ".json"


def validate(document: dict[str, Any]) -> Trajectory:
    """``document`` checked against the ``atif`` models (raises pydantic's ValidationError)."""
    return Trajectory.model_validate(document)
