"""Deciding A against B: one procedure gives the interval and the decision, and not-scored episodes cannot flip it.

**One procedure.** A decision and the interval printed beside it never contradict each other:

* 0/1 outcomes with one scored repeat in both runs: the exact McNemar test decides, and the interval is its
  own, inverted: with b scenarios where only A succeeds, c where only B does, m = b + c and n pairs,
  A - B = (m / n)(2 pi - 1) where pi = P(A wins | the pair differs) ~ b of m; the interval is
  ``(m / n)(2 [pi_L, pi_U] - 1)`` with ``[pi_L, pi_U]`` the exact Clopper-Pearson 95% interval of pi (conditional
  on m, as the test is; Fagerland, Lydersen & Laake 2013, BMC Med Res Methodol 13:91, sec. 2). The test's
  p < 0.05 exactly when ``pi_L > 1/2`` or ``pi_U < 1/2``, so the interval excludes 0 exactly when the test
  rejects. With no discordant pair the interval is +- the exact upper bound of the discordant share.
* Otherwise (repeats, or rewards): the exact sign-flip test and the t interval on the per-scenario differences
  (Newcombe's MOVER when every difference is the same). A difference is decided only when both say so on the
  same side, and "no significant difference" only when neither does; when they disagree (small suites, where
  the t interval is optimistic) the comparison says so and decides nothing (:data:`DISAGREE`).

**Not-scored episodes cannot flip a decision.** The party under test often serves the model, so a provider that
fails exactly the episodes it is losing must gain nothing. Where any episode of A or B was not scored, the
procedure is run twice more on every scenario played in both runs: with each not-scored episode the worst
outcome for A and the best for B (a failure in A, a success in B), and the reverse. The comparison decides only
when both extremes decide the same; otherwise it is :data:`NOT_DECIDED`, "not decided: N episodes not scored
(causes)", with both extremes printed. The headline difference keeps its meaning (scored episodes only).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from ._floor import ALPHA
from ._intervals import REWARD_BOUNDS, difference_bounds
from ._load import AgentRun
from ._paired import PairedTest, mcnemar_exact, paired_t, sign_flip

A_HIGHER = "A higher"
"""Decided: A's value is higher (for the rule-violated rate, A breaks rules more often)."""
B_HIGHER = "B higher"
"""Decided: B's value is higher."""
NO_DIFFERENCE = "no significant difference"
"""Decided: the test does not reject and the interval holds 0."""
DISAGREE = "test and interval disagree"
"""Nothing decided: the deciding test and the interval disagree (never printed as a difference or as none)."""
NOT_DECIDED = "not decided"
"""Nothing decided: the not-scored episodes, counted as the worst and as the best outcome, decide differently."""
SUCCESS = {"verified": 1.0, "rule_violated": 0.0, "reward": REWARD_BOUNDS[1]}
"""Metric -> the value of a not-scored episode counted as the best outcome for its agent."""
FAILURE = {"verified": 0.0, "rule_violated": 1.0, "reward": REWARD_BOUNDS[0]}
"""Metric -> the value of a not-scored episode counted as the worst outcome for its agent."""
EXACT_CONDITIONAL = "McNemar-inverted exact"
"""The interval method of the McNemar case."""


@dataclass(frozen=True)
class Procedure:
    """The one procedure's reading of paired per-scenario values: the interval and the decision it gives."""

    n_paired: int
    """Scenarios in the pairing."""
    difference: float
    """A - B: the mean of the per-scenario differences."""
    low: float
    """Lower end of the 95% interval of A - B."""
    high: float
    """Upper end of the 95% interval of A - B."""
    tests: tuple[PairedTest, ...]
    """The paired tests run; the first decides with the interval."""
    interval_method: str
    """``McNemar-inverted exact``, ``t`` or ``MOVER``."""
    decision: str
    """:data:`A_HIGHER`, :data:`B_HIGHER`, :data:`NO_DIFFERENCE` or :data:`DISAGREE`."""


@dataclass(frozen=True)
class Extremes:
    """The procedure with every not-scored episode the worst outcome for A (and the best for B), and the reverse."""

    worst_for_a: Procedure
    """Not-scored episodes as failures in A and successes in B."""
    best_for_a: Procedure
    """Not-scored episodes as successes in A and failures in B."""
    not_scored: int
    """Not-scored episodes of A and B together (on the scenarios of the pairing)."""
    causes: tuple[tuple[str, int], ...]
    """(cause, episodes) of those, most frequent first."""

    @property
    def decision(self) -> str:
        """The extremes' common decision, else :data:`NOT_DECIDED`."""
        same = self.worst_for_a.decision == self.best_for_a.decision
        return self.worst_for_a.decision if same and self.worst_for_a.decision != DISAGREE else NOT_DECIDED

    @property
    def reason(self) -> str:
        """``not decided: N episodes not scored (causes)`` and the two extremes (empty when decided)."""
        if self.decision != NOT_DECIDED:
            return ""
        causes = ", ".join(f"{c} {k}" for c, k in self.causes)
        w, b = self.worst_for_a, self.best_for_a
        return (f"not decided: {self.not_scored} episodes not scored ({causes}); counted as failures of A and "
                f"successes of B: {w.decision}, A - B = {w.difference:+.3f} [{w.low:+.3f}, {w.high:+.3f}]; as "
                f"successes of A and failures of B: {b.decision}, A - B = {b.difference:+.3f} "
                f"[{b.low:+.3f}, {b.high:+.3f}]")


def read(metric: str, va: Sequence[np.ndarray], vb: Sequence[np.ndarray]) -> Procedure:
    """The interval and decision for paired per-scenario values ``va[j]``, ``vb[j]`` (each scenario's episodes)."""
    ma = np.array([np.mean(v) for v in va])
    mb = np.array([np.mean(v) for v in vb])
    d = ma - mb
    n = len(d)
    diff = float(np.mean(d))
    binary = metric != "reward"
    if binary and all(len(x) == 1 for x in va) and all(len(x) == 1 for x in vb):
        b, c = int(np.sum((ma == 1) & (mb == 0))), int(np.sum((ma == 0) & (mb == 1)))
        test = mcnemar_exact(b, c)
        low, high = mcnemar_interval(b, c, n)
        decision = NO_DIFFERENCE if test.p_value >= ALPHA else (A_HIGHER if b > c else B_HIGHER)
        return Procedure(n, diff, low, high, (test,), EXACT_CONDITIONAL, decision)
    bounds = None if binary else _reward_bounds(va, vb)
    _, _, low_, high_ = difference_bounds(ma[None, :], mb[None, :], float(sum(map(len, va))),
                                          float(sum(map(len, vb))), bounds)
    low, high = float(low_[0]), float(high_[0])
    tests = (sign_flip(d), paired_t(d))
    how = "MOVER" if n >= 2 and np.ptp(d) < 1e-12 else "t"
    rejects = tests[0].p_value < ALPHA
    side = A_HIGHER if low > 0 else B_HIGHER if high < 0 else None
    if rejects and side is not None and (side == A_HIGHER) == (diff > 0):
        decision = side
    elif not rejects and side is None:
        decision = NO_DIFFERENCE
    else:
        decision = DISAGREE
    return Procedure(n, diff, low, high, tests, how, decision)


def mcnemar_interval(b: int, c: int, n: int) -> tuple[float, float]:
    """The exact McNemar test inverted: (m/n)(2 pi - 1) at the Clopper-Pearson 95% ends of pi (see the module)."""
    m = b + c
    if n == 0:
        return math.nan, math.nan
    if m == 0:
        share = 1.0 - (0.025 ** (1 / n))  # exact upper 97.5% bound of a discordant share observed 0 of n
        return -share, share
    pi_low = float(stats.beta.ppf(0.025, b, c + 1)) if b > 0 else 0.0
    pi_high = float(stats.beta.ppf(0.975, b + 1, c)) if c > 0 else 1.0
    return m / n * (2 * pi_low - 1), m / n * (2 * pi_high - 1)


def _reward_bounds(va: Sequence[np.ndarray], vb: Sequence[np.ndarray]) -> tuple[float, float]:
    """REWARD_BOUNDS, widened to any reward either run holds outside them."""
    every = np.concatenate([*va, *vb])
    return min(REWARD_BOUNDS[0], float(every.min())), max(REWARD_BOUNDS[1], float(every.max()))


def filled(run: AgentRun, metric: str, fill: float) -> dict[str, np.ndarray]:
    """Scenario -> its values of ``metric`` with every not-scored episode, and every open one (a retry that did not
    replay the attempt it retried), set to ``fill``."""
    out = {}
    for s in run.scenarios:
        v = s.bounded(metric, fill)
        if len(v):
            out[s.scenario] = v
    return out


def extremes(metric: str, a: AgentRun, b: AgentRun) -> Extremes | None:
    """The procedure at both extremes of the not-scored episodes; None when every episode was scored."""
    if not (a.n_open or b.n_open):
        return None
    fail_a, win_b = filled(a, metric, FAILURE[metric]), filled(b, metric, SUCCESS[metric])
    win_a, fail_b = filled(a, metric, SUCCESS[metric]), filled(b, metric, FAILURE[metric])
    names = sorted(set(fail_a) & set(win_b))
    if not names:
        return None
    causes: dict[str, int] = {}
    for run in (a, b):
        for s in run.scenarios:
            if s.scenario in names:
                for cause, k in s.not_scored_causes.items():
                    causes[cause] = causes.get(cause, 0) + k
                for cause, k in s.open_causes.items():
                    key = f"{cause} (retried, not replayed)"
                    causes[key] = causes.get(key, 0) + k
    return Extremes(
        worst_for_a=read(metric, [fail_a[s] for s in names], [win_b[s] for s in names]),
        best_for_a=read(metric, [win_a[s] for s in names], [fail_b[s] for s in names]),
        not_scored=sum(causes.values()),
        causes=tuple(sorted(causes.items(), key=lambda kv: (-kv[1], kv[0]))))
