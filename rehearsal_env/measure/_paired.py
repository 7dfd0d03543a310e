"""Exact and approximate paired tests over scenarios.

* Exact McNemar (binary outcomes, one repeat in both runs): with b scenarios where only A
  succeeds and c where only B does, ``p = min(1, 2 * BinomCDF(min(b, c); b + c, 1/2))``
  (McNemar 1947; exact form in Fagerland, Lydersen & Laake 2013, BMC Med Res Methodol 13:91).
  It is never run on pooled episodes when K > 1, because repeats are not independent.
* Paired t test on the per-scenario differences d_j, n - 1 degrees of freedom.
* Sign-flip permutation test (Fisher 1935; Good, "Permutation, Parametric and Bootstrap Tests
  of Hypotheses", 3rd ed., sec. 3.1): under no difference each d_j is as likely to have either
  sign, so the p-value is the share of the 2^n sign assignments whose |sum| reaches the observed
  |sum d_j|. It is computed exactly: by enumeration in two halves for n <= 40 (meet in the
  middle: 2 * 2^20 sums at most), and otherwise by convolution when the |d_j| lie on a common
  grid (always so for outcome rewards: d_j is a difference of two means of a few integers).
  Only continuous rewards with n > 40 fall back to a Monte Carlo estimate (200,000 draws,
  seed 0, p = (1 + hits) / (1 + draws)), which the result names.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

EXACT_ENUMERATION_MAX_N = 40
"""Largest number of non-zero differences enumerated exactly (2 halves of 2^20 sums)."""
GRID_MAX_TOTAL = 100_000
"""Largest sum of grid units the exact convolution handles (its cost is n * this)."""
MONTE_CARLO_DRAWS = 200_000
"""Draws of the fallback Monte Carlo sign-flip test."""
_TOL = 1e-9


@dataclass(frozen=True)
class PairedTest:
    """One paired test of "no difference" between two runs."""

    name: str
    """``exact McNemar``, ``paired t`` or ``sign-flip permutation``."""
    statistic: float
    """The test statistic: min(b, c) for McNemar, t for the t test, sum of d_j for the sign flip."""
    p_value: float
    """Two-sided p-value."""
    detail: str
    """How it was computed (counts, degrees of freedom, exact or Monte Carlo)."""


def mcnemar_exact(b: int, c: int) -> PairedTest:
    """Exact McNemar test on b (only A succeeds) and c (only B succeeds) discordant scenarios."""
    m = b + c
    p = 1.0 if m == 0 else min(1.0, 2 * float(stats.binom.cdf(min(b, c), m, 0.5)))
    return PairedTest(name="exact McNemar", statistic=float(min(b, c)), p_value=p,
                      detail=f"b={b} only A, c={c} only B, of {m} discordant")


def paired_t(differences: np.ndarray) -> PairedTest:
    """Paired t test: t = mean(d) / (sd(d) / sqrt(n)), n - 1 df; p = 1 when every d_j is 0.

    When every d_j is the same non-zero number, t is infinite and the p-value undefined (NaN).
    """
    n = len(differences)
    if n < 2:
        return PairedTest(name="paired t", statistic=math.nan, p_value=math.nan, detail="needs 2 scenarios")
    mean, sd = float(np.mean(differences)), float(np.std(differences, ddof=1))
    if sd == 0:
        if mean == 0:
            return PairedTest(name="paired t", statistic=0.0, p_value=1.0, detail="every difference is 0")
        return PairedTest(name="paired t", statistic=math.copysign(math.inf, mean), p_value=math.nan,
                          detail="undefined: every difference is the same")
    t = mean / (sd / math.sqrt(n))
    p = float(2 * stats.t.sf(abs(t), n - 1))
    return PairedTest(name="paired t", statistic=t, p_value=p, detail=f"{n - 1} df")


def sign_flip(differences: np.ndarray) -> PairedTest:
    """Two-sided sign-flip permutation test over scenarios (exact unless stated)."""
    d = np.abs(np.asarray(differences, dtype=float))
    observed = abs(float(np.sum(differences)))
    d = d[d > 0]
    n = len(d)
    if n == 0:
        p, how = 1.0, "all differences are 0"
    elif n <= EXACT_ENUMERATION_MAX_N:
        p, how = _enumerate(d, observed), f"exact, all 2^{n} sign assignments"
    else:
        grid = _grid(d)
        if grid is not None:
            p, how = _convolve(grid[0], observed * grid[1]), f"exact, 2^{n} sign assignments by convolution"
        else:
            p, how = _monte_carlo(d, observed), f"Monte Carlo, {MONTE_CARLO_DRAWS} draws, seed 0"
    return PairedTest(name="sign-flip permutation", statistic=float(np.sum(differences)), p_value=p,
                      detail=f"{how}; {n} non-zero differences")


def _sums(d: np.ndarray) -> np.ndarray:
    """All 2^len(d) signed sums of d."""
    sums = np.zeros(1)
    for x in d:
        sums = np.concatenate([sums + x, sums - x])
    return sums


def _enumerate(d: np.ndarray, observed: float) -> float:
    """Share of sign assignments with |sum| >= observed, counting pairs of half-sums."""
    half = len(d) // 2
    left, right = _sums(d[:half]), np.sort(_sums(d[half:]))
    cut = observed - _TOL * max(1.0, observed)
    if cut <= 0:
        return 1.0
    # |l + r| >= cut  <=>  r >= cut - l  or  r <= -cut - l (disjoint because cut > 0)
    upper = len(right) - np.searchsorted(right, cut - left, side="left")
    lower = np.searchsorted(right, -cut - left, side="right")
    return float(np.sum(upper + lower)) / (len(left) * len(right))


def _grid(d: np.ndarray) -> tuple[np.ndarray, float] | None:
    """(|d| as integers, scale) when every |d_j| * scale is an integer for a small scale."""
    for scale in (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 30, 36, 48, 60, 100, 120, 360, 1000, 2520):
        units = d * scale
        rounded = np.round(units)
        if np.all(np.abs(units - rounded) < 1e-6) and rounded.sum() <= GRID_MAX_TOTAL:
            return rounded.astype(np.int64), float(scale)
    return None


def _convolve(units: np.ndarray, observed: float) -> float:
    """Exact tail of |sum of +-units| by dynamic programming over the distribution of the sum."""
    total = int(units.sum())
    dist = np.zeros(2 * total + 1)
    dist[total] = 1.0
    for u in units:
        u = int(u)
        shifted = np.zeros_like(dist)
        shifted[u:] += dist[:-u] * 0.5
        shifted[:-u] += dist[u:] * 0.5
        dist = shifted
    sums = np.arange(-total, total + 1)
    return float(min(1.0, dist[np.abs(sums) >= round(observed) - 1e-6].sum()))


def _monte_carlo(d: np.ndarray, observed: float) -> float:
    rng = np.random.default_rng(0)
    hits = 0
    for start in range(0, MONTE_CARLO_DRAWS, 10_000):
        signs = rng.choice((-1.0, 1.0), size=(min(10_000, MONTE_CARLO_DRAWS - start), len(d)))
        hits += int(np.sum(np.abs(signs @ d) >= observed - _TOL * max(1.0, observed)))
    return (1 + hits) / (1 + MONTE_CARLO_DRAWS)
