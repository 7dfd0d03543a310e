"""The headline numbers of one agent in one run, each with its 95% interval and the floor.

Not-scored episodes are excluded from every rate and counted. Forks and restores are never evidence
about the agent: :func:`._load.load_run` leaves them out before anything is counted, and the report
counts them apart (``not_root``). The verified, rule-violated and
false-completion rates are rates of 0/1 outcomes (:func:`._intervals.rate_estimate`); the mean
reward uses the t interval on scenario means (:func:`._intervals.mean_estimate`). pass^k and
pass@k run to the most scored repeats of any scenario (:mod:`._passk`). The resolution floor is
stated for the verified rate and the mean reward (:mod:`._floor`), from scored repeats only.

Not scored is never invisible: the report carries the not-scored count, its share of all episodes
and the causes, and whenever any episode was not scored a worst case, every headline recomputed
with the not-scored episodes counted as failures (not verified, rule violated, false completion,
the lowest reward), by the same methods. With fewer than :data:`MIN_SCENARIOS` scenarios it says
so and gives no floor.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..runner import no_world_tool_hint
from ._cost import CostReport, Prices, cost_report
from ._floor import MIN_SCENARIOS, Floor, inverse_repeats, run_floor, too_few
from ._intervals import REWARD_BOUNDS, Estimate, mean_estimate, rate_estimate
from ._load import AgentRun
from ._passk import PassK, pass_k_table
from ._reliability import CategoryRate, category_rates, consistency
from ._seqreport import describe, read_marker

RATES = ("verified", "rule_violated", "false_completion")
"""The 0/1 metrics, in report order."""
LABELS = {
    "verified": "verified rate",
    "rule_violated": "rule-violated rate",
    "false_completion": "false-completion rate",
    "reward": "mean reward",
}
"""Metric -> how the report names it."""
WORST = {"verified": 0.0, "rule_violated": 1.0, "false_completion": 1.0, "reward": REWARD_BOUNDS[0]}
"""Metric -> the value a not-scored episode takes in the worst case (a failure)."""
BEST = {"verified": 1.0, "rule_violated": 0.0, "false_completion": 0.0, "reward": REWARD_BOUNDS[1]}
"""Metric -> the value a not-scored episode takes in the best case (a success)."""


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
    """K: the most scored episodes any scenario has."""
    n_scored: int
    """Scored episodes (the denominator of every rate)."""
    n_not_scored: int
    """Not-scored episodes, excluded from every rate."""
    not_scored_share: float
    """n_not_scored / every episode (0 when there are none)."""
    not_scored_causes: dict[str, int]
    """Cause -> not-scored episodes (``unknown`` for records that name none)."""
    missing_rewards: int
    """Scored episodes with a null reward, left out of the mean reward only."""
    balanced: bool
    """Whether every scenario has exactly K scored episodes (else scenarios are still weighted equally)."""
    harmonic_repeats: float
    """K_h = 1 / mean_j(1/K_j) over scored episodes: the K the floor uses."""
    too_few_scenarios: bool
    """Fewer than MIN_SCENARIOS scenarios scored: the numbers rest on too few; no floor is given."""
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
    worst_case: dict[str, Estimate]
    """Metric -> its estimate with not-scored episodes counted as failures; empty when all were scored."""
    warnings: tuple[str, ...]
    """Plain statements the reader must see first (too few scenarios)."""
    sequential: str | None = None
    """When ``rehearsal compare`` stopped this run sequentially: that, and what it decided; None otherwise."""
    consistency: Estimate | None = None
    """Share of scenarios with >= 2 scored repeats whose repeats all agree (Wilson over them); None without repeats."""
    consistent: tuple[int, int] = (0, 0)
    """(scenarios whose repeats all agree, scenarios with >= 2 scored repeats)."""
    categories: tuple[CategoryRate, ...] = ()
    """Verified rate per scenario category (empty when the records name none)."""
    cost: CostReport | None = None
    """Cost per episode and per verified episode, with what was left out."""
    not_root: dict[str, int] = field(default_factory=dict)
    """Kind (``fork``, ``restore``) -> episodes left out of every number because they are not root episodes
    (begun at ``reset``): never evidence about the agent. Empty when there were none."""
    best_case: dict[str, Estimate] = field(default_factory=dict)
    """Every headline with the not-scored episodes counted as successes (empty when none were not scored): with
    ``worst_case``, the bounds printed beside each headline, which no choice of episodes to fail can leave."""
    retried: int = 0
    """Retries the runner played of not-scored episodes (each recorded; the first scored attempt counts)."""
    open_episodes: int = 0
    """Episodes counted by a retry that did not replay the attempt it retried: the headline counts the retry, the
    not-scored bounds fill it like a not-scored episode (:mod:`rehearsal_env.records._attempts`)."""

    def bounds(self, metric: str) -> tuple[float, float]:
        """(worst, best) value of a headline (``verified``, ..., ``reward``) over every outcome the not-scored
        episodes could have had; both the headline's value when every episode was scored."""
        value = {"verified": self.verified, "rule_violated": self.rule_violated,
                 "false_completion": self.false_completion, "reward": self.mean_reward}[metric].value
        if not self.worst_case:
            return value, value
        return self.worst_case[metric].value, self.best_case[metric].value


def worst_case(run: AgentRun, fill: dict[str, float] = WORST) -> dict[str, Estimate]:
    """Every headline with the not-scored episodes counted as failures (``fill``: the value each takes; BEST for
    the best case); empty when none were not scored."""
    if not run.n_open:
        return {}
    out = {}
    for metric in (*RATES, "reward"):
        filled = [s.bounded(metric, fill[metric]) for s in run.scenarios]
        filled = [v for v in filled if len(v)]
        out[metric] = rate_estimate(filled) if metric in RATES else mean_estimate(filled)
    return out


def no_world_tools(run_dir: str) -> tuple[str, ...]:
    """A warning when the run's ``summary.json`` says no episode called a world tool (empty otherwise), in the
    run's own words: whether its model was offered the world's tools
    (:func:`~rehearsal_env.runner.no_world_tool_hint`)."""
    try:
        summary = json.loads((Path(run_dir) / "summary.json").read_text())
    except (OSError, ValueError):
        return ()
    if not isinstance(summary, dict) or summary.get("no_world_tool_calls") is not True:
        return ()
    return (f"WARNING: {no_world_tool_hint(summary)}: these rates say nothing of its tool use",)


def summarize(run: AgentRun, prices: Prices | None = None) -> AgentReport:
    """The headline numbers, pass^k / pass@k, floors, reliability and cost (at ``prices``, default the profile's)
    of one agent's run."""
    per = {m: list(run.per_scenario(m).values()) for m in (*RATES, "reward")}
    verified = per["verified"]
    n = len(verified)
    total = run.n_episodes
    marker = read_marker(run.run)
    agree, agreeing, multi = consistency(verified)
    return AgentReport(
        run=run.run,
        agent=run.agent,
        n_scenarios=n,
        repeats=run.repeats,
        n_scored=run.n_scored,
        n_not_scored=run.n_not_scored,
        not_scored_share=run.n_not_scored / total if total else 0.0,
        not_scored_causes=run.not_scored_causes,
        missing_rewards=run.missing_rewards,
        balanced=all(len(v) == run.repeats for v in verified),
        harmonic_repeats=1 / inverse_repeats(verified) if n else float("nan"),
        too_few_scenarios=n < MIN_SCENARIOS,
        splits=run.splits,
        verified=rate_estimate(verified),
        rule_violated=rate_estimate(per["rule_violated"]),
        false_completion=rate_estimate(per["false_completion"]),
        mean_reward=mean_estimate(per["reward"]),
        pass_k=pass_k_table(verified, run.repeats),
        floors=(
            run_floor("verified", verified, binary=True),
            run_floor("reward", per["reward"], binary=False),
        ),
        worst_case=worst_case(run),
        warnings=((f"WARNING: {too_few(n)}",) if n < MIN_SCENARIOS else ()) + no_world_tools(run.run),
        sequential=describe(marker) if marker is not None else None,
        consistency=agree,
        consistent=(agreeing, multi),
        categories=category_rates(run),
        cost=cost_report(run, prices),
        not_root=dict(run.not_root),
        best_case=worst_case(run, BEST),
        retried=run.n_retried,
        open_episodes=run.n_open - run.n_not_scored,
    )
