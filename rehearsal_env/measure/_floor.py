"""The resolution floor: the smallest difference between two checkpoints a rerun resolves.

The floor is the smallest true difference that a paired comparison of two runs of this suite
detects at alpha = 0.05 (two-sided) with 80% power, in the most favourable case, where the two
checkpoints differ by a uniform shift and only the within-scenario noise remains. With n paired
scenarios, K repeats and within-scenario variance sw2, the scenario-mean difference has variance
2 * sw2 / K, hence::

    RF(K) = Z80 * sqrt(2 * sw2 / (n * K)),   Z80 = z_{0.975} + z_{0.80} = 2.8015852181

(the normal-approximation sample-size formula for a paired comparison, solved for the
difference: e.g. Chow, Shao & Wang, "Sample Size Calculations in Clinical Research", ch. 3; and
the power-analysis section of Miller, arXiv 2411.00640). ``sw2`` is the mean over scenarios of the
sample variance (ddof=1) of each scenario's repeats; for 0/1 outcomes ``2 * sw2`` is the expected
test-retest flip rate ``f = mean_j 2 c_j (K - c_j) / (K (K - 1))``.

K counts *scored* episodes. When repeats are unbalanced (episodes not scored), scenario j's mean
has within-variance sw2 / K_j, so the mean difference has variance ``2 * sw2 * mean_j(1/K_j) / n``
and ``1 / K`` above becomes ``mean_j(1/K_j)``: the floor is stated at the harmonic mean of the
K_j, ``K_h = 1 / mean_j(1/K_j)``, never at the design K (an extra not-scored episode is no repeat).

It is a power statement, not a test: a true difference of RF(K) is detected 80% of the time; a
smaller one less often. It is the large-sample figure: the coverage study (:mod:`._coverage`)
finds the paired t test at about 76% and the exact (conservative) sign-flip test at about 72% for
n = 30, and both near 80% at n = 100, so for small suites the floor is slightly optimistic.
With one repeat sw2 cannot be estimated and the floor is unknown; with
fewer than :data:`MIN_SCENARIOS` scenarios it is not given at all (one scenario x 3 repeats gives
RF(3) = 1.32, more than the whole range of a rate). Two runs of the same checkpoint give an
observed floor ``Z80 * sd(d_j) / sqrt(n)`` from the per-scenario differences d_j; it also absorbs
anything that varies between whole runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

ALPHA = 0.05
"""Two-sided significance level of the floor."""
POWER = 0.80
"""Power of the floor."""
Z80 = float(stats.norm.ppf(1 - ALPHA / 2) + stats.norm.ppf(POWER))
"""z_{0.975} + z_{0.80} = 2.8015852181."""
MIN_SCENARIOS = 5
"""Fewer scenarios than this: no floor is given, and the report says the numbers rest on too few."""
HOW_TO_GET = ("each scenario ran once, so the within-scenario disagreement is unknown; run every scenario "
              "at least twice (repeats >= 2), or run the same checkpoint twice and pass both run directories")
"""What to do when the floor is unknown."""
ALL_AGREED = ("the scored repeats agreed on every scenario, so no disagreement was observed and a floor estimated "
              "from them would be 0, which no suite resolves: the floor is unknown, not zero. Run more repeats "
              "(repeats >= 5), or run the same checkpoint twice and pass both run directories")
"""What to say when every scenario's repeats agreed (sw2 = 0)."""


def too_few(n: int) -> str:
    """The plain statement for fewer than MIN_SCENARIOS scenarios."""
    return (f"only {n} scenario(s): with fewer than {MIN_SCENARIOS} no resolution floor is given, and every "
            f"interval rests on too few scenarios to mean much; run at least {MIN_SCENARIOS} scenarios")


@dataclass(frozen=True)
class Floor:
    """The resolution floor of one metric in one run."""

    metric: str
    """Which metric (``verified``, ``reward``, ...)."""
    known: bool
    """False when no scenario has two scored repeats, or with fewer than MIN_SCENARIOS scenarios."""
    repeats: int
    """K: the most scored values any scenario has."""
    n_scenarios: int
    """Scenarios in the run (n)."""
    within_variance: float | None
    """sw2: mean over scenarios of the sample variance of their repeats; None when unknown."""
    flip_rate: float | None
    """For 0/1 metrics: 2 * sw2, the expected test-retest flip rate of one episode; None otherwise."""
    floor_k: float | None
    """RF(K_h): the floor for comparing two runs with this run's scored repeats each."""
    floor_1: float | None
    """RF(1): the floor for comparing two runs of one repeat each."""
    note: str
    """How to read it, or how to get it when unknown."""
    harmonic_repeats: float | None = None
    """K_h = 1 / mean_j(1/K_j) over scored values; equals K when balanced."""

    @property
    def label(self) -> str:
        """``RF(3)``, or ``RF(K_h = 2.73)`` when the scored repeats are unbalanced."""
        kh = self.harmonic_repeats
        if kh is None or abs(kh - round(kh)) < 1e-9:
            return f"RF({self.repeats if kh is None else round(kh)})"
        return f"RF(K_h = {kh:.2f})"


def within_variance(values: Sequence[np.ndarray]) -> float | None:
    """sw2: the mean over scenarios with >= 2 values of their sample variance (ddof=1)."""
    variances = [float(np.var(v, ddof=1)) for v in values if len(v) >= 2]
    return float(np.mean(variances)) if variances else None


def inverse_repeats(values: Sequence[np.ndarray]) -> float:
    """mean_j(1 / K_j) over scenarios with values (1 / K when balanced)."""
    counts = [len(v) for v in values if len(v)]
    return float(np.mean([1.0 / k for k in counts])) if counts else math.nan


def floor_from_variance(sw2: float, n: int, inv_k: float) -> float:
    """RF = Z80 * sqrt(2 * sw2 * mean(1/K_j) / n); pass ``inv_k = 1 / K`` when balanced."""
    return Z80 * math.sqrt(2 * sw2 * inv_k / n)


def paired_floor(sw2_a: float, inv_k_a: float, sw2_b: float, inv_k_b: float, n: int) -> float:
    """Z80 * sqrt((sw2_a * mean(1/K_a,j) + sw2_b * mean(1/K_b,j)) / n): RF generalised to two runs."""
    return Z80 * math.sqrt((sw2_a * inv_k_a + sw2_b * inv_k_b) / n)


def run_floor(metric: str, values: Sequence[np.ndarray], binary: bool) -> Floor:
    """The floor of ``metric`` from the within-scenario disagreement across one run's scored repeats."""
    present = [v for v in values if len(v)]
    n = len(present)
    k = max((len(v) for v in present), default=0)
    sw2 = within_variance(present)
    inv_k = inverse_repeats(present)
    kh = 1 / inv_k if n else None
    if n < MIN_SCENARIOS or sw2 is None or sw2 == 0:
        note = ("not given: " + too_few(n) if n < MIN_SCENARIOS else "unknown: " + HOW_TO_GET if sw2 is None
                else "unknown: " + ALL_AGREED)
        return Floor(metric=metric, known=False, repeats=k, n_scenarios=n, within_variance=None,
                     flip_rate=None, floor_k=None, floor_1=None, note=note, harmonic_repeats=kh)
    rf_k = floor_from_variance(sw2, n, inv_k)
    note = (f"a true difference of {rf_k:.3f} between two runs like this one is detected 80% of the time "
            f"(alpha {ALPHA}, two-sided); a smaller one less often")
    return Floor(metric=metric, known=True, repeats=k, n_scenarios=n, within_variance=sw2,
                 flip_rate=2 * sw2 if binary else None, floor_k=rf_k, floor_1=floor_from_variance(sw2, n, 1.0),
                 note=note, harmonic_repeats=kh)


def observed_floor(differences: np.ndarray) -> float:
    """Z80 * sd(d, ddof=1) / sqrt(n) from two runs of the same checkpoint (NaN with n < 2)."""
    n = len(differences)
    return Z80 * float(np.std(differences, ddof=1)) / math.sqrt(n) if n >= 2 else math.nan
