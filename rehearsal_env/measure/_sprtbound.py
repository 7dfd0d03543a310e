"""The most any sequential test can save against the fixed design: Wald's SPRT bound.

A sequential test that declares "A differs from B" with error at most alpha (two-sided, alpha' = alpha / 2 per
side) and reaches power 1 - beta at a difference delta cannot, on average, stop sooner under that difference than
the sequential probability ratio test of "no difference" against "delta" with the same two error rates: Wald and
Wolfowitz (1948), "Optimum character of the sequential probability ratio test", Ann. Math. Statist. 19:326-339.
For pairs with mean difference delta and variance sigma^2 (normal, or any family near "no difference": the
log-likelihood ratio of one pair has mean I = delta^2 / (2 sigma^2) under the alternative), Wald's approximation
(boundaries ``a = ln((1 - beta) / alpha')`` and ``b = ln(beta / (1 - alpha'))``, overshoot ignored) gives::

    E_delta[N] = ((1 - beta) a + beta b) / I

while the fixed design needs ``n = (z_{1 - alpha/2} + z_{1 - beta})^2 sigma^2 / delta^2 = (z + z)^2 / (2 I)``
pairs for the same power. The ratio does not depend on delta or sigma::

    saving <= ((z_{1 - alpha/2} + z_power)^2 / 2)
              / (power ln(power / alpha') + (1 - power) ln((1 - power) / (1 - alpha')))

about 1.60 x at 80% power and 1.75 x at 90% (alpha = 5%): a saving of 2 x needs a power near 96%, whatever the
test. The SPRT knows delta and stops early for "no difference" too; a test that must also find a difference of
unknown size, or stops only at a budget when it does not find one, saves less. :func:`simulate_sprt` checks the
approximation by simulating the SPRT itself.

Where a chooser may give scenarios different shares of the pairs, the variance of the suite's mean difference can
fall from ``mean(sigma_j^2)`` per pair (every scenario equally, as the fixed design plays them) to
``mean(sigma_j)^2`` (Neyman's allocation, pairs in proportion to sigma_j, Neyman 1934, J. R. Statist. Soc. 97:558):
:func:`allocation_gain`, the factor by which that can raise the bound. Scenarios that both agents always pass or
always fail have sigma_j = 0: with half of them, the gain is about 2.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats

from ._sequential import ALPHA

STEPS = 200
"""Pairs simulated per chunk in :func:`simulate_sprt`."""


def _check(power: float, alpha: float) -> float:
    side = alpha / 2
    if not 0 < alpha < 1 or not side < power < 1:
        raise ValueError(f"expected 0 < alpha < 1 and alpha / 2 < power < 1; got alpha {alpha} and power {power}: "
                         "a power at or below the error per side is no evidence (pass a power above it)")
    return side


def sprt_expected_information(power: float, alpha: float = ALPHA) -> float:
    """Wald's ``(1 - beta) ln((1 - beta) / alpha') + beta ln(beta / (1 - alpha'))``: E[N] x I of the SPRT."""
    side = _check(power, alpha)
    return power * math.log(power / side) + (1 - power) * math.log((1 - power) / (1 - side))


def fixed_information(power: float, alpha: float = ALPHA) -> float:
    """``(z_{1 - alpha/2} + z_power)^2 / 2``: n x I of the fixed design with that power (two-sided alpha)."""
    _check(power, alpha)
    return float((stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)) ** 2 / 2)


def sprt_saving(power: float, alpha: float = ALPHA) -> float:
    """The fixed design's pairs over the SPRT's expected pairs at the same power and error: the most any sequential
    test can save (Wald's approximation, overshoot ignored)."""
    return fixed_information(power, alpha) / sprt_expected_information(power, alpha)


def allocation_gain(variances: np.ndarray | Sequence[float]) -> float:
    """``mean(sigma_j^2) / mean(sigma_j)^2``: how much a chooser that gives scenario j pairs in proportion to sigma_j
    (Neyman's allocation) can cut the variance of the suite's mean difference against every scenario equally."""
    sd = np.sqrt(np.clip(np.asarray(variances, dtype=float), 0.0, None))
    if not sd.size or not np.any(sd > 0):
        raise ValueError(f"expected per-scenario variances with at least one above 0; got {variances!r}: "
                         "a suite where no scenario can disagree cannot tell A from B")
    return float(np.mean(sd ** 2) / np.mean(sd) ** 2)


def simulate_sprt(power: float, alpha: float = ALPHA, shift: float = 0.2, replicates: int = 4000,
                  seed: int = 0) -> tuple[float, float, float]:
    """Simulate the SPRT of N(0, 1) against N(shift, 1) with Wald's boundaries for ``power`` and alpha / 2 per side:
    (power reached, mean pairs under the shift, the fixed design's pairs for the power reached)."""
    side = _check(power, alpha)
    a, b = math.log(power / side), math.log((1 - power) / (1 - side))
    rng = np.random.default_rng(seed)
    llr = np.zeros(replicates)
    steps = np.zeros(replicates)
    upper = np.zeros(replicates, dtype=bool)
    open_ = np.ones(replicates, dtype=bool)
    while open_.any():
        rows = np.flatnonzero(open_)
        path = llr[rows, None] + np.cumsum(shift * (rng.normal(shift, 1.0, (len(rows), STEPS)) - shift / 2), axis=1)
        out = (path >= a) | (path <= b)
        hit = out.any(axis=1)
        first = np.where(hit, out.argmax(axis=1), STEPS - 1)
        steps[rows] += first + 1
        llr[rows] = path[np.arange(len(rows)), first]
        upper[rows[hit]] = path[hit, first[hit]] >= a
        open_[rows[hit]] = False
    reached = float(upper.mean())
    fixed = 2 * fixed_information(min(reached, 1 - 0.5 / replicates), alpha) / shift ** 2
    return reached, float(steps.mean()), fixed
