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
test-retest flip rate ``f = mean_j 2 c_j (K - c_j) / (K (K - 1))``. With one repeat sw2 cannot be
estimated and the floor is unknown. Two runs of the same checkpoint give an observed floor
``Z80 * sd(d_j) / sqrt(n)`` from the per-scenario differences d_j; it also absorbs anything that
varies between whole runs.
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
HOW_TO_GET = ("each scenario ran once, so the within-scenario disagreement is unknown; run every scenario "
              "at least twice (repeats >= 2), or run the same checkpoint twice and pass both run directories")
"""What to do when the floor is unknown."""


@dataclass(frozen=True)
class Floor:
    """The resolution floor of one metric in one run."""

    metric: str
    """Which metric (``verified``, ``reward``, ...)."""
    known: bool
    """False when no scenario has two scored repeats."""
    repeats: int
    """K, the repeats per scenario in the run's design."""
    n_scenarios: int
    """Scenarios in the run (n)."""
    within_variance: float | None
    """sw2: mean over scenarios of the sample variance of their repeats; None when unknown."""
    flip_rate: float | None
    """For 0/1 metrics: 2 * sw2, the expected test-retest flip rate of one episode; None otherwise."""
    floor_k: float | None
    """RF(K): the floor for comparing two runs of K repeats each."""
    floor_1: float | None
    """RF(1): the floor for comparing two runs of one repeat each."""
    note: str
    """How to read it, or how to get it when unknown."""


def within_variance(values: Sequence[np.ndarray]) -> float | None:
    """sw2: the mean over scenarios with >= 2 values of their sample variance (ddof=1)."""
    variances = [float(np.var(v, ddof=1)) for v in values if len(v) >= 2]
    return float(np.mean(variances)) if variances else None


def floor_from_variance(sw2: float, n: int, k: int) -> float:
    """RF(K) = Z80 * sqrt(2 * sw2 / (n * K))."""
    return Z80 * math.sqrt(2 * sw2 / (n * k))


def paired_floor(sw2_a: float, k_a: int, sw2_b: float, k_b: int, n: int) -> float:
    """Z80 * sqrt((sw2_a / K_a + sw2_b / K_b) / n): RF(K) generalised to two runs."""
    return Z80 * math.sqrt((sw2_a / k_a + sw2_b / k_b) / n)


def run_floor(metric: str, values: Sequence[np.ndarray], repeats: int, binary: bool) -> Floor:
    """The floor of ``metric`` from the within-scenario disagreement across one run's repeats."""
    present = [v for v in values if len(v)]
    n = len(present)
    sw2 = within_variance(present) if repeats >= 2 else None
    if sw2 is None or n == 0:
        return Floor(metric=metric, known=False, repeats=repeats, n_scenarios=n, within_variance=None,
                     flip_rate=None, floor_k=None, floor_1=None, note="unknown: " + HOW_TO_GET)
    rf_k = floor_from_variance(sw2, n, repeats)
    note = (f"differences smaller than {rf_k:.3f} between two runs of {repeats} repeats are not resolved "
            f"(alpha {ALPHA}, power {POWER:.0%})")
    if sw2 == 0:
        note = (f"the {repeats} repeats agreed on every scenario, so no disagreement was observed; more "
                "repeats may still show some")
    return Floor(metric=metric, known=True, repeats=repeats, n_scenarios=n, within_variance=sw2,
                 flip_rate=2 * sw2 if binary else None, floor_k=rf_k,
                 floor_1=floor_from_variance(sw2, n, 1), note=note)


def observed_floor(differences: np.ndarray) -> float:
    """Z80 * sd(d, ddof=1) / sqrt(n) from two runs of the same checkpoint (NaN with n < 2)."""
    n = len(differences)
    return Z80 * float(np.std(differences, ddof=1)) / math.sqrt(n) if n >= 2 else math.nan
