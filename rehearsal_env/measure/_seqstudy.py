"""The sequential study: does deciding a comparison as the pairs come in keep its error rates, and what does it save?

Suites are simulated as in the coverage study (:mod:`._coverage`): per replicate a fresh suite of n
scenarios whose success probabilities p_j come from one of its four populations. A and B play the same
scenarios in the order ``rehearsal compare`` uses (a fresh seeded permutation per round, every scenario before
any repeats), a look after every batch of :data:`BATCH` pairs, up to a budget of ``BUDGET_MULTIPLE x n x K``
pairs, where n x K is the fixed design the sequential one replaces (every scenario K times). The decisions are
computed by the very kernels ``rehearsal compare`` runs (:mod:`._sequential`): the betting interval, the bets
and the floor estimated from the pairs so far.

* Under no difference (B = A on every scenario): the share of replicates that ever declare a difference,
  next to the naive alternative, a paired t test on the pairs so far checked after every batch at 0.05,
  whose error grows with every look; and how often the sequence ends "within the floor".
* At a true difference equal to the floor (p_j ~ U(0.1, 0.6) fixed, A = B + the floor RF(K) of the fixed n x K
  design computed from the true variances, as in the coverage study's floor check), at 0 and at twice the
  floor: the power (share declaring the difference), the share wrongly ending "within the floor", and the
  mean pairs (episodes per agent) to a decision. Against it: the pairs a fixed design needs for the same
  power at that difference, ``n K ((z_0.975 + z_power) / Z80)^2`` (the floor's normal approximation: n x K
  pairs give 80% at the floor), and the ratio of the two, the saving.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from ._coverage import POPULATIONS, SCENARIOS, Population
from ._floor import Z80, paired_floor
from ._sequential import (
    ALPHA,
    BATCH_PAIRS,
    BUDGET_MULTIPLE,
    THETA,
    TRUNCATION,
    bets,
    estimated_floor,
    log_capital,
)

BATCH = BATCH_PAIRS
"""Pairs per batch: a look after each (``rehearsal compare``'s default)."""
DESIGNS = (1, 3, 5)
"""K of the fixed design the sequential one replaces."""
SHIFTS = (0.0, 1.0, 2.0)
"""True differences studied for power, in units of the floor."""
GOAL = 2.0
"""The saving aimed at: the fixed design needs this many times the sequential one's mean pairs."""


@dataclass(frozen=True)
class NullCell:
    """No difference between A and B: how often is one declared?"""

    population: str
    """Population of p_j."""
    n: int
    """Scenarios."""
    design: int
    """K of the fixed design; the budget is BUDGET_MULTIPLE x n x K pairs."""
    sequential: float
    """Share of replicates whose anytime-valid interval ever excluded 0 (should be <= alpha)."""
    naive: float
    """Share where a paired t test on the pairs so far, checked after every batch, ever had p < 0.05."""
    within: float
    """Share that stopped "within the floor" (the right decision here)."""
    mean_pairs: float
    """Mean pairs (episodes per agent) played to a decision or the budget."""


@dataclass(frozen=True)
class PowerRow:
    """A true difference of ``shift`` floors: how often, and how soon, is it decided?"""

    n: int
    """Scenarios."""
    design: int
    """K of the fixed design."""
    budget_multiple: int
    """The budget, in units of n x K pairs."""
    floor: float
    """RF(K) of the fixed n x K design from the true variances."""
    shift: float
    """The true difference A - B, in floors."""
    power: float
    """Share of replicates that declared a difference."""
    within: float
    """Share that stopped "within the floor" (wrong when shift > 0)."""
    mean_pairs: float
    """Mean pairs (episodes per agent) to a decision or the budget."""
    fixed_pairs: float | None
    """Pairs a fixed design needs for the same power at this difference (None at shift 0 or power <= alpha;
    a power of 100% counts as 1 - 1/(2 x replicates), in the fixed design's favour)."""
    saving: float | None
    """fixed_pairs / mean_pairs."""


@dataclass(frozen=True)
class SequentialStudy:
    """The whole study."""

    replicates: int
    """Simulated comparisons per cell."""
    seed: int
    """Seed of numpy's default_rng."""
    nulls: tuple[NullCell, ...]
    """Population x scenarios x design, no difference."""
    power: tuple[PowerRow, ...]
    """Design x budget x true difference."""


def _outcomes(rng: np.random.Generator, pa: np.ndarray, pb: np.ndarray, rounds: int) -> np.ndarray:
    """Paired differences (replicates x pairs) in play order: a fresh permutation of the scenarios per round."""
    reps, n = pa.shape
    order = np.concatenate([rng.permuted(np.tile(np.arange(n), (reps, 1)), axis=1) for _ in range(rounds)], axis=1)
    ya = rng.random(order.shape) < np.take_along_axis(pa, order, axis=1)
    yb = rng.random(order.shape) < np.take_along_axis(pb, order, axis=1)
    return ya.astype(float) - yb.astype(float)


def _look_ends(total: int) -> np.ndarray:
    ends = np.arange(BATCH, total + 1, BATCH)
    return ends if len(ends) and ends[-1] == total else np.append(ends, total)


def _final_logk(x: np.ndarray, lam: np.ndarray, m: np.ndarray) -> np.ndarray:
    """log K_t(m_r) over all of each row r of ``x`` (m per row)."""
    mm = m[:, None]
    plus = np.log1p(np.minimum(lam, TRUNCATION / mm) * (x - mm)).sum(axis=1)
    minus = np.log1p(-np.minimum(lam, TRUNCATION / (1 - mm)) * (x - mm)).sum(axis=1)
    return np.logaddexp(math.log(THETA) + plus, math.log(1 - THETA) + minus)


def simulate(d: np.ndarray, design_pairs: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(declared a difference, ended within the floor, pairs played, naive t ever rejected) per replicate."""
    reps, total = d.shape
    x = (d + 1) / 2
    lam = bets(x, None, design_pairs)
    ends = _look_ends(total)
    cut = math.log(1 / ALPHA)
    differ = log_capital(x, lam, 0.5)[:, ends - 1] >= cut
    t = np.arange(1, total + 1)
    mean = (0.5 + np.cumsum(x, axis=1)) / (t + 1)
    var_after = (0.25 + np.cumsum((x - mean) ** 2, axis=1)) / (t + 1)
    floors = estimated_floor(var_after[:, ends - 1], design_pairs)
    floors = np.where(np.cumsum(d != 0, axis=1)[:, ends - 1] > 0, floors, np.nan)  # only ties: floor unknown
    within = np.zeros_like(differ)
    undecided = np.ones(reps, dtype=bool)
    for i, end in enumerate(ends):
        rows = np.flatnonzero(undecided & ~differ[:, i] & ~np.isnan(floors[:, i]))
        if len(rows):
            f = np.minimum(floors[rows, i], 0.999)
            xs, ls = x[rows, :end], lam[rows, :end]
            inside = (_final_logk(xs, ls, (1 + f) / 2) >= cut) & (_final_logk(xs, ls, (1 - f) / 2) >= cut)
            within[rows, i] = inside
        undecided &= ~(differ[:, i] | within[:, i])
    decided = differ | within
    first = np.where(decided.any(axis=1), decided.argmax(axis=1), len(ends) - 1)
    row = np.arange(reps)
    said_differ = differ[row, first] & decided[row, first]
    said_within = within[row, first] & ~said_differ & decided[row, first]
    s1, s2 = np.cumsum(d, axis=1), np.cumsum(d * d, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        m = s1 / t
        sd = np.sqrt(np.maximum(s2 - t * m * m, 0) / np.maximum(t - 1, 1))
        p = 2 * stats.t.sf(np.abs(m / (sd / np.sqrt(t))), np.maximum(t - 1, 1))
    naive = np.nan_to_num(p[:, ends - 1], nan=1.0) < 0.05
    return said_differ, said_within, ends[first], naive.any(axis=1)


def _true_floor(p: np.ndarray, k: int) -> float:
    """RF(K) of n x K pairs for B = p, A = p + floor (fixed point, as in the coverage study's floor check)."""
    delta = 0.2
    for _ in range(30):
        delta = paired_floor(float(np.mean(p * (1 - p))), 1 / k, float(np.mean((p + delta) * (1 - p - delta))),
                             1 / k, len(p))
    return delta


def _null_cell(rng: np.random.Generator, pop: Population, n: int, k: int, reps: int) -> NullCell:
    p = pop.draw(rng, (reps, n))
    d = _outcomes(rng, p, p, BUDGET_MULTIPLE * k)
    differ, within, pairs, naive = simulate(d, n * k)
    return NullCell(pop.name, n, k, float(differ.mean()), float(naive.mean()), float(within.mean()),
                    float(pairs.mean()))


def _power_rows(rng: np.random.Generator, n: int, k: int, reps: int, multiples: tuple[int, ...]) -> list[PowerRow]:
    p = rng.uniform(0.1, 0.6, n)
    floor = _true_floor(p, k)
    out = []
    for multiple in multiples:
        for shift in SHIFTS:
            pa = np.broadcast_to(np.clip(p + shift * floor, 0, 1), (reps, n))
            d = _outcomes(rng, pa, np.broadcast_to(p, (reps, n)), multiple * k)
            differ, within, pairs, _ = simulate(d, n * k)
            power, mean_pairs = float(differ.mean()), float(pairs.mean())
            fixed = None
            if shift > 0 and power > ALPHA:  # every replicate decided: credit the fixed design with 1 - 1/(2R)
                reached = min(power, 1 - 0.5 / reps)
                fixed = n * k * ((stats.norm.ppf(1 - ALPHA / 2) + stats.norm.ppf(reached)) / (Z80 * shift)) ** 2
            out.append(PowerRow(n, k, multiple, floor, shift, power, float(within.mean()), mean_pairs, fixed,
                                None if fixed is None else fixed / mean_pairs))
    return out


def sequential_study(replicates: int = 2000, seed: int = 12, scenarios: tuple[int, ...] = SCENARIOS,
                     designs: tuple[int, ...] = DESIGNS, multiples: tuple[int, ...] = (2, 4),
                     populations: tuple[Population, ...] = POPULATIONS) -> SequentialStudy:
    """Run the study (seeded); a small grid (few scenarios, designs, replicates) takes seconds."""
    rng = np.random.default_rng(seed)
    nulls = [_null_cell(rng, pop, n, k, replicates) for pop in populations for n in scenarios for k in designs]
    power = [row for n in scenarios for k in designs for row in _power_rows(rng, n, k, replicates, multiples)]
    return SequentialStudy(replicates=replicates, seed=seed, nulls=tuple(nulls), power=tuple(power))


def _pct(x: float) -> str:
    return f"{x:.1%}"


def format_sequential(study: SequentialStudy, markdown: bool = False) -> str:
    """The two tables: error under no difference, then power and mean episodes against the fixed design."""
    lines = [f"Sequential comparison: {study.replicates} simulated comparisons per cell, seed {study.seed}; a look "
             f"after every {BATCH} pairs, budget {BUDGET_MULTIPLE} x n x K pairs; alpha {ALPHA}", ""]
    designs = sorted({c.design for c in study.nulls})
    head = ["population", "n", *(f"K = {k}: sequential / naive / within" for k in designs)]
    if markdown:
        lines += [f"| {' | '.join(head)} |", "|" + "---|" * len(head)]
    else:
        lines.append("No difference: share that ever declared one (sequential <= 5% expected; naive t after every "
                     "batch), and share ending within the floor")
    by = {(c.population, c.n, c.design): c for c in study.nulls}
    for pop in dict.fromkeys(c.population for c in study.nulls):
        for n in sorted({c.n for c in study.nulls}):
            cells = [by[(pop, n, k)] for k in designs if (pop, n, k) in by]
            row = [f"{_pct(c.sequential)} / {_pct(c.naive)} / {_pct(c.within)}" for c in cells]
            lines.append(f"| {pop} | {n} | {' | '.join(row)} |" if markdown else
                         f"  {pop:<26}{n:>5}  " + "  ".join(f"{r:<24}" for r in row))
    worst = max(study.nulls, key=lambda c: c.sequential)
    lines += ["", f"largest sequential error {_pct(worst.sequential)} ({worst.population}, n {worst.n}, K "
              f"{worst.design}); naive t up to {_pct(max(c.naive for c in study.nulls))}", ""]
    head = ["n", "K", "budget", "floor", "true A - B", "power", "within (wrong)", "mean pairs", "fixed n x K",
            "fixed at equal power", "saving"]
    if markdown:
        lines += [f"| {' | '.join(head)} |", "|" + "---|" * len(head)]
    else:
        lines.append("A true difference of 0, 1 or 2 floors (p_j ~ U(0.1, 0.6)): power, mean pairs to a decision, "
                     "and the pairs a fixed design needs for the same power")
        lines.append("  " + "  ".join(head))
    for r in study.power:
        row_cells = [str(r.n), str(r.design), f"{r.budget_multiple} x", f"{r.floor:.3f}",
                 f"{r.shift:g} floor ({r.shift * r.floor:.3f})", _pct(r.power), _pct(r.within), f"{r.mean_pairs:.1f}",
                 str(r.n * r.design), "-" if r.fixed_pairs is None else f"{r.fixed_pairs:.1f}",
                 "-" if r.saving is None else f"{r.saving:.2f} x"]
        lines.append(f"| {' | '.join(row_cells)} |" if markdown else "  " + "  ".join(row_cells))
    savings = [r.saving for r in study.power if r.shift == 1.0 and r.saving is not None]
    if savings:
        met = sum(s >= GOAL for s in savings)
        lines += ["", f"at a difference equal to the floor the saving is {min(savings):.2f} x to {max(savings):.2f} x; "
                  f"the goal of {GOAL:g} x is met in {met} of {len(savings)} designs"]
    return "\n".join(lines)
