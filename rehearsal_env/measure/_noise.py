"""The noise split by its source: each source's share of the outcome variance, from forked resamples.

The design (docs/measure.md): take base episodes; fork each at a turn k and play R branches from there that
resample only one source (the agent's sampling, the customer, the faults and stress randomness), everything else as
the base had it, and R branches that resample all of them. Within one base and one source, the branches differ
only by that source, so the variance of their outcomes is that source's conditional variance there; averaged over
bases it estimates ``V_s = E[Var_s(y | every other source)]``. The branches resampling everything estimate the
total ``V = E[Var(y)]`` from the fork on. Each source's share is ``V_s / V``; the rest, ``1 - sum V_s / V``, is the
sources' interaction (positive when they add up, e.g. a fault that only matters when the customer changes the
request). Infrastructure is a source of its own: the branches not scored, whose share is the not-scored
indicator's variance among the all-source branches over that variance plus ``V``. Intervals: the percentile
bootstrap over base episodes (a base and all its branches resampled together).

:func:`noise_shares` computes them from branch outcomes; :func:`simulated_branches` draws branches from a model
whose true shares are known exactly (:func:`true_shares`), which is how the estimator is checked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

SOURCES = ("agent", "customer", "faults")
"""The sources resampled one at a time; ``all`` names the branches that resample every one."""
ALL = "all"
"""The branches that resample every source (the total variance)."""
INFRASTRUCTURE = "infrastructure"
"""The not-scored branches' share."""


MAX_BRANCHES = 64
"""Most branches per source and base."""
MAX_FORK_TURN = 200
"""Latest turn to fork at."""


@dataclass(frozen=True)
class NoisePlan:
    """How many forked resamples to play, and where."""

    branches: int = 4
    """Branches per source and base episode (at least 2: a variance needs two)."""
    fork_turn: int = 0
    """The turn after which the branches part (0: right after reset, before the agent's first call)."""
    seed: int = 0
    """Seeds every branch's resampled seeds (numpy's ``default_rng([seed, base, source, branch])``)."""

    def __post_init__(self) -> None:
        if not 2 <= self.branches <= MAX_BRANCHES:
            raise ValueError(f"expected 2 to {MAX_BRANCHES} branches per source, got {self.branches}")
        if not 0 <= self.fork_turn <= MAX_FORK_TURN:
            raise ValueError(f"expected a fork turn from 0 to {MAX_FORK_TURN}, got {self.fork_turn}")


@dataclass(frozen=True)
class Share:
    """One source's share of the outcome variance, with its 95% bootstrap interval."""

    source: str
    """``agent``, ``customer``, ``faults``, ``interaction`` or ``infrastructure``."""
    share: float
    """Its share of the total variance."""
    low: float
    """Lower end of the 95% interval."""
    high: float
    """Upper end."""


def _within(values: np.ndarray) -> float:
    """Mean over bases (rows) of the unbiased variance among a base's branches (columns; NaN: not scored); bases
    with fewer than 2 scored branches are left out."""
    ok = (~np.isnan(values)).sum(axis=1) >= 2
    if not ok.any():
        return float("nan")
    return float(np.mean(np.nanvar(values[ok], axis=1, ddof=1)))


def _shares(branches: Mapping[str, np.ndarray], rows: np.ndarray) -> dict[str, float]:
    total = _within(branches[ALL][rows])
    out = {s: _within(branches[s][rows]) / total if total > 0 else float("nan") for s in SOURCES if s in branches}
    out["interaction"] = 1.0 - sum(out.values())
    lost = np.isnan(branches[ALL][rows]).astype(float)
    infra = _within(lost)
    out[INFRASTRUCTURE] = infra / (infra + total) if infra + total > 0 else 0.0
    return out


def noise_shares(branches: Mapping[str, np.ndarray], *, resamples: int = 2000, seed: int = 0) -> tuple[Share, ...]:
    """Each source's share of the outcome variance with its interval; ``branches[source]`` is bases x R outcomes
    (1 verified, 0 not, NaN not scored) of the branches resampling only that source (``all``: every source).

    Raises:
        ValueError: no ``all`` branches, arrays of different numbers of bases, or fewer than 2 bases.
    """
    if ALL not in branches:
        raise ValueError(f"expected branches resampling every source under {ALL!r}; got {sorted(branches)}")
    bases = {len(v) for v in branches.values()}
    if len(bases) != 1 or bases.pop() < 2:
        raise ValueError(f"expected the same number (>= 2) of base episodes for every source; got "
                         f"{ {k: len(v) for k, v in branches.items()} }")
    arrays = {k: np.asarray(v, dtype=float) for k, v in branches.items()}
    n = len(arrays[ALL])
    point = _shares(arrays, np.arange(n))
    rng = np.random.default_rng(seed)
    boot = [_shares(arrays, rng.integers(0, n, n)) for _ in range(resamples)]
    out = []
    for source, value in point.items():
        draws = np.array([b[source] for b in boot])
        draws = draws[~np.isnan(draws)]
        low, high = (np.percentile(draws, [2.5, 97.5]) if len(draws) else (np.nan, np.nan))
        out.append(Share(source, value, float(low), float(high)))
    return tuple(out)


def true_shares(sd: Mapping[str, float], level_sd: float, draws: int = 400_000, seed: int = 1) -> dict[str, float]:
    """The exact shares (to Monte Carlo error of ``draws``) of the model :func:`simulated_branches` draws from:
    ``y = 1[z + sum_s e_s > 0]``, z ~ N(0, level_sd^2) per base, e_s ~ N(0, sd_s^2) per source."""
    rng = np.random.default_rng(seed)
    z = rng.normal(0, level_sd, draws)
    e = {s: rng.normal(0, sd[s], draws) for s in SOURCES}
    total_sd = np.sqrt(sum(sd[s] ** 2 for s in SOURCES))
    q = stats.norm.cdf(z / total_sd)
    total = float(np.mean(q * (1 - q)))
    out = {}
    for s in SOURCES:
        rest = z + sum(e[o] for o in SOURCES if o != s)
        p = stats.norm.cdf(rest / sd[s]) if sd[s] > 0 else (rest > 0).astype(float)
        out[s] = float(np.mean(p * (1 - p))) / total
    out["interaction"] = 1.0 - sum(out.values())
    return out


def simulated_branches(rng: np.random.Generator, bases: int, per_source: int, sd: Mapping[str, float],
                       level_sd: float, not_scored: float = 0.0) -> dict[str, np.ndarray]:
    """Branches of ``bases`` base episodes drawn from the model of :func:`true_shares`: per source, ``per_source``
    branches resampling only it (the others at the base's values), and as many resampling all; each branch is not
    scored (NaN) with chance ``not_scored``."""
    z = rng.normal(0, level_sd, (bases, 1))
    base = {s: rng.normal(0, sd[s], (bases, 1)) for s in SOURCES}
    out: dict[str, np.ndarray] = {}
    for name in (*SOURCES, ALL):
        e = {s: (rng.normal(0, sd[s], (bases, per_source)) if name in (s, ALL) else base[s]) for s in SOURCES}
        y = ((z + sum(e.values())) > 0).astype(float)
        y[rng.random(y.shape) < not_scored] = np.nan
        out[name] = y
    return out


def format_noise(shares: Sequence[Share], truth: Mapping[str, float] | None = None) -> str:
    """One line per source: share and interval (and the true share when known)."""
    lines = [f"  {'source':<16}{'share':>7}  95% interval" + ("      true" if truth else "")]
    for s in shares:
        true = f"  {truth[s.source]:>8.3f}" if truth and s.source in truth else ""
        lines.append(f"  {s.source:<16}{s.share:>7.3f}  [{s.low:.3f}, {s.high:.3f}]{true}")
    return "\n".join(lines)


def plot_noise(shares: Sequence[Share], path: str, title: str = "outcome variance by source") -> str:
    """Draw each source's share with its interval as a bar chart into ``path`` (PNG); return the path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.2))
    names = [s.source for s in shares]
    values = np.array([s.share for s in shares])
    err = np.array([[s.share - s.low for s in shares], [s.high - s.share for s in shares]])
    ax.bar(names, values, yerr=np.abs(err), capsize=4, color="#4c72b0")
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_ylabel("share of the variance")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
