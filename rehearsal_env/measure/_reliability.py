"""Reliability: do repeats agree, per category, and do checkpoints differ category by category?

* Consistency: the share of scenarios with at least two scored repeats whose repeats all agree (all verified,
  or none), with the Wilson interval over those scenarios (one 0/1 value per scenario, so n is the
  scenarios). pass^k (:mod:`._passk`) is the graded form: the chance that k attempts all succeed.
* Per category (the scenario's ``category`` in the records): the verified rate with its interval, the
  scenario as the unit (:func:`._intervals.rate_estimate`).
* Between two checkpoints, per category: the paired difference of the verified rate over the category's
  scenarios scored in both runs, its interval (:func:`._intervals.difference_bounds`) and the deciding paired
  test of :mod:`._paired` (exact McNemar with one repeat, else the exact sign-flip test), then Holm's step-down
  correction over the categories (Holm 1979, Scand. J. Statist. 6:65), which keeps the chance of any false
  "differs" at 5% across all of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pyarrow.dataset as ds

from ._decision import filled
from ._floor import ALPHA
from ._intervals import Estimate, difference_bounds, rate_estimate
from ._load import AgentRun
from ._paired import PairedTest, mcnemar_exact, sign_flip

UNCATEGORISED = "(none)"
"""The category of a scenario whose records name none."""


@dataclass(frozen=True)
class CategoryRate:
    """One category's verified rate."""

    category: str
    """The scenarios' category."""
    verified: Estimate
    """Verified rate over its scenarios, the scenario as the unit."""


@dataclass(frozen=True)
class CategoryComparison:
    """One category's verified rate, A against B, paired by scenario."""

    category: str
    """The scenarios' category."""
    n_paired: int
    """Scenarios of the category scored in both runs."""
    difference: float
    """A - B: mean of the per-scenario differences."""
    low: float
    """Lower end of the 95% interval of the difference (not corrected for multiplicity)."""
    high: float
    """Upper end of it."""
    test: PairedTest
    """The deciding paired test."""
    p_holm: float
    """Its p-value after Holm's correction over the categories."""
    significant: bool
    """p_holm < 0.05, and, where episodes were not scored, the same with every not-scored episode a failure of A
    and a success of B and with the reverse (in the same direction)."""
    not_decided: bool = False
    """The not-scored episodes, counted either way, decide this category differently (then not ``significant``)."""


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (monotone, capped at 1), in the order given."""
    p = np.asarray(p_values, dtype=float)
    m = len(p)
    order = np.argsort(p, kind="stable")
    adjusted = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adjusted
    return out.tolist()


def consistency(verified: Sequence[np.ndarray]) -> tuple[Estimate | None, int, int]:
    """(Wilson estimate of the share of scenarios whose >= 2 scored repeats all agree, agreeing, scenarios)."""
    multi = [v for v in verified if len(v) >= 2]
    if not multi:
        return None, 0, 0
    agree = [np.array([float(np.all(v == v[0]))]) for v in multi]
    return rate_estimate(agree), int(sum(a[0] for a in agree)), len(multi)


def scenario_categories(run_dir: str | Path) -> dict[str, str]:
    """Scenario id -> category, from the run's records (empty when the records have no category column)."""
    episodes = Path(run_dir) / "episodes.parquet"
    try:
        dataset = ds.dataset(str(episodes), format="parquet")
    except (OSError, ValueError):
        return {}
    if "category" not in dataset.schema.names:
        return {}
    table = dataset.to_table(columns=["scenario", "category"]).to_pylist()
    return {str(r["scenario"]): str(r["category"] or UNCATEGORISED) for r in table}


def category_rates(run: AgentRun) -> tuple[CategoryRate, ...]:
    """The verified rate of every category the run's records name (empty when they name none)."""
    categories = scenario_categories(run.run)
    if not categories:
        return ()
    per = run.per_scenario("verified")
    groups: dict[str, list[np.ndarray]] = {}
    for name, values in per.items():
        groups.setdefault(categories.get(name, UNCATEGORISED), []).append(values)
    return tuple(CategoryRate(c, rate_estimate(groups[c])) for c in sorted(groups))


def category_comparisons(a: AgentRun, b: AgentRun) -> tuple[CategoryComparison, ...]:
    """Per category, A's verified rate against B's, Holm-corrected over the categories; where episodes were not
    scored, a difference is declared only when both extremes of them declare it too."""
    categories = scenario_categories(a.run) or scenario_categories(b.run)
    if not categories:
        return ()
    rows = _rows(a.per_scenario("verified"), b.per_scenario("verified"), categories)
    if not (a.n_open or b.n_open):
        return rows
    extremes = [{r.category: r for r in _rows(filled(a, "verified", fa), filled(b, "verified", fb), categories)}
                for fa, fb in ((0.0, 1.0), (1.0, 0.0))]
    out = []
    for r in rows:
        sides = [e.get(r.category) for e in extremes]
        held = all(x is not None and x.significant and (x.difference > 0) == (r.difference > 0) for x in sides)
        split = len({(x is not None and x.significant, x is not None and x.difference > 0) for x in sides}) > 1
        out.append(replace(r, significant=r.significant and held, not_decided=split))
    return tuple(out)


def _rows(pa: Mapping[str, np.ndarray], pb: Mapping[str, np.ndarray],
          categories: Mapping[str, str]) -> tuple[CategoryComparison, ...]:
    groups: dict[str, list[str]] = {}
    for name in sorted(set(pa) & set(pb)):
        groups.setdefault(categories.get(name, UNCATEGORISED), []).append(name)
    rows = []
    for category in sorted(groups):
        names = groups[category]
        ma = np.array([np.mean(pa[s]) for s in names])
        mb = np.array([np.mean(pb[s]) for s in names])
        if all(len(pa[s]) == 1 and len(pb[s]) == 1 for s in names):
            test = mcnemar_exact(int(np.sum((ma == 1) & (mb == 0))), int(np.sum((ma == 0) & (mb == 1))))
        else:
            test = sign_flip(ma - mb)
        episodes_a, episodes_b = float(sum(len(pa[s]) for s in names)), float(sum(len(pb[s]) for s in names))
        diff, _, low, high = (float(x[0]) for x in difference_bounds(ma[None, :], mb[None, :], episodes_a,
                                                                      episodes_b))
        rows.append((category, len(names), diff, low, high, test))
    adjusted = holm([r[5].p_value for r in rows])
    return tuple(CategoryComparison(c, n, d, lo, hi, t, p, p < ALPHA)
                 for (c, n, d, lo, hi, t), p in zip(rows, adjusted, strict=True))
