"""The sequential study again, with informative selection (:mod:`._adaptive`): errors, power, episodes saved.

The same simulation as :mod:`._seqstudy` (the very kernels ``rehearsal compare`` runs, a look after every
:data:`~._seqstudy.BATCH` pairs, a budget of 2 x n x K pairs), with the pairs chosen by
:func:`._adaptive.pick` after the first round instead of in the seeded order:

* **No difference** (B = A on every scenario), the coverage study's four populations of p_j, n = 10/30/100, K =
  1/3/5, informative selection with and without an item model: the share of comparisons that ever declared a
  difference (at most 5% is the guarantee), and the share ending "within the floor".
* **A difference of one floor** (the floor RF(K) of the fixed n x K design from the true variances), on two kinds
  of suite: every scenario informative (p_j ~ U(0.1, 0.6), A = B + the floor), and a suite where half the
  scenarios tell nothing (a quarter always passed, a quarter always failed, by both agents, as in suites that
  separate few agents), the difference carried by the other half (twice the floor there, one floor on the suite).
  For the seeded order, for informative selection, and for informative selection with an item model from an
  earlier run of the world (each scenario played 3 times by an agent like B, :func:`._adaptive.prior_from_rates`):
  the power, the share wrongly ending "within the floor", the mean pairs to a decision, and the saving against the
  pairs a fixed design needs for the same power (as in :mod:`._seqstudy`). Beside it, the most any sequential test
  with the same error rates could save at that power (:func:`._sprtbound.sprt_saving`, Wald's SPRT bound), and that
  bound times the most that giving scenarios unequal shares of the pairs can gain (:func:`._sprtbound.allocation_gain`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from ._adaptive import adaptive_outcomes, prior_from_rates
from ._coverage import POPULATIONS, SCENARIOS
from ._floor import Z80
from ._seqstudy import BATCH, DESIGNS, GOAL, _outcomes, _true_floor, simulate
from ._sequential import ALPHA, BUDGET_MULTIPLE
from ._sprtbound import allocation_gain, sprt_saving

SUITES = ("every scenario informative", "half the scenarios tell nothing")
"""The two kinds of suite of the power rows."""
DESIGNS_OF = ("seeded order", "informative", "informative + item model")
"""The three ways of choosing the next pair."""
EARLIER = 3
"""Episodes per scenario of the earlier run the item model is fitted on."""


@dataclass(frozen=True)
class AdaptiveNull:
    """No difference, informative selection: how often is one declared?"""

    population: str
    """Population of p_j."""
    n: int
    """Scenarios."""
    design: int
    """K of the fixed design (budget 2 x n x K)."""
    error: float
    """Share of comparisons that ever declared a difference (the guarantee: at most alpha)."""
    within: float
    """Share ending "within the floor"."""
    mean_pairs: float
    """Mean pairs played."""
    chooser: str = "informative"
    """One of :data:`DESIGNS_OF` but the seeded order (whose error the sequential study measures)."""


@dataclass(frozen=True)
class AdaptivePower:
    """A difference of one floor: power and pairs of one way of choosing."""

    suite: str
    """One of :data:`SUITES`."""
    n: int
    """Scenarios."""
    design: int
    """K of the fixed design."""
    chooser: str
    """One of :data:`DESIGNS_OF`."""
    power: float
    """Share that declared the difference."""
    within: float
    """Share wrongly ending "within the floor"."""
    mean_pairs: float
    """Mean pairs to a decision or the budget."""
    saving: float | None
    """Pairs a fixed design needs for the same power / mean_pairs (None at power <= alpha)."""
    sprt_bound: float | None = None
    """The most any sequential test with the same error rates can save at this power (Wald's SPRT bound, the power
    credited as for ``saving``; None at power <= alpha)."""
    allocation_bound: float | None = None
    """``sprt_bound`` times the suite's :func:`._sprtbound.allocation_gain`: the most a test that may also give
    scenarios unequal shares of the pairs can save (None for the seeded order and at power <= alpha)."""


@dataclass(frozen=True)
class AdaptiveStudy:
    """The whole study."""

    replicates: int
    """Simulated comparisons per cell."""
    seed: int
    """Seed of numpy's default_rng."""
    nulls: tuple[AdaptiveNull, ...]
    """Population x scenarios x design, no difference."""
    power: tuple[AdaptivePower, ...]
    """Suite x scenarios x design x chooser, a difference of one floor."""


def _suite(rng: np.random.Generator, kind: str, n: int) -> np.ndarray:
    p = rng.uniform(0.1, 0.6, n)
    if kind == SUITES[1]:
        quarter = n // 4
        p[:quarter], p[quarter:2 * quarter] = 1.0, 0.0
    return p


def _power(rng: np.random.Generator, kind: str, n: int, k: int, reps: int) -> list[AdaptivePower]:
    p = _suite(rng, kind, n)
    told = (p > 0) & (p < 1)
    floor = _true_floor(p, k)
    shift = np.where(told, floor * n / told.sum(), 0.0)  # one floor on the suite, carried by the informative ones
    pa, pb = (np.broadcast_to(np.clip(x, 0, 1), (reps, n)) for x in (p + shift, p))
    earlier = rng.binomial(EARLIER, p) / EARLIER  # an earlier run of an agent like B
    total = BUDGET_MULTIPLE * n * k
    gain = allocation_gain(pa[0] * (1 - pa[0]) + pb[0] * (1 - pb[0]))
    out = []
    for chooser in DESIGNS_OF:
        if chooser == DESIGNS_OF[0]:
            d = _outcomes(rng, pa, pb, BUDGET_MULTIPLE * k)
        else:
            prior = prior_from_rates(earlier, [EARLIER] * n) if chooser == DESIGNS_OF[2] else None
            d = adaptive_outcomes(rng, pa, pb, total, BATCH, prior)
        differ, within, pairs, _ = simulate(d, n * k)
        power, mean_pairs = float(differ.mean()), float(pairs.mean())
        saving = bound = allocated = None
        if power > ALPHA:
            reached = min(power, 1 - 0.5 / reps)
            fixed = n * k * ((stats.norm.ppf(1 - ALPHA / 2) + stats.norm.ppf(reached)) / Z80) ** 2
            saving, bound = fixed / mean_pairs, sprt_saving(reached)
            allocated = None if chooser == DESIGNS_OF[0] else bound * gain
        out.append(AdaptivePower(kind, n, k, chooser, power, float(within.mean()), mean_pairs, saving, bound,
                                 allocated))
    return out


def adaptive_study(replicates: int = 1000, seed: int = 35, scenarios: tuple[int, ...] = SCENARIOS,
                   designs: tuple[int, ...] = DESIGNS) -> AdaptiveStudy:
    """Run the study (seeded); a small grid takes seconds."""
    rng = np.random.default_rng(seed)
    nulls = []
    for pop in POPULATIONS:
        for n in scenarios:
            for k in designs:
                for chooser in DESIGNS_OF[1:]:
                    p = pop.draw(rng, (replicates, n))
                    prior = None
                    if chooser == DESIGNS_OF[2]:
                        prior = prior_from_rates(rng.binomial(EARLIER, p) / EARLIER, np.full(p.shape, EARLIER))
                    d = adaptive_outcomes(rng, p, p, BUDGET_MULTIPLE * n * k, BATCH, prior)
                    differ, within, pairs, _ = simulate(d, n * k)
                    nulls.append(AdaptiveNull(pop.name, n, k, float(differ.mean()), float(within.mean()),
                                              float(pairs.mean()), chooser))
    power = [row for kind in SUITES for n in scenarios for k in designs
             for row in _power(rng, kind, n, k, replicates)]
    return AdaptiveStudy(replicates, seed, tuple(nulls), tuple(power))


def format_adaptive(study: AdaptiveStudy, markdown: bool = False) -> str:
    """The two tables (errors under no difference; power, pairs and saving at one floor) and the goal's count."""
    def table(head: list[str], rows: list[list[str]]) -> list[str]:
        if markdown:
            return [f"| {' | '.join(head)} |", "|" + "---|" * len(head), *(f"| {' | '.join(r)} |" for r in rows)]
        return ["  " + "  ".join(head), *("  " + "  ".join(r) for r in rows)]

    lines = [f"Informative selection: {study.replicates} simulated comparisons per cell, seed {study.seed}; a look "
             f"after every {BATCH} pairs, budget {BUDGET_MULTIPLE} x n x K pairs; alpha {ALPHA}", ""]
    def times(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f} x"

    lines += table(["population", "n", "K", "chooser", "declared a difference (error)", "within the floor",
                    "mean pairs"],
                   [[c.population, str(c.n), str(c.design), c.chooser, f"{c.error:.1%}", f"{c.within:.1%}",
                     f"{c.mean_pairs:.1f}"] for c in study.nulls])
    worst = max(study.nulls, key=lambda c: c.error)
    lines += ["", f"largest error {worst.error:.1%} ({worst.population}, n {worst.n}, K {worst.design}, "
              f"{worst.chooser})", ""]
    lines += table(["suite", "n", "K", "chooser", "power", "within (wrong)", "mean pairs", "saving", "SPRT bound",
                    "with allocation"],
                   [[r.suite, str(r.n), str(r.design), r.chooser, f"{r.power:.1%}", f"{r.within:.1%}",
                     f"{r.mean_pairs:.1f}", times(r.saving), times(r.sprt_bound), times(r.allocation_bound)]
                    for r in study.power])
    lines.append("")
    for chooser in DESIGNS_OF:
        for suite in SUITES:
            rows = [r for r in study.power if r.chooser == chooser and r.suite == suite]
            met = sum(r.saving is not None and r.saving >= GOAL for r in rows)
            bound = [r.allocation_bound if r.allocation_bound is not None else r.sprt_bound for r in rows]
            beyond = sum(b is None or b < GOAL for b in bound)
            lines.append(f"{chooser}, {suite}: the {GOAL:g} x saving is met in {met} of {len(rows)} designs; "
                         f"beyond any sequential test at the power reached (bound below {GOAL:g} x) in {beyond}")
    return "\n".join(lines)
