"""Comparing two runs paired by scenario, and what two runs of one checkpoint say about noise.

Per metric, only scenarios scored in both runs are paired; d_j = m_A,j - m_B,j, the difference is
mean(d) with SE = sd(d, ddof=1) / sqrt(n) and a t interval on n - 1 df (Miller, arXiv 2411.00640,
section on paired differences); corr(m_A, m_B) says how much pairing helped. The tests are in
:mod:`._paired`: exact McNemar for 0/1 outcomes with one repeat in both runs, otherwise the paired
t test and the exact sign-flip test, the latter deciding. The floor is
``Z80 * sqrt((sw2_A / K_A + sw2_B / K_B) / n)`` (:mod:`._floor`); when one run has one repeat the
other's sw2 stands for both, and when neither has repeats two runs of the same checkpoint give the
observed floor. Two runs whose provenance differs are not compared unless forced.

Runs of the same checkpoint (same agent name) also report flips, pairing episodes by scenario and
repeat index (repeats are exchangeable, so the index pairing is as good as any and keeps the count
an integer), the observed floor ``Z80 * sd(d) / sqrt(n)`` and the drift with its p-value. An
observed floor above ``BETWEEN_RUN_RATIO`` times the within-run floor means something varies
between whole runs (a heuristic cut: a variance ratio of 2.25, about three standard errors of
the ratio at n = 20).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from rehearsal_env.provenance import differing_fields, lookup

from ._floor import observed_floor, paired_floor, within_variance
from ._intervals import t_interval
from ._load import AgentRun, RunError
from ._paired import PairedTest, mcnemar_exact, paired_t, sign_flip

COMPARED = ("verified", "rule_violated", "reward")
"""Metrics compared between two runs."""
BETWEEN_RUN_RATIO = 1.5
"""Observed floor / within-run floor above which whole runs are said to vary."""
BELOW_FLOOR = "below the resolution floor"


class ProvenanceMismatch(ValueError):
    """Two runs whose provenance differs in a field that decides comparability."""

    def __init__(self, fields: list[str], a: Mapping[str, Any], b: Mapping[str, Any],
                 missing: list[str] | None = None) -> None:
        self.fields = fields
        if missing:
            where = ", ".join(missing)
            super().__init__(f"expected provenance.json in both run directories; missing in {where}, so "
                             "comparability cannot be checked; rerun with a runner that writes it, or "
                             "pass --force to compare anyway")
            return
        shown = "; ".join(f"{f}: {lookup(a, f)!r} vs {lookup(b, f)!r}" for f in fields)
        super().__init__(f"expected runs with the same provenance; they differ in {shown}. Their numbers are "
                         "different measurements; rerun one of them, or pass --force to compare anyway")


@dataclass(frozen=True)
class MetricComparison:
    """One metric of run A against run B, paired by scenario."""

    metric: str
    """Which metric."""
    n_paired: int
    """Scenarios scored in both runs."""
    value_a: float
    """Run A's value on the paired scenarios."""
    value_b: float
    """Run B's value on the paired scenarios."""
    difference: float
    """A - B: the mean of the per-scenario differences."""
    se: float
    """sd(d, ddof=1) / sqrt(n)."""
    low: float
    """Lower end of the 95% t interval of the difference."""
    high: float
    """Upper end of the 95% t interval of the difference."""
    correlation: float | None
    """corr(m_A, m_B) over scenarios; None when either run does not vary."""
    tests: tuple[PairedTest, ...]
    """The paired tests run; the first decides."""
    floor: float | None
    """Resolution floor of this comparison; None when unknown."""
    floor_source: str
    """Where the floor comes from ("from ...", "observed ..."), or "unknown: " and how to get it."""
    verdict: str
    """In words: below the floor, a significant difference, or none."""


@dataclass(frozen=True)
class Reproducibility:
    """Two runs of the same checkpoint: how much the instrument disagrees with itself."""

    flips: int
    """Episodes (paired by scenario and repeat) whose verified outcome differs between the runs."""
    pairs: int
    """Episode pairs scored in both runs."""
    flip_rate: float
    """flips / pairs."""
    within_flip_rate: float | None
    """The expected flip rate from the runs' own repeats (2 * sw2, averaged); None with one repeat."""
    observed_floor: float
    """Z80 * sd(d) / sqrt(n) on the verified rate between the two runs."""
    within_floor: float | None
    """The floor the runs' own repeats predict for this comparison; None with one repeat."""
    drift: float
    """Verified rate of A - B."""
    drift_p: float
    """p-value of the drift (the deciding paired test)."""
    between_runs: bool | None
    """Whether the observed floor exceeds BETWEEN_RUN_RATIO x the within floor; None when unknown."""
    note: str
    """How to read it."""


@dataclass(frozen=True)
class Comparison:
    """Run A against run B."""

    run_a: str
    """Run A's directory."""
    run_b: str
    """Run B's directory."""
    agent_a: str
    """Run A's agent."""
    agent_b: str
    """Run B's agent."""
    same_checkpoint: bool
    """Same agent name: the difference is drift."""
    provenance_differs: tuple[str, ...]
    """Provenance fields that differ, or ``provenance.json`` when a run has none (only when forced)."""
    only_in_a: tuple[str, ...]
    """Scenarios scored only in run A (left out)."""
    only_in_b: tuple[str, ...]
    """Scenarios scored only in run B (left out)."""
    metrics: tuple[MetricComparison, ...]
    """Verified rate, rule-violated rate, mean reward."""
    reproducibility: Reproducibility | None
    """For runs of the same checkpoint; None otherwise."""


def compare(a: AgentRun, b: AgentRun, force: bool = False) -> Comparison:
    """Compare run A with run B, paired by scenario (ProvenanceMismatch unless comparable or forced)."""
    missing = [r.run for r in (a, b) if r.provenance is None]
    if missing and not force:
        raise ProvenanceMismatch([], {}, {}, missing=missing)
    pa, pb = a.provenance or {}, b.provenance or {}
    differs = ["provenance.json (missing)"] if missing else differing_fields(pa, pb)
    if differs and not force:
        raise ProvenanceMismatch(differs, pa, pb)
    same = a.agent == b.agent
    metrics = tuple(_metric(m, a, b, same) for m in COMPARED)
    va, vb = a.per_scenario("verified"), b.per_scenario("verified")
    return Comparison(
        run_a=a.run, run_b=b.run, agent_a=a.agent, agent_b=b.agent, same_checkpoint=same,
        provenance_differs=tuple(differs),
        only_in_a=tuple(sorted(set(va) - set(vb))), only_in_b=tuple(sorted(set(vb) - set(va))),
        metrics=metrics, reproducibility=_reproducibility(a, b, metrics[0]) if same else None,
    )


def _metric(metric: str, a: AgentRun, b: AgentRun, same: bool) -> MetricComparison:
    pa, pb = a.per_scenario(metric), b.per_scenario(metric)
    names = sorted(set(pa) & set(pb))
    if not names:
        raise RunError(f"expected scenarios scored in both runs; {a.run} and {b.run} share none "
                         "(are they runs of the same suite?)")
    ma = np.array([np.mean(pa[s]) for s in names])
    mb = np.array([np.mean(pb[s]) for s in names])
    d = ma - mb
    n = len(d)
    diff = float(np.mean(d))
    se = float(np.std(d, ddof=1) / math.sqrt(n)) if n >= 2 else math.nan
    low, high = t_interval(diff, se, n - 1)
    binary = metric != "reward"
    if binary and all(len(pa[s]) == 1 and len(pb[s]) == 1 for s in names):
        tests: tuple[PairedTest, ...] = (mcnemar_exact(int(np.sum((ma == 1) & (mb == 0))),
                                                       int(np.sum((ma == 0) & (mb == 1)))),)
    else:
        tests = (sign_flip(d), paired_t(d))
    floor, source = _within_floor([pa[s] for s in names], a.repeats, [pb[s] for s in names], b.repeats)
    if floor is None and same and n >= 2:
        floor, source = observed_floor(d), "observed between these two runs of the same checkpoint"
    corr = float(np.corrcoef(ma, mb)[0, 1]) if n >= 2 and np.std(ma) > 0 and np.std(mb) > 0 else None
    return MetricComparison(
        metric=metric, n_paired=n, value_a=float(np.mean(ma)), value_b=float(np.mean(mb)),
        difference=diff, se=se, low=low, high=high, correlation=corr, tests=tests,
        floor=floor, floor_source=source, verdict=_verdict(diff, floor, tests[0]),
    )


def _within_floor(va: list[np.ndarray], ka: int, vb: list[np.ndarray], kb: int) -> tuple[float | None, str]:
    """The floor the runs' own repeats predict (paired scenarios' values), and where it comes from."""
    sa = within_variance(va) if ka >= 2 else None
    sb = within_variance(vb) if kb >= 2 else None
    n = len(va)
    if sa is not None and sb is not None:
        return paired_floor(sa, ka, sb, kb, n), "from the within-scenario variance of both runs' repeats"
    if sa is not None:
        return paired_floor(sa, ka, sa, kb, n), "from run A's repeats, assumed to hold for both runs"
    if sb is not None:
        return paired_floor(sb, ka, sb, kb, n), "from run B's repeats, assumed to hold for both runs"
    return None, ("unknown: neither run has repeats; run every scenario at least twice (repeats >= 2), "
                  "or run one checkpoint twice")


def _verdict(diff: float, floor: float | None, test: PairedTest) -> str:
    p = f"p = {test.p_value:.3g}, {test.name}"
    if floor is not None and abs(diff) < floor:
        return f"{BELOW_FLOOR} ({floor:.3f}); {p}"
    where = "" if floor is not None else " (floor unknown)"
    if test.p_value < 0.05:
        return f"{'A' if diff > 0 else 'B'} higher{where}; {p}"
    return f"no significant difference{where}; {p}"


def _reproducibility(a: AgentRun, b: AgentRun, verified: MetricComparison) -> Reproducibility:
    flips = pairs = 0
    eb = {s.scenario: dict(zip(s.repeats.tolist(), s.values["verified"].tolist(), strict=True))
          for s in b.scenarios}
    for s in a.scenarios:
        other = eb.get(s.scenario, {})
        for rep, v in zip(s.repeats.tolist(), s.values["verified"].tolist(), strict=True):
            if rep in other:
                pairs += 1
                flips += int(v != other[rep])
    pa, pb = a.per_scenario("verified"), b.per_scenario("verified")
    names = sorted(set(pa) & set(pb))
    d = np.array([np.mean(pa[s]) - np.mean(pb[s]) for s in names])
    va, vb = [pa[s] for s in names], [pb[s] for s in names]
    sws = [w for w, k in ((within_variance(va), a.repeats), (within_variance(vb), b.repeats))
           if k >= 2 and w is not None]
    within_flip = 2 * float(np.mean(sws)) if sws else None
    within = _within_floor(va, a.repeats, vb, b.repeats)[0]
    obs = observed_floor(d)
    between = None if within is None or math.isnan(obs) else obs > BETWEEN_RUN_RATIO * within
    if between is None:
        note = "the observed floor is the only floor: the runs have no repeats to predict one"
    elif between:
        note = (f"the observed floor is more than {BETWEEN_RUN_RATIO} x what the repeats predict: something "
                "varies between whole runs (infrastructure, provider drift)")
    else:
        note = "the runs disagree about as much as their own repeats predict"
    return Reproducibility(
        flips=flips, pairs=pairs, flip_rate=flips / pairs if pairs else math.nan,
        within_flip_rate=within_flip, observed_floor=obs, within_floor=within, drift=verified.difference,
        drift_p=verified.tests[0].p_value, between_runs=between, note=note,
    )
