"""pass^k and pass@k: how often all, or at least one, of k attempts at a scenario succeed.

For one scenario with n scored samples of which c verified, the unbiased estimators are

* pass^k = C(c, k) / C(n, k)          (all k succeed; Yao et al., tau-bench, arXiv 2406.12045)
* pass@k = 1 - C(n - c, k) / C(n, k)  (at least one succeeds; Chen et al. 2021, arXiv 2107.03374)

The suite value is the mean over scenarios. A scenario with fewer than k scored samples has no
estimate at that k and is left out of it (the count is reported). The interval treats the
per-scenario estimates like the scenario means of a rate (see :mod:`._intervals`): Wilson at the
effective sample size, so that pass^1 and pass@1 carry exactly the verified rate's interval.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import comb

import numpy as np

from ._intervals import Estimate, rate_estimate


@dataclass(frozen=True)
class PassK:
    """pass^k and pass@k at one k."""

    k: int
    """Attempts."""
    pass_all: Estimate
    """pass^k: the chance that all k attempts at a scenario are verified, averaged over scenarios."""
    pass_any: Estimate
    """pass@k: the chance that at least one of k attempts is verified, averaged over scenarios."""
    scenarios_left_out: int
    """Scenarios with fewer than k scored episodes, which have no estimate at this k."""


def pass_all(n: int, c: int, k: int) -> float:
    """C(c, k) / C(n, k) for one scenario (requires 1 <= k <= n)."""
    return comb(c, k) / comb(n, k)


def pass_any(n: int, c: int, k: int) -> float:
    """1 - C(n - c, k) / C(n, k) for one scenario (requires 1 <= k <= n)."""
    return 1.0 - comb(n - c, k) / comb(n, k)


def pass_k_table(verified: Sequence[np.ndarray], max_k: int) -> tuple[PassK, ...]:
    """pass^k and pass@k for k = 1..max_k from each scenario's 0/1 verified outcomes."""
    rows = []
    for k in range(1, max_k + 1):
        usable = [v for v in verified if len(v) >= k]
        if not usable:
            break
        counts = [(len(v), int(np.sum(v))) for v in usable]
        episodes = sum(n for n, _ in counts)
        all_k = [np.array([pass_all(n, c, k)]) for n, c in counts]
        any_k = [np.array([pass_any(n, c, k)]) for n, c in counts]
        rows.append(PassK(
            k=k,
            pass_all=rate_estimate(all_k, n_episodes=episodes),
            pass_any=rate_estimate(any_k, n_episodes=episodes),
            scenarios_left_out=len(verified) - len(usable),
        ))
    return tuple(rows)
