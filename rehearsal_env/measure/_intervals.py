"""Confidence intervals for one run, with the scenario as the unit.

Repeats of one scenario are not independent, so every number is computed from the
per-scenario means ``m_j`` (each scenario's scored repeats averaged first) and its
standard error from the spread of those means::

    SE = sd(m_j, ddof=1) / sqrt(n)

With balanced repeats this equals the cluster-robust standard error of statsmodels'
``OLS(y, ones).fit(cov_type="cluster", cov_kwds={"groups": scenario})``, which applies the
C/(C-1) small-sample factor (Evan Miller, "Adding Error Bars to Evals", arXiv 2411.00640,
sections 2-4 and appendix A). With unbalanced repeats (not-scored episodes removed) the
scenarios are still weighted equally, so the estimate is the mean of scenario means.

Intervals (all two-sided 95%):

* Rates of 0/1 outcomes: the Wilson score interval at the effective sample size
  ``n_eff = p(1-p) / SE^2``, clamped to [n scenarios, N episodes] (``n_eff = n`` when p is 0
  or 1). With one repeat this is the ordinary Wilson interval at n. Wilson keeps its coverage
  near 0 and 1 where the Wald interval collapses (Brown, Cai & DasGupta 2001, Statistical
  Science 16:101; Bowyer et al. 2025, arXiv 2503.01747).
* When the rate is exactly 0 (or 1) the exact Clopper-Pearson bound is given as well, one-sided
  at 95% (the end of the two-sided 90% interval), at ``n_eff`` trials: 0/n gives about 3/n,
  the rule of three.
* Means of rewards (ternary or continuous): a t interval with n-1 degrees of freedom on the
  scenario means.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
"""Two-sided confidence level of every interval."""
Z95 = float(stats.norm.ppf(0.5 + CONFIDENCE / 2))
"""The normal quantile of the intervals (1.95996...)."""


@dataclass(frozen=True)
class Estimate:
    """One headline number with its 95% confidence interval (scenario as the unit)."""

    value: float
    """Mean over scenarios of each scenario's mean over its scored repeats (NaN when nothing scored)."""
    low: float
    """Lower end of the 95% interval."""
    high: float
    """Upper end of the 95% interval."""
    se: float
    """Clustered standard error: sd of the scenario means (ddof=1) / sqrt(n); NaN with one scenario."""
    method: str
    """How the interval was made, in words (e.g. ``"Wilson, n_eff 31.2"``)."""
    n_scenarios: int
    """Scenarios with at least one scored episode (the unit of the interval)."""
    n_episodes: int
    """Scored episodes behind the number."""
    count: int | None = None
    """For 0/1 outcomes: episodes where the outcome is 1; None for rewards."""
    n_eff: float | None = None
    """For rates: the effective sample size the Wilson interval used; None for rewards."""
    design_effect: float | None = None
    """For rates: SE^2 / (p(1-p)/N), how much clustering inflates the variance; None with one repeat."""
    exact_upper: float | None = None
    """When the rate is 0: the one-sided 95% Clopper-Pearson upper bound at n_eff trials."""
    exact_lower: float | None = None
    """When the rate is 1: the one-sided 95% Clopper-Pearson lower bound at n_eff trials."""


def scenario_means(values: Sequence[np.ndarray]) -> np.ndarray:
    """The mean of each scenario's values; scenarios without values are skipped."""
    return np.array([float(np.mean(v)) for v in values if len(v)], dtype=float)


def clustered_se(means: np.ndarray) -> float:
    """sd(means, ddof=1) / sqrt(n): the standard error with the scenario as the unit (NaN if n < 2)."""
    n = len(means)
    return float(np.std(means, ddof=1) / math.sqrt(n)) if n >= 2 else math.nan


def wilson(p: float, n: float, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval for proportion ``p`` out of ``n`` (``n`` may be fractional)."""
    if n <= 0 or math.isnan(p):
        return (math.nan, math.nan)
    z2n = z * z / n
    centre = (p + z2n / 2) / (1 + z2n)
    half = z / (1 + z2n) * math.sqrt(p * (1 - p) / n + z2n / (4 * n))
    return (max(0.0, centre - half), min(1.0, centre + half))


def clopper_pearson_upper(x: float, n: float, confidence: float = CONFIDENCE) -> float:
    """One-sided exact upper bound for x successes in n trials (0/n: 1 - (1-confidence)^(1/n))."""
    if x >= n:
        return 1.0
    return float(stats.beta.ppf(confidence, x + 1, n - x))


def clopper_pearson_lower(x: float, n: float, confidence: float = CONFIDENCE) -> float:
    """One-sided exact lower bound for x successes in n trials."""
    if x <= 0:
        return 0.0
    return float(stats.beta.ppf(1 - confidence, x, n - x + 1))


def effective_n(p: float, se: float, n_scenarios: int, n_episodes: int) -> float:
    """``p(1-p)/SE^2`` clamped to [n scenarios, N episodes]; n when p is 0 or 1 or SE is unknown (n < 2).

    SE = 0 with 0 < p < 1 (every scenario has the same mean) makes it infinite, hence N.
    """
    if p <= 0 or p >= 1 or math.isnan(se):
        return float(n_scenarios)
    if se == 0:
        return float(n_episodes)
    return float(min(max(p * (1 - p) / se**2, n_scenarios), n_episodes))


def rate_estimate(values: Sequence[np.ndarray], n_episodes: int | None = None) -> Estimate:
    """A rate in [0, 1] from per-scenario values: Wilson at n_eff, plus the exact bound at 0 or 1.

    ``values`` holds each scenario's per-episode 0/1 outcomes, or, for pass^k and pass@k, one
    unbiased per-scenario estimate each; then ``n_episodes`` gives the episodes behind them.
    """
    means = scenario_means(values)
    n = len(means)
    episodes = int(sum(len(v) for v in values)) if n_episodes is None else n_episodes
    if n == 0:
        return _empty()
    p = float(np.mean(means))
    se = clustered_se(means)
    n_eff = effective_n(p, se, n, episodes)
    low, high = wilson(p, n_eff)
    binary = all(np.isin(v, (0.0, 1.0)).all() for v in values)
    count = int(sum(float(np.sum(v)) for v in values)) if binary else None
    deff = se**2 / (p * (1 - p) / episodes) if 0 < p < 1 and episodes > n and not math.isnan(se) else None
    method = f"Wilson, n {n}" if episodes == n else f"Wilson, n_eff {n_eff:.1f}"
    return Estimate(
        value=p,
        low=low,
        high=high,
        se=se,
        method=method,
        n_scenarios=n,
        n_episodes=episodes,
        count=count,
        n_eff=n_eff,
        design_effect=deff,
        exact_upper=clopper_pearson_upper(0.0, n_eff) if p == 0 else None,
        exact_lower=clopper_pearson_lower(n_eff, n_eff) if p == 1 else None,
    )


def mean_estimate(values: Sequence[np.ndarray]) -> Estimate:
    """A mean reward: t interval with n-1 degrees of freedom on the scenario means."""
    means = scenario_means(values)
    n = len(means)
    if n == 0:
        return _empty()
    m = float(np.mean(means))
    se = clustered_se(means)
    low, high = t_interval(m, se, n - 1)
    return Estimate(
        value=m,
        low=low,
        high=high,
        se=se,
        method=f"t, {n - 1} df on scenario means",
        n_scenarios=n,
        n_episodes=int(sum(len(v) for v in values)),
    )


def t_interval(mean: float, se: float, df: int) -> tuple[float, float]:
    """``mean -+ t_{0.975, df} * se`` (NaN when df < 1 or se is NaN)."""
    if df < 1 or math.isnan(se):
        return (math.nan, math.nan)
    half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, df)) * se
    return (mean - half, mean + half)


def _empty() -> Estimate:
    nan = math.nan
    return Estimate(value=nan, low=nan, high=nan, se=nan, method="no scored episodes", n_scenarios=0,
                    n_episodes=0)
