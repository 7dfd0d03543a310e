"""The episode record: everything one episode was, as one flat row.

Records are what runs store (Parquet, :mod:`._parquet`), what ``measure.py``
reads and what rescoring starts from. The schema is versioned by
:data:`RECORD_VERSION`; every field has a docstring.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..env import Episode

RECORD_VERSION = 1


@dataclass(frozen=True)
class EpisodeRecord:
    """One episode of a run."""

    run_id: str
    """The run this episode belongs to."""
    world: str
    """The world's name."""
    scenario: str
    """The scenario id."""
    split: str
    """train / dev / holdout."""
    agent: str
    """The agent's name (``reference``, ``null``, ``wrong:...`` or a user agent's name)."""
    repeat: int
    """Which repeat of this scenario (0-based)."""
    seed: int
    """The seed passed to ``reset``."""
    backend: str
    """sqlite or postgres."""
    outcome: str
    """verified / not_achieved / rule_violated / not_scored."""
    ending: str
    """done / gave_up / turn_limit / error."""
    outcome_reward: float | None
    """1, 0, -1, or None when not scored."""
    reward: float | None
    """The reward under the run's profile (the outcome reward without one); None when not scored."""
    reason: str | None
    """Why the episode was not scored, else None."""
    false_completion: bool
    """Said done while a goal check failed."""
    duplicate_effects: int
    """Repeated identical requests to outside services."""
    recovered: bool
    """A fault happened and the episode still verified cleanly."""
    unnecessary_interruptions: int
    """Customer contacts beyond what the scenario allows."""
    rejected_attempts: int
    """Actions not carried out (malformed, unknown tool, bad arguments, outside the role)."""
    faults_injected: int
    """Scenario faults injected."""
    stress_events: int
    """Stress-layer refusals."""
    turns: int
    """Steps taken."""
    tool_calls: int
    """Tool calls carried out or attempted."""
    tokens: int | None
    """Tokens the agent reported; None in external mode."""
    checks: str
    """Every check's result as a JSON list of {name, kind, op, want, held, passed, error}."""
    trace: str
    """Every turn as a JSON list of {turn, action, tool, status, observation, fault, latency_ms}."""
    service_requests: str
    """Every outside-service request as a JSON list of {service, operation, payload, idempotency_key, ...}."""
    extra: str = field(default="{}")
    """Further JSON fields (reward components, database changes, provenance) added by later stages."""

    def checks_list(self) -> list[dict[str, Any]]:
        return list(json.loads(self.checks))

    def to_row(self) -> dict[str, Any]:
        return asdict(self)


def record_episode(
    episode: Episode, *, run_id: str, agent: str, repeat: int, seed: int, backend: str,
    reward: float | None, extra: dict[str, Any] | None = None,
) -> EpisodeRecord:
    """The record of a finished episode."""
    from dataclasses import asdict as _asdict

    from ..services import service_log

    verdict = episode.verdict
    if verdict is None:
        raise ValueError("the episode has not ended; records are made of finished episodes")
    m = verdict.metrics
    try:
        requests = service_log(episode.db)
    except Exception as exc:  # the database failed; the verdict already says not scored
        requests = [{"error": f"the service record could not be read: {exc}"}]
    return EpisodeRecord(
        run_id=run_id, world=episode.world.name, scenario=episode.scenario.id, split=episode.scenario.split,
        agent=agent, repeat=repeat, seed=seed, backend=backend,
        outcome=verdict.outcome.value, ending=verdict.ending.value, outcome_reward=verdict.outcome_reward,
        reward=reward if verdict.outcome_reward is not None else None, reason=verdict.reason,
        false_completion=m.false_completion, duplicate_effects=m.duplicate_effects, recovered=m.recovered,
        unnecessary_interruptions=m.unnecessary_interruptions, rejected_attempts=m.rejected_attempts,
        faults_injected=m.faults_injected, stress_events=m.stress_events, turns=m.turns,
        tool_calls=m.tool_calls, tokens=m.tokens,
        checks=json.dumps([c.to_dict() for c in verdict.checks], default=str),
        trace=json.dumps([_asdict(t) for t in episode.trace], default=str),
        service_requests=json.dumps(requests, default=str),
        extra=json.dumps(extra or {}, default=str, sort_keys=True),
    )
