"""The headline numbers of one agent in one run, each with its 95% interval and the floor.

Not-scored episodes are excluded from every rate and counted. The verified, rule-violated and
false-completion rates are rates of 0/1 outcomes (:func:`._intervals.rate_estimate`); the mean
reward uses the t interval on scenario means (:func:`._intervals.mean_estimate`). pass^k and
pass@k run to the design's repeats (:mod:`._passk`). The resolution floor is stated for the
verified rate and the mean reward (:mod:`._floor`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ._floor import Floor, run_floor
from ._intervals import Estimate, mean_estimate, rate_estimate
from ._load import AgentRun
from ._passk import PassK, pass_k_table

RATES = ("verified", "rule_violated", "false_completion")
"""The 0/1 metrics, in report order."""
LABELS = {
    "verified": "verified rate",
    "rule_violated": "rule-violated rate",
    "false_completion": "false-completion rate",
    "reward": "mean reward",
}
"""Metric -> how the report names it."""


@dataclass(frozen=True)
class AgentReport:
    """Everything measured about one agent in one run."""

    run: str
    """The run directory."""
    agent: str
    """Agent name."""
    n_scenarios: int
    """Scenarios with at least one scored episode."""
    repeats: int
    """Repeats per scenario in the run's design (K)."""
    n_scored: int
    """Scored episodes (the denominator of every rate)."""
    n_not_scored: int
    """Not-scored episodes, excluded from every rate."""
    missing_rewards: int
    """Scored episodes with a null reward, left out of the mean reward only."""
    balanced: bool
    """Whether every scenario has exactly K scored episodes (else scenarios are still weighted equally)."""
    splits: dict[str, int]
    """Split -> scenarios."""
    verified: Estimate
    """Share of scored episodes verified."""
    rule_violated: Estimate
    """Share of scored episodes that broke a hard rule (exact upper bound when 0)."""
    false_completion: Estimate
    """Share of scored episodes where the agent said it was done and a goal check failed."""
    mean_reward: Estimate
    """Mean reward of scored episodes (null rewards left out)."""
    pass_k: tuple[PassK, ...]
    """pass^k and pass@k for k = 1..K."""
    floors: tuple[Floor, ...]
    """Resolution floors: verified rate, then mean reward."""


def summarize(run: AgentRun) -> AgentReport:
    """The headline numbers, pass^k / pass@k and floors of one agent's run."""
    per = {m: list(run.per_scenario(m).values()) for m in (*RATES, "reward")}
    verified = per["verified"]
    return AgentReport(
        run=run.run,
        agent=run.agent,
        n_scenarios=len(verified),
        repeats=run.repeats,
        n_scored=run.n_scored,
        n_not_scored=run.n_not_scored,
        missing_rewards=run.missing_rewards,
        balanced=all(len(v) == run.repeats for v in verified),
        splits=run.splits,
        verified=rate_estimate(verified),
        rule_violated=rate_estimate(per["rule_violated"]),
        false_completion=rate_estimate(per["false_completion"]),
        mean_reward=mean_estimate(per["reward"]),
        pass_k=pass_k_table(verified, run.repeats),
        floors=(
            run_floor("verified", verified, run.repeats, binary=True),
            run_floor("reward", per["reward"], run.repeats, binary=False),
        ),
    )
