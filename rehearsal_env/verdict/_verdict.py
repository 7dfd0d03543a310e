"""Verdicts: from check results to an outcome, its reward, and the run metrics of one episode."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from ..checks import CheckResult
from ._cause import NotScoredCause


class Outcome(StrEnum):
    """The result of an episode."""

    VERIFIED = "verified"
    NOT_ACHIEVED = "not_achieved"
    RULE_VIOLATED = "rule_violated"
    NOT_SCORED = "not_scored"

    @property
    def reward(self) -> float | None:
        """The outcome reward: 1, 0, -1, or None for not scored."""
        return _OUTCOME_REWARD[self]


_OUTCOME_REWARD: dict[Outcome, float | None] = {
    Outcome.VERIFIED: 1.0,
    Outcome.NOT_ACHIEVED: 0.0,
    Outcome.RULE_VIOLATED: -1.0,
    Outcome.NOT_SCORED: None,
}


class Ending(StrEnum):
    """How the episode stopped."""

    DONE = "done"
    GAVE_UP = "gave_up"
    TURN_LIMIT = "turn_limit"
    ERROR = "error"


@dataclass(frozen=True)
class EpisodeMetrics:
    """The run metrics of one episode (summed over a run in ``summary.json``)."""

    false_completion: bool = False
    """The agent said it was done and a goal check failed."""
    duplicate_effects: int = 0
    """Requests to an outside service that repeated an earlier identical request."""
    recovered: bool = False
    """A fault happened and the episode still verified, no hard rule broken, no duplicate."""
    unnecessary_interruptions: int = 0
    """``ask_customer`` calls beyond what the scenario allows."""
    rejected_attempts: int = 0
    """Actions not carried out: malformed, unknown tool, invalid arguments, a tool outside the role."""
    faults_injected: int = 0
    """Scenario faults the environment injected (refusals and unknown outcomes)."""
    stress_events: int = 0
    """Stress-layer refusals (the first change refused once), counted apart from faults."""
    customer_contacts: int = 0
    """``ask_customer`` calls made."""
    turns: int = 0
    """Steps taken (rejected attempts included)."""
    tool_calls: int = 0
    """Tool calls carried out or attempted against the application."""
    tokens: int | None = None
    """Tokens the agent reported with its actions; None when it reported none (external mode)."""
    input_tokens: int | None = None
    """Of ``tokens``, the prompt (input) tokens the agent reported; None when it did not split them."""
    output_tokens: int | None = None
    """Of ``tokens``, the completion (output) tokens the agent reported; None when it did not split them."""


@dataclass(frozen=True)
class Verdict:
    """What the checks decided, and every check's result."""

    outcome: Outcome
    """verified / not_achieved / rule_violated / not_scored."""
    ending: Ending
    """done / gave_up / turn_limit (error when the environment failed)."""
    checks: tuple[CheckResult, ...]
    """Every goal check's and hard rule's result, in scenario order."""
    metrics: EpisodeMetrics = field(default_factory=EpisodeMetrics)
    """The episode's run metrics."""
    reason: str | None = None
    """Why the episode was not scored (None otherwise)."""
    cause: NotScoredCause | None = None
    """The part whose failure made the episode not scored (world, database, provider, sandbox,
    worker); None when it was scored. Never the agent: what an agent sends is a rejected attempt."""

    def __post_init__(self) -> None:
        if (self.outcome is Outcome.NOT_SCORED) != (self.cause is not None):
            raise ValueError(f"a verdict has a not-scored cause exactly when its outcome is not_scored; got "
                             f"outcome {self.outcome.value} with cause {self.cause!r}")

    @property
    def outcome_reward(self) -> float | None:
        return self.outcome.reward

    def to_dict(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome.value,
            "ending": self.ending.value,
            "outcome_reward": self.outcome_reward,
            "reason": self.reason,
            "cause": None if self.cause is None else self.cause.value,
            "checks": [c.to_dict() for c in self.checks],
            "metrics": asdict(self.metrics),
        }


def decide(goal: list[CheckResult], rules: list[CheckResult], *,
           defects: Sequence[CheckResult] = ()) -> tuple[Outcome, str | None]:
    """The outcome from check results. A check that errored counts as failed (a goal check not met, a hard rule
    broken; the error stays in its result): whatever the agent changed made it fail, so the agent answers for
    it. ``defects`` are the errored checks that error on the untouched snapshot as well (:func:`judge` asks
    it): nothing the agent did could matter there, the check is the world's defect and the episode is not
    scored (cause ``world``); validation catches such a check before a version is published."""
    if defects:
        first = defects[0]
        return Outcome.NOT_SCORED, (f"check {first.name!r} cannot be evaluated on the untouched snapshot either "
                                    f"(a defect of the world): {first.error}")
    if any(not c.passed for c in rules):
        return Outcome.RULE_VIOLATED, None
    if all(c.passed for c in goal):
        return Outcome.VERIFIED, None
    return Outcome.NOT_ACHIEVED, None
