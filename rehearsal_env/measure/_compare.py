"""Comparing two runs paired by scenario, and what two runs of one checkpoint say about noise.

Per metric, only scenarios scored in both runs are paired; d_j = m_A,j - m_B,j, the difference is
mean(d) with SE = sd(d, ddof=1) / sqrt(n) and a t interval on n - 1 df (Miller, arXiv 2411.00640,
section on paired differences); corr(m_A, m_B) says how much pairing helped. When every d_j is the
same the t interval would have zero width; then the interval is Newcombe's square-and-add (MOVER)
interval from each run's own interval, which ignores the pairing and so errs wide (Newcombe 1998,
Stat Med 17:873). The tests are in :mod:`._paired`: exact McNemar for 0/1 outcomes with one repeat
in both runs, otherwise the paired t test and the exact sign-flip test, the latter deciding.

The floor is ``Z80 * sqrt((sw2_A * mean_j(1/K_A,j) + sw2_B * mean_j(1/K_B,j)) / n)`` over the paired
scenarios' scored repeats (:mod:`._floor`); when one run has one repeat the other's sw2 stands for
both, and when neither has repeats two runs of the same checkpoint give the observed floor. With
fewer than MIN_SCENARIOS paired scenarios no floor is given. Two runs whose provenance differs are
not compared unless forced.

The verdict reports the test first: which run is higher, by how much, the 95% interval and the
p-value of the deciding test. The floor comes second, as what it is, a power statement: the
smallest true difference this suite detects 80% of the time. A significant difference below the
floor is still significant; the floor then says a true difference that small is often missed, so a
rerun may not show it. A difference below the floor that is not significant is no evidence of
equality.

Not-scored episodes: each run's count and share are reported, and when any episode was not scored
the worst case bounds the difference by counting them as failures in A and successes in B, and
the reverse.

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

from ._decision import A_HIGHER, B_HIGHER, DISAGREE, NOT_DECIDED, Extremes, Procedure, extremes, read
from ._floor import (
    ALL_AGREED,
    MIN_SCENARIOS,
    inverse_repeats,
    observed_floor,
    paired_floor,
    too_few,
    within_variance,
)
from ._load import AgentRun, RunError
from ._paired import PairedTest
from ._reliability import CategoryComparison, category_comparisons
from ._seqreport import SequentialCheck, sequential_check

COMPARED = ("verified", "rule_violated", "reward")
"""Metrics compared between two runs."""
BETWEEN_RUN_RATIO = 1.5
"""Observed floor / within-run floor above which whole runs are said to vary."""
BELOW_FLOOR = "below the resolution floor"
"""The words of a difference smaller than the floor."""
LABELS = {"verified": "verified rate", "rule_violated": "rule-violated rate", "reward": "mean reward"}
"""Metric -> its name in sentences."""


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
    """Where the floor comes from ("from ...", "observed ..."), or "unknown: " / "not given: " and why."""
    significant: bool
    """Whether a difference is decided (``decision`` is ``A higher`` or ``B higher``)."""
    below_floor: bool | None
    """Whether |difference| is below the floor; None when the floor is unknown or not given."""
    result: str
    """The test's result in one sentence: direction, size, 95% interval, p-value."""
    power: str
    """The floor in one sentence, as the power statement it is."""
    verdict: str
    """``result`` then ``power``."""
    worst_low: float | None = None
    """The lower of A - B with not-scored episodes as failures in A and successes in B, or the reverse;
    None when every episode was scored."""
    worst_high: float | None = None
    """The higher of the two; None when every episode was scored."""
    interval_method: str = "t"
    """``t`` on the d_j, ``MOVER`` (Newcombe) when every d_j is the same, or ``McNemar-inverted exact``
    for 0/1 outcomes with one repeat in both runs (:mod:`._decision`)."""
    decision: str = ""
    """``A higher``, ``B higher``, ``no significant difference``, ``test and interval disagree``, or ``not
    decided`` (the not-scored episodes counted as the worst and as the best outcome decide differently)."""
    extremes: Extremes | None = None
    """The procedure with not-scored episodes the worst outcome for A and the best for B, and the reverse; None
    when every episode was scored."""


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
    """Same agent profile and version: the difference is drift."""
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
    not_scored: tuple[tuple[int, int, tuple[tuple[str, int], ...]], ...] = ()
    """Per run (A, B): (not-scored episodes, every episode, ((cause, count), ...))."""
    categories: tuple[CategoryComparison, ...] = ()
    """The verified rate per scenario category, A against B, Holm-corrected over the categories."""
    sequential: SequentialCheck | None = None
    """When A and B are the two runs of one ``rehearsal compare``: the anytime-valid interval of the verified
    rate's difference, recomputed from the records; None otherwise."""


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
        not_scored=tuple((r.n_not_scored, r.n_episodes, tuple(r.not_scored_causes.items())) for r in (a, b)),
        categories=category_comparisons(a, b),
        sequential=sequential_check(a, b),
    )


def _metric(metric: str, a: AgentRun, b: AgentRun, same: bool) -> MetricComparison:
    pa, pb = a.per_scenario(metric), b.per_scenario(metric)
    names = sorted(set(pa) & set(pb))
    if not names:
        raise RunError(f"expected scenarios scored in both runs; {a.run} and {b.run} share none "
                         "(are they runs of the same suite?)")
    va, vb = [pa[s] for s in names], [pb[s] for s in names]
    ma = np.array([np.mean(v) for v in va])
    mb = np.array([np.mean(v) for v in vb])
    d = ma - mb
    n = len(d)
    se = float(np.std(d, ddof=1) / math.sqrt(n)) if n >= 2 else math.nan
    proc = read(metric, va, vb)
    ext = extremes(metric, a, b)
    decision = proc.decision if ext is None else ext.decision
    floor, source = _within_floor(va, vb)
    if floor is None and same and source.startswith("unknown") and n >= MIN_SCENARIOS:
        observed = observed_floor(d)
        if observed > 0:
            floor, source = observed, "observed between these two runs of the same checkpoint"
        else:
            source = ("unknown: the two runs of the same checkpoint agreed on every scenario, so the observed floor "
                      "would be 0, which no suite resolves; run more repeats (repeats >= 2)")
    corr = float(np.corrcoef(ma, mb)[0, 1]) if n >= 2 and np.std(ma) > 0 and np.std(mb) > 0 else None
    significant = decision in (A_HIGHER, B_HIGHER)
    below = None if floor is None else bool(abs(proc.difference) < floor)
    result = _result(metric, proc, decision, ext)
    power = _power(floor, source, significant, below, n)
    return MetricComparison(
        metric=metric, n_paired=n, value_a=float(np.mean(ma)), value_b=float(np.mean(mb)),
        difference=proc.difference, se=se, low=proc.low, high=proc.high, correlation=corr, tests=proc.tests,
        floor=floor, floor_source=source, significant=significant, below_floor=below,
        result=result, power=power, verdict=f"{result} {power}",
        worst_low=None if ext is None else min(ext.worst_for_a.difference, ext.best_for_a.difference),
        worst_high=None if ext is None else max(ext.worst_for_a.difference, ext.best_for_a.difference),
        interval_method=proc.interval_method, decision=decision, extremes=ext,
    )


def _within_floor(va: list[np.ndarray], vb: list[np.ndarray]) -> tuple[float | None, str]:
    """The floor the runs' own scored repeats predict (paired scenarios' values), and where it comes from."""
    n = len(va)
    if n < MIN_SCENARIOS:
        return None, "not given: " + too_few(n)
    sa, sb = within_variance(va), within_variance(vb)
    ia, ib = inverse_repeats(va), inverse_repeats(vb)
    if not sa and not sb and (sa is not None or sb is not None):  # repeats, and every one agreed: 0 is unknown
        return None, "unknown: " + ALL_AGREED.replace("the scored repeats", "the scored repeats of both runs")
    if sa is not None and sb is not None:
        return paired_floor(sa, ia, sb, ib, n), "from the within-scenario variance of both runs' scored repeats"
    if sa is not None:
        return paired_floor(sa, ia, sa, ib, n), "from run A's scored repeats, assumed to hold for both runs"
    if sb is not None:
        return paired_floor(sb, ia, sb, ib, n), "from run B's scored repeats, assumed to hold for both runs"
    return None, ("unknown: neither run has repeats; run every scenario at least twice (repeats >= 2), "
                  "or run one checkpoint twice")


def _result(metric: str, proc: Procedure, decision: str, ext: Extremes | None) -> str:
    """The decision in one sentence: direction, size, the interval and test of the one procedure, p-value."""
    label = LABELS.get(metric, metric)
    test = proc.tests[0]
    ci = (f"A - B = {proc.difference:+.3f}, 95% CI [{proc.low:+.3f}, {proc.high:+.3f}] "
          f"({proc.interval_method} interval), p = {test.p_value:.3g} by {test.name}")
    if decision == NOT_DECIDED and ext is not None:
        return f"The {label} is {ext.reason} (scored episodes only: {ci})."
    if decision in (A_HIGHER, B_HIGHER):
        hi, lo = ("A", "B") if decision == A_HIGHER else ("B", "A")
        held = "" if ext is None else f"; it holds with the {ext.not_scored} not-scored episodes counted either way"
        return (f"{hi}'s {label} is higher than {lo}'s by {abs(proc.difference):.3f}, a significant difference "
                f"({ci}{held}).")
    if decision == DISAGREE:
        return (f"Not decided for the {label}: the deciding {test.name} test and the interval disagree at this size "
                f"({ci}); run more scenarios or repeats.")
    held = "" if ext is None else f"; so with the {ext.not_scored} not-scored episodes counted either way"
    return f"No significant difference in the {label} ({ci}{held})."


def _power(floor: float | None, source: str, significant: bool, below: bool | None, n: int) -> str:
    """The floor in one sentence: the size of true difference this suite detects 80% of the time."""
    if floor is None:
        if source.startswith("not given"):
            return (f"No resolution floor is given: only {n} paired scenario(s), fewer than {MIN_SCENARIOS}, "
                    "so the test has little power and a floor would mean nothing.")
        return f"The resolution floor is unknown: {source.removeprefix('unknown: ')}."
    size = f"the smallest true difference this suite detects 80% of the time ({floor:.3f})"
    if below and significant:
        return (f"The difference is {BELOW_FLOOR}, {size}: a true difference this small is missed more than "
                "20% of the time, so a rerun may not show it although this test did.")
    if below:
        return (f"The difference is {BELOW_FLOOR}, {size}: a true difference this small is often missed, "
                "so this is no evidence that A and B are equal.")
    if significant:
        return f"The difference is above the resolution floor, {size}."
    return (f"The difference is above the resolution floor, {size}, yet not significant: the runs differ by "
            "scenario more than a uniform shift, so this comparison has less power than the floor assumes.")


def _no_prediction(source: str) -> str:
    """Why the runs' repeats predict no floor, in the words the metric's own floor line used."""
    if source.startswith("unknown: ") and "agreed" in source:
        return "the scored repeats of both runs agreed on every scenario (a floor from no disagreement is unknown)"
    return source.removeprefix("unknown: ").removeprefix("not given: ")


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
    sws = [w for w in (within_variance(va), within_variance(vb)) if w is not None]
    within_flip = 2 * float(np.mean(sws)) if sws else None
    within, source = _within_floor(va, vb)
    few = len(names) < MIN_SCENARIOS
    obs = math.nan if few else observed_floor(d)
    agreed = not few and obs == 0
    obs = math.nan if agreed else obs
    between = None if within is None or math.isnan(obs) else obs > BETWEEN_RUN_RATIO * within
    why_none = _no_prediction(source)
    if few:
        note = "no floor, observed or predicted: " + too_few(len(names))
    elif agreed:
        note = ("the two runs agreed on every scenario, so the observed floor would be 0, which no suite resolves: "
                "it is unknown; " + (f"the repeats predict {within:.3f}" if within is not None
                                     else f"no floor is predicted either: {why_none}"))
    elif between is None:
        note = f"the observed floor is the only floor: {why_none}"
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
