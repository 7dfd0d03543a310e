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
* Means of rewards (ternary or continuous), which are bounded (:data:`REWARD_BOUNDS`): the
  reward is rescaled to q in [0, 1] by its bounds and given the Wilson score interval at
  ``n_eff = q(1-q) / SE^2`` (at least n; n when q is at a bound; N when every scenario mean is
  the same), with the t quantile on n - 1 df in place of z because the dispersion is always
  estimated (a quasi-binomial score interval; McCullagh & Nelder, "Generalized Linear Models",
  2nd ed., ch. 9). In the interior it is the t interval on the scenario means to first order;
  at a bound (or when every scenario mean is equal) it assumes the worst, binomial, dispersion
  and uses z: the binomial (Wilson) bound on the extreme, so it never has zero width with
  n < infinity, unlike the t interval, which is [1, 1] for an all-verified run and covers the
  truth a quarter of the time at p = 0.97, n = 10 (see :mod:`._coverage`).

Every interval here is computed by the array kernels (:func:`rate_bounds`,
:func:`bounded_mean_bounds`, :func:`t_bounds`), which work on a (replicates x scenarios) array of
scenario means; the coverage study (:mod:`._coverage`) runs exactly these kernels.
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
_ZERO_SE = 1e-12
"""A standard error below this is rounding, not spread: the scenario means are equal."""
REWARD_BOUNDS = (-1.0, 1.0)
"""Every reward this package computes lies here: outcome rewards are -1, 0, 1 and profile rewards are
weighted means of components in [0, 1]. A run with rewards outside widens them to what it holds."""


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
    """The effective sample size the Wilson (score) interval used; None for a reward whose q(1-q)/SE^2 exceeds
    the episodes (its rewards vary less than 0/1 outcomes would: that is no sample size)."""
    design_effect: float | None = None
    """For rates: SE^2 / (p(1-p)/N), how much clustering inflates the variance; None with one repeat."""
    exact_upper: float | None = None
    """When the rate is 0: the one-sided 95% Clopper-Pearson upper bound at n_eff trials."""
    exact_lower: float | None = None
    """When the rate is 1: the one-sided 95% Clopper-Pearson lower bound at n_eff trials."""
    bounds: tuple[float, float] | None = None
    """For rewards: the (low, high) range the bounded interval assumes; None for rates."""


def scenario_means(values: Sequence[np.ndarray]) -> np.ndarray:
    """The mean of each scenario's values; scenarios without values are skipped."""
    return np.array([float(np.mean(v)) for v in values if len(v)], dtype=float)


def clustered_se(means: np.ndarray) -> float:
    """sd(means, ddof=1) / sqrt(n): the standard error with the scenario as the unit (NaN if n < 2)."""
    n = len(means)
    return float(np.std(means, ddof=1) / math.sqrt(n)) if n >= 2 else math.nan


# --- array kernels: rows are replicates (one row for a real run), columns scenarios ---------------


def _rows(means: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(n, mean, clustered SE) of each row; NaN marks a scenario absent from that row.

    SE is NaN with fewer than 2 scenarios, and 0 when the means differ by rounding only.
    """
    present = ~np.isnan(means)
    n = present.sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.where(present, means, 0.0).sum(axis=-1) / n
        dev = np.where(present, means - mean[..., None], 0.0)
        se = np.sqrt((dev**2).sum(axis=-1) / (n - 1)) / np.sqrt(n)
    se = np.where(n >= 2, np.where(se < _ZERO_SE, 0.0, se), np.nan)
    return n, mean, se


def _t_quantile(n: np.ndarray) -> np.ndarray:
    """t_{0.975, n-1} per row (z where n < 2)."""
    return np.where(n >= 2, stats.t.ppf(0.5 + CONFIDENCE / 2, np.maximum(n - 1, 1)), Z95)


def wilson_bounds(p: np.ndarray, n: np.ndarray, z: float | np.ndarray = Z95) -> tuple[np.ndarray, np.ndarray]:
    """The Wilson score interval for proportions ``p`` out of ``n`` (arrays; ``n`` may be fractional)."""
    p, n = np.asarray(p, dtype=float), np.asarray(n, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        z2n = z * z / n
        centre = (p + z2n / 2) / (1 + z2n)
        half = z / (1 + z2n) * np.sqrt(np.maximum(p * (1 - p) / n + z2n / (4 * n), 0.0))
    bad = (n <= 0) | np.isnan(p)
    return (np.where(bad, np.nan, np.maximum(0.0, centre - half)),
            np.where(bad, np.nan, np.minimum(1.0, centre + half)))


def effective_n_rows(p: np.ndarray, se: np.ndarray, n: np.ndarray | int,
                     cap: np.ndarray | float) -> np.ndarray:
    """``p(1-p)/SE^2`` clamped to [n, cap]; n when p is 0 or 1 or SE is unknown; cap when SE is 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        raw = p * (1 - p) / se**2
    raw = np.where(se == 0, cap, raw)
    out = np.clip(raw, n, cap)
    return np.asarray(np.where((p <= 0) | (p >= 1) | np.isnan(se), n, out), dtype=float)


def rate_bounds(means: np.ndarray, cap: np.ndarray | float) -> tuple[np.ndarray, ...]:
    """(p, se, n_eff, low, high) per row: Wilson (z) at n_eff clamped to [n, cap]; cap = episodes for a rate.

    ``means`` is (rows x scenarios); NaN marks a scenario absent from a row.
    """
    n, p, se = _rows(np.asarray(means, dtype=float))
    n_eff = effective_n_rows(p, se, n, cap)
    low, high = wilson_bounds(p, n_eff)
    return p, se, n_eff, low, high


def bounded_mean_bounds(means: np.ndarray, n_episodes: np.ndarray | float,
                        bounds: tuple[float, float] = REWARD_BOUNDS) -> tuple[np.ndarray, ...]:
    """(mean, se, n_eff, low, high) per row: the score interval of a mean bounded by ``bounds``.

    q = (mean - a) / (b - a); Wilson with the t quantile on n - 1 df at n_eff = q(1-q)/SE_q^2 (at
    least n), mapped back. Where the dispersion cannot be estimated it takes the worst case, the
    binomial one, with z: n_eff = n when q is 0 or 1, ``n_episodes`` when SE is 0 inside the bounds.
    """
    a, b = bounds
    n, qbar, se_q = _rows((np.asarray(means, dtype=float) - a) / (b - a))
    n_eff = effective_n_rows(qbar, se_q, n, math.inf)
    assumed = (se_q == 0) | np.isnan(se_q) | (qbar <= 0) | (qbar >= 1)
    n_eff = np.where(se_q == 0, np.where((qbar <= 0) | (qbar >= 1), n, n_episodes), n_eff)
    low, high = wilson_bounds(qbar, n_eff, np.where(assumed, Z95, _t_quantile(n)))
    return a + (b - a) * qbar, (b - a) * se_q, n_eff, a + (b - a) * low, a + (b - a) * high


def t_bounds(values: np.ndarray) -> tuple[np.ndarray, ...]:
    """(mean, se, low, high) per row: ``mean -+ t_{0.975, n-1} * se`` (NaN ends with n < 2)."""
    n, m, se = _rows(np.asarray(values, dtype=float))
    half = _t_quantile(n) * se
    return m, se, m - half, m + half


def difference_bounds(ma: np.ndarray, mb: np.ndarray, episodes_a: np.ndarray | float,
                      episodes_b: np.ndarray | float,
                      bounds: tuple[float, float] | None = None) -> tuple[np.ndarray, ...]:
    """(difference, se, low, high) per row for paired scenario means: the t interval on d = ma - mb.

    Where every d_j is the same (the t interval would have zero width) it is Newcombe's square-and-add
    (MOVER) interval from each run's own interval: Wilson at n_eff for rates (``bounds`` None), the
    bounded score interval for rewards. It ignores the pairing, so it errs wide.
    """
    ma, mb = np.asarray(ma, dtype=float), np.asarray(mb, dtype=float)
    d = ma - mb
    diff, se, low, high = t_bounds(d)
    same = (se == 0) & ~np.isnan(se)
    if np.any(same):
        if bounds is None:
            pa, _, _, la, ha = rate_bounds(ma, episodes_a)
            pb, _, _, lb, hb = rate_bounds(mb, episodes_b)
        else:
            pa, _, _, la, ha = bounded_mean_bounds(ma, episodes_a, bounds)
            pb, _, _, lb, hb = bounded_mean_bounds(mb, episodes_b, bounds)
        low = np.where(same, diff - np.hypot(pa - la, hb - pb), low)
        high = np.where(same, diff + np.hypot(ha - pa, pb - lb), high)
    return diff, se, low, high


# --- scalar API ---------------------------------------------------------------------------------


def wilson(p: float, n: float, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval for proportion ``p`` out of ``n`` (``n`` may be fractional)."""
    if n <= 0 or math.isnan(p):
        return (math.nan, math.nan)
    low, high = wilson_bounds(np.array(p), np.array(n), z)
    return float(low), float(high)


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
    return float(effective_n_rows(np.array(p), np.array(se), n_scenarios, float(n_episodes)))


def rate_estimate(values: Sequence[np.ndarray], n_episodes: int | None = None,
                  cap: float | None = None) -> Estimate:
    """A rate in [0, 1] from per-scenario values: Wilson at n_eff, plus the exact bound at 0 or 1.

    ``values`` holds each scenario's per-episode 0/1 outcomes, or, for pass^k and pass@k, one
    unbiased per-scenario estimate each; then ``n_episodes`` gives the episodes behind them.
    ``cap`` is the largest n_eff (default: the episodes).
    """
    means = scenario_means(values)
    n = len(means)
    episodes = int(sum(len(v) for v in values)) if n_episodes is None else n_episodes
    if n == 0:
        return _empty()
    p_, se_, n_eff_, low_, high_ = rate_bounds(means[None, :], float(episodes if cap is None else cap))
    p, se, n_eff, low, high = float(p_[0]), float(se_[0]), float(n_eff_[0]), float(low_[0]), float(high_[0])
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


def mean_estimate(values: Sequence[np.ndarray], bounds: tuple[float, float] = REWARD_BOUNDS) -> Estimate:
    """A mean reward: the bounded score interval on the scenario means (:func:`bounded_mean_bounds`).

    Rewards outside ``bounds`` widen them to the values observed (and the method says so).
    """
    means = scenario_means(values)
    n = len(means)
    if n == 0:
        return _empty()
    every = np.concatenate([np.asarray(v, dtype=float) for v in values if len(v)])
    a, b = min(bounds[0], float(every.min())), max(bounds[1], float(every.max()))
    episodes = int(every.size)
    m, se, n_eff, low, high = (float(x[0]) for x in bounded_mean_bounds(means[None, :], float(episodes), (a, b)))
    worst = se == 0 or math.isnan(se) or m <= a or m >= b
    df = "z, binomial (worst-case) dispersion" if worst else f"t on {n - 1} df"
    widened = "" if (a, b) == tuple(bounds) else " (bounds widened to the rewards observed)"
    # q(1-q)/SE^2 above the episodes is no sample size: the rewards vary less than 0/1 outcomes would
    size = (f"n_eff {n_eff:.1f}" if n_eff <= episodes else
            f"dispersion {episodes / n_eff:.2f} x binomial (no effective sample size above the {episodes} episodes)")
    return Estimate(
        value=m,
        low=low,
        high=high,
        se=se if n >= 2 else math.nan,
        method=f"bounded score interval on [{a:g}, {b:g}]{widened}, {df}, {size}",
        n_scenarios=n,
        n_episodes=episodes,
        n_eff=n_eff if n_eff <= episodes else None,
        bounds=(a, b),
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
