"""Making a record of a finished episode: its turns, checks, outside requests and database changes."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from ..backends import changes as database_changes
from ..checks import Check, CheckResult
from ..env import Episode, failure, readable_action, record_text
from ..provenance import OUTCOME_PROFILE, Provenance
from ..rewards import Components, TurnInput, apply_profile, compute_components, inputs_for, load_profile
from ..scenarios import Scenario
from ..services import service_log
from ..verdict import NotScoredCause, Outcome, Verdict
from ._record import (
    RECORD_VERSION,
    CheckRecord,
    EpisodeRecord,
    RewardComponent,
    RowChange,
    ServiceRequest,
    ToolCrashRecord,
    Turn,
)


def as_json(value: Any) -> str:
    """Canonical JSON text of a stored value (sorted keys; non-JSON values as text)."""
    return json.dumps(value, sort_keys=True, default=str)


def _turns(episode: Episode) -> tuple[Turn, ...]:
    return tuple(Turn(t.turn, record_text(t.action), t.tool, t.status, record_text(t.observation), t.fault,
                      t.status == "rejected", float(t.latency_ms)) for t in episode.trace)


def _check_source(scenario: Scenario, result: CheckResult, index: int) -> Check | None:
    ordered = [*scenario.goal_checks, *scenario.hard_rules]
    if index < len(ordered) and ordered[index].name == result.name:
        return ordered[index]
    pool = scenario.goal_checks if result.kind == "goal" else scenario.hard_rules
    return next((c for c in pool if c.name == result.name), None)


def _checks(scenario: Scenario, results: tuple[CheckResult, ...]) -> tuple[CheckRecord, ...]:
    out = []
    for i, r in enumerate(results):
        source = _check_source(scenario, r, i)
        out.append(CheckRecord(
            name=r.name, kind=r.kind, sql=source.sql if source else None,
            params=as_json(list(source.params)) if source else None,
            op=r.op, want=as_json(r.want), held=as_json(r.held), passed=r.passed, error=r.error))
    return tuple(out)


def _changes(episode: Episode) -> tuple[RowChange, ...]:
    diff = database_changes(episode.db, dict(episode.world.seed_rows()))
    columns = {t.name: t.column_names for t in episode.db.tables if t.name in diff}  # only the tables written
    out = []
    for table in sorted(diff):
        for kind in ("inserted", "updated", "deleted"):
            for row in diff[table][kind]:
                out.append(RowChange(table, kind, as_json(row[0]),
                                     as_json(dict(zip(columns[table], row, strict=True)))))
    return tuple(out)


def _service_requests(episode: Episode) -> tuple[ServiceRequest, ...]:
    return tuple(ServiceRequest(**{k: str(v) for k, v in r.items()}) for r in service_log(episode.db))


def _components(episode: Episode, verdict: Verdict, changes: tuple[RowChange, ...]) -> Components:
    """The reward components from what the record stores: the same inputs :func:`inputs_from_record`
    rebuilds from Parquet (and the same values ``rewards.components_of`` reads from the live database)."""
    m = verdict.metrics
    inputs = inputs_for(
        episode.world, episode.scenario, outcome=verdict.outcome.value,
        goal_passed=[c.passed for c in verdict.checks if c.kind == "goal"],
        rules_passed=[c.passed for c in verdict.checks if c.kind == "hard_rule"],
        duplicate_effects=m.duplicate_effects, turns=m.turns, tool_calls=m.tool_calls, tokens=m.tokens,
        trace=[TurnInput(t.tool, readable_action(t.action), t.status, t.observation) for t in episode.trace],
        changed=[(c.table, c.change, json.loads(c.key)) for c in changes])
    return compute_components(inputs)


def _reward(episode: Episode, verdict: Verdict, changes: tuple[RowChange, ...] | None,
            profile: str) -> tuple[float | None, tuple[RewardComponent, ...]]:
    """The reward under ``profile`` and the components it is made of (None ``changes``: not captured)."""
    if verdict.outcome_reward is not None and changes is not None:
        components = _components(episode, verdict, changes)
    else:
        components = Components.unmeasured()
    notes = dict(components.notes)
    stored = tuple(RewardComponent(name, value, notes.get(name)) for name, value in components.values().items())
    if verdict.outcome_reward is None or profile == OUTCOME_PROFILE:
        return verdict.outcome_reward, stored
    rebuilt = Components.from_values({c.name: c.value for c in stored})  # exactly what rescoring will see
    return apply_profile(load_profile(profile), rebuilt).reward, stored


def record_episode(
    episode: Episode, *, run_id: str, agent: str, agent_version: str, repeat: int, seed: int, backend: str,
    stress: bool, provenance: Provenance,
) -> EpisodeRecord:
    """The record of a finished episode (reads its outside requests and database changes once).

    The reward is computed under ``provenance.reward_profile`` from the stored reward components,
    so rescoring the record under the same profile gives the same number. An end state that cannot be
    read (the database died after the checks ran) makes the record not scored, with the database's
    cause: a record without its changes could be neither rescored nor rechecked.

    Raises:
        ValueError: the episode has not ended.
    """
    verdict = episode.verdict
    if verdict is None:
        raise ValueError("expected a finished episode (with a verdict); records are made of finished episodes. "
                         "Step the env until terminated or truncated, then record it")
    m = verdict.metrics
    capture_error = None
    try:
        requests, changed = _service_requests(episode), _changes(episode)
    except Exception as exc:  # the database (or the world's code) failed: the instrument, never the agent
        requests, changed = (), ()
        capture_error = record_text(f"the end state could not be read: {type(exc).__name__}: {exc}")
        if verdict.cause is None:
            cause, why = failure(exc)
            verdict = dataclasses.replace(verdict, outcome=Outcome.NOT_SCORED, cause=cause,
                                          reason=f"the end state could not be read: {why}")
    scenario = episode.scenario
    lineage = episode.lineage
    reward, components = _reward(episode, verdict, None if capture_error else changed, provenance.reward_profile)
    return EpisodeRecord(
        record_version=RECORD_VERSION, run_id=run_id, world=episode.world.name,
        world_version=provenance.world_version, scenario=scenario.id, split=scenario.split,
        category=scenario.category, agent=agent, agent_version=agent_version, repeat=repeat, seed=seed,
        backend=backend, stress=stress, outcome=verdict.outcome.value, ending=verdict.ending.value,
        outcome_reward=verdict.outcome_reward, reward=reward,
        reason=None if verdict.reason is None else record_text(verdict.reason),
        not_scored_cause=None if verdict.cause is None else verdict.cause.value,
        false_completion=m.false_completion, duplicate_effects=m.duplicate_effects, recovered=m.recovered,
        unnecessary_interruptions=m.unnecessary_interruptions, rejected_attempts=m.rejected_attempts,
        faults_injected=m.faults_injected, stress_events=m.stress_events, customer_contacts=m.customer_contacts,
        turns=m.turns, tool_calls=m.tool_calls, tokens=m.tokens,
        input_tokens=m.input_tokens, output_tokens=m.output_tokens,
        turn_rewards=tuple(episode.turn_rewards) if episode.turn_rewards else None,
        reward_components=components,
        tool_crashes=tuple(ToolCrashRecord(c.turn, c.tool, c.error, c.traceback) for c in episode.tool_crashes),
        checks=_checks(scenario, verdict.checks), trace=_turns(episode), service_requests=requests,
        changes=changed, capture_error=capture_error, provenance=provenance,
        episode_id=episode.id, parent_episode=None if lineage is None else lineage.parent_episode,
        parent_turn=None if lineage is None else lineage.parent_turn,
        parent_kind=None if lineage is None else lineage.kind,
    )


def not_played_record(
    scenario: Scenario, *, run_id: str, agent: str, agent_version: str, repeat: int, seed: int, backend: str,
    stress: bool, reason: str, provenance: Provenance, cause: NotScoredCause = NotScoredCause.WORKER,
) -> EpisodeRecord:
    """The record of an episode that could not be played to a verdict: not scored because ``cause`` failed
    (a worker that died on every try, a database that could not be reset, a provider before the first turn)."""
    return EpisodeRecord(
        record_version=RECORD_VERSION, run_id=run_id, world=scenario.world, world_version=provenance.world_version,
        scenario=scenario.id, split=scenario.split, category=scenario.category, agent=agent,
        agent_version=agent_version, repeat=repeat, seed=seed, backend=backend, stress=stress,
        outcome="not_scored", ending="error", outcome_reward=None, reward=None, reason=record_text(reason),
        not_scored_cause=NotScoredCause(cause).value,
        false_completion=False, duplicate_effects=0, recovered=False, unnecessary_interruptions=0,
        rejected_attempts=0, faults_injected=0, stress_events=0, customer_contacts=0, turns=0, tool_calls=0,
        tokens=None, reward_components=(), checks=(), trace=(), service_requests=(), changes=(),
        capture_error=None, provenance=provenance,
    )
