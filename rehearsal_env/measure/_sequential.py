"""Deciding a paired comparison sequentially: a betting confidence sequence for the mean paired difference.

Two checkpoints A and B play the same scenario in pairs; pair i gives ``d_i = y_A,i - y_B,i`` (0/1
verified outcomes, so ``d_i`` in [-1, 1]), rescaled to ``x_i = (d_i + 1) / 2`` in [0, 1]. The method is the
hedged betting confidence sequence of Waudby-Smith & Ramdas, "Estimating means of bounded random variables
by betting", JRSS-B 86(1):1-27, 2024 (arXiv 2010.09686), Theorem 3 with the mixture of the two bets. For each
candidate mean m a bettor starts with capital 1 and stakes ``lambda_i`` on ``x_i > m`` (and another on
``x_i < m``)::

    K_t(m) = theta * prod_i (1 + lambda+_i(m) (x_i - m)) + (1 - theta) * prod_i (1 - lambda-_i(m) (x_i - m))

with ``lambda+_i(m) = min(lambda_i, c / m)``, ``lambda-_i(m) = min(lambda_i, c / (1 - m))``, c = 1/2 and
theta = 1/2. When the pairs' conditional mean is m, ``K_t(m)`` is a nonnegative martingale with mean 1, so by
Ville's inequality ``P(exists t: K_t(m) >= 1/alpha) <= alpha``: the set ``{m: K_t(m) < 1/alpha}`` covers the
mean at every t at once, however often it is looked at and whenever one stops (an anytime-valid interval;
``lambda_i`` may be any value chosen before pair i is seen. Here it is
the growth-rate-optimal bet against a shift of half the floor, ``g / (s2 + g^2)`` with g the floor in x units
(floor / 2) and s2 the predictable variance estimate ``(1/4 + sum_{j<i} (x_j - xbar_j)^2) / i`` (WSR's
"GRAPA" bet, sec. 5.2, aimed at the alternative the decision cares about): this bet is what makes the
sequence short when A and B differ by about the floor (see the sequential study, :mod:`._seqstudy`).

What it guarantees here. The order of the pairs is fixed by a seed before any episode runs (a fresh
permutation of the scenarios per round, every scenario before any repeats), and episodes are independent
given that order. Under "no difference" (A and B succeed equally often on every scenario, the null the
exact sign-flip and McNemar tests of :mod:`._paired` test too) every ``x_i`` has conditional mean 1/2, so the
chance of ever declaring a difference is at most alpha, exactly. When the difference varies by scenario, the
interval covers the mean difference of the scenarios played so far, which is the suite's at the end of
every round; between round ends the sequential study measures its coverage rather than proving it.

A comparison stops at the first look where (1) the interval excludes 0: a difference; (2) the interval lies
inside (-floor, +floor): no difference this suite could resolve; or (3) the budget is spent. Because the
interval holds uniformly over time, statements (1) and (2) hold at the stated level even with a floor
estimated from the pairs so far. While every pair so far is a tie the estimated floor is unknown (a floor
estimated from no disagreement is not a small floor), so (2) waits for the first discordant pair or --floor.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ._floor import Z80

ALPHA = 0.05
"""Error rate of the anytime-valid interval (and of declaring a difference when there is none)."""
TRUNCATION = 0.5
"""c: the most a bet may stake, as a share of the capital (WSR's recommended 1/2)."""
THETA = 0.5
"""Weight of the bet on "x above m" in the hedged capital (the rest bets on "below")."""
GRID = 2001
"""Candidate means of the interval (evenly spaced in [0, 1], endpoints refined by bisection)."""
METHOD = ("betting confidence sequence (Waudby-Smith & Ramdas 2024, JRSS-B 86:1, Thm 3; hedged capital, "
          "GRAPA bet at the floor)")
"""The method, in words, as reports name it."""
DIFFERENCE = "difference"
"""Stopped: the anytime-valid interval excludes 0."""
WITHIN_FLOOR = "within the floor"
"""Stopped: the anytime-valid interval lies inside (-floor, +floor)."""
BUDGET = "budget"
"""Stopped: the episode budget is spent before a decision."""
NOT_DECIDED = "not decided"
"""Budget spent while the not-scored episodes, counted as the worst and as the best outcome for A, decided
differently: the not-scored episodes alone stood between the comparison and a decision."""
DESIGN_REPEATS = 3
"""K of the fixed design a sequential comparison replaces (every scenario K times): the floor's design."""
BUDGET_MULTIPLE = 2
"""The default budget: this many times the fixed design's episodes."""
BATCH_PAIRS = 10
"""Pairs per batch (a look after each)."""
REFERENCE = ("Waudby-Smith, I. & Ramdas, A. (2024). Estimating means of bounded random variables by betting. "
             "Journal of the Royal Statistical Society Series B 86(1):1-27. arXiv:2010.09686")
"""The method's reference."""


def predictable_variance(x: np.ndarray) -> np.ndarray:
    """Per row, the variance estimate available before each x_i: ``(1/4 + sum_{j<i}(x_j - xbar_j)^2) / i``.

    ``xbar_j = (1/2 + sum_{k<=j} x_k) / (j + 1)`` (WSR eq. 27); rows are replicates, columns pairs in order.
    """
    x = np.atleast_2d(np.asarray(x, dtype=float))
    t = np.arange(1, x.shape[-1] + 1)
    mean = (0.5 + np.cumsum(x, axis=-1)) / (t + 1)
    var = (0.25 + np.cumsum((x - mean) ** 2, axis=-1)) / (t + 1)
    return np.concatenate([np.full((*x.shape[:-1], 1), 0.25), var[..., :-1]], axis=-1)


def estimated_floor(variance: np.ndarray, design_pairs: float) -> np.ndarray:
    """The floor ``Z80 * sd(d) / sqrt(design_pairs)`` from a variance of x = (d + 1) / 2 (sd(d) = 2 sd(x)).

    It is the resolution floor of a fixed comparison of ``design_pairs`` pairs (:mod:`._floor`): with a
    uniform shift between A and B, var(d) is the summed within-scenario variance ``sw2_A + sw2_B``.
    """
    return Z80 * 2 * np.sqrt(np.asarray(variance, dtype=float)) / math.sqrt(design_pairs)


def bets(x: np.ndarray, floor: float | np.ndarray | None, design_pairs: float) -> np.ndarray:
    """The predictable bet lambda_i per pair: ``g / (s2 + g^2)``, g = floor / 2 (estimated before pair i when None)."""
    var = predictable_variance(x)
    f = estimated_floor(var, design_pairs) if floor is None else np.broadcast_to(np.asarray(floor, float), var.shape)
    g = np.maximum(f / 2, 1e-6)
    return np.asarray(g / (var + g * g))


def log_capital(x: np.ndarray, lam: np.ndarray, m: float | np.ndarray) -> np.ndarray:
    """log K_t(m) after every pair: rows of ``x`` and ``lam`` are replicates; ``m`` (in (0, 1)) broadcasts last.

    With ``m`` an array of G candidates the result has shape (..., T, G).
    """
    x, lam = np.asarray(x, dtype=float), np.asarray(lam, dtype=float)
    m_arr = np.asarray(m, dtype=float)
    if m_arr.ndim:
        x, lam = x[..., None], lam[..., None]
    up = np.minimum(lam, TRUNCATION / m_arr)
    down = np.minimum(lam, TRUNCATION / (1 - m_arr))
    plus = np.cumsum(np.log1p(up * (x - m_arr)), axis=x.ndim - 1 - int(bool(m_arr.ndim)))
    minus = np.cumsum(np.log1p(-down * (x - m_arr)), axis=x.ndim - 1 - int(bool(m_arr.ndim)))
    return np.asarray(np.logaddexp(math.log(THETA) + plus, math.log(1 - THETA) + minus))


@dataclass(frozen=True)
class Look:
    """The anytime-valid interval at one look (after one paired batch)."""

    pairs: int
    """Pairs with both episodes scored so far."""
    estimate: float
    """Mean of the paired differences so far (A - B)."""
    low: float
    """Lower end of the anytime-valid interval of A - B."""
    high: float
    """Upper end of it."""
    e_value: float
    """K_t(no difference): the capital against "no difference" (a difference is declared at >= 1/alpha)."""
    floor: float | None
    """The floor the decision uses at this look (given, or estimated from the pairs so far); None while every
    pair so far is a tie: no disagreement observed gives an unknown floor, not a small one."""
    decision: str | None
    """``difference``, ``within the floor``, or None (go on). With pairs left out because an episode was not
    scored, only a decision both extremes (``worst``, ``best``) reach, in the same direction."""
    not_scored_pairs: int = 0
    """Pairs so far with an episode not scored (left out of ``estimate``, ``low`` and ``high``)."""
    worst: tuple[float, float, float, str | None] | None = None
    """(A - B, low, high, decision) with every not-scored episode a failure of A and a success of B; None when
    every pair so far was scored."""
    best: tuple[float, float, float, str | None] | None = None
    """The same with every not-scored episode a success of A and a failure of B."""


def interval(x: np.ndarray, lam: np.ndarray, alpha: float = ALPHA) -> tuple[float, float, float]:
    """(low, high, e-value at no difference) of A - B from pairs ``x`` in [0, 1] and bets ``lam``.

    The set {m: K_t(m) < 1/alpha} is an interval (WSR Prop. 4); its ends are found on a grid, then by
    bisection on log K between the last grid point inside and the first outside.
    """
    x, lam = np.asarray(x, dtype=float), np.asarray(lam, dtype=float)
    cut = math.log(1 / alpha)

    def logk(m: np.ndarray) -> np.ndarray:
        return log_capital(x, lam, m)[-1] if len(x) else np.zeros_like(m)

    grid = np.linspace(0.0, 1.0, GRID)[1:-1]
    inside = logk(grid) < cut
    e0 = float(np.exp(logk(np.array([0.5]))[0]))
    if not inside.any():  # cannot happen for a mean in (0, 1) with alpha < 1, but say so rather than crash
        centre = float(np.mean(x))
        return 2 * centre - 1, 2 * centre - 1, e0
    idx = np.flatnonzero(inside)

    def edge(a: float, b: float) -> float:  # a inside, b outside
        for _ in range(40):
            mid = (a + b) / 2
            if logk(np.array([mid]))[0] < cut:
                a = mid
            else:
                b = mid
        return a

    lo_m = 0.0 if idx[0] == 0 else edge(grid[idx[0]], grid[idx[0] - 1])
    hi_m = 1.0 if idx[-1] == len(grid) - 1 else edge(grid[idx[-1]], grid[idx[-1] + 1])
    return float(2 * lo_m - 1), float(2 * hi_m - 1), e0


def decide(low: float, high: float, floor: float | None) -> str | None:
    """``difference`` when the interval excludes 0, ``within the floor`` when it lies inside +-floor, else None."""
    if low > 0 or high < 0:
        return DIFFERENCE
    if floor is not None and floor > 0 and -floor < low and high < floor:
        return WITHIN_FLOOR
    return None


def looks(d: np.ndarray, ends: list[int], design_pairs: float, floor: float | None = None,
          alpha: float = ALPHA) -> list[Look]:
    """The interval and decision at each look: ``d`` the paired differences (in [-1, 1]) in play order,
    ``ends`` the number of pairs at each look; the floor is given, or estimated from the pairs up to each look.
    """
    d = np.asarray(d, dtype=float)
    if np.any((d < -1) | (d > 1)):
        raise ValueError(f"expected paired differences in [-1, 1]; got values from {d.min()} to {d.max()}")
    x = (d + 1) / 2
    lam = bets(x, floor, design_pairs)[0] if len(x) else np.zeros(0)
    out: list[Look] = []
    for t in ends:
        low, high, e0 = interval(x[:t], lam[:t], alpha)
        f = floor if floor is not None else (
            float(estimated_floor(np.array(_variance(x[:t])), design_pairs)) if np.any(d[:t]) else None)
        out.append(Look(pairs=t, estimate=float(np.mean(d[:t])) if t else math.nan, low=low, high=high,
                        e_value=e0, floor=f, decision=decide(low, high, f)))
    return out


def bounded_look(d: np.ndarray, worst: np.ndarray, best: np.ndarray, design_pairs: float,
                 floor: float | None = None, alpha: float = ALPHA, open_pairs: int = 0) -> Look:
    """The look after every pair so far: the interval of the scored pairs ``d`` (in play order), deciding only what
    the pairs with not-scored episodes counted as the worst (``worst``: every pair, those episodes failures of A and
    successes of B) and as the best outcome for A (``best``) both decide, in the same direction.

    When every pair was scored, ``worst`` and ``best`` equal ``d`` and this is :func:`looks` at the last pair. The
    extremes are what a model endpoint that fails exactly the episodes its agent is losing cannot move: one of them
    is the honest run's sequence. ``open_pairs``: pairs in ``d`` scored only by a retry that did not replay the
    attempt it retried (their ``worst`` and ``best`` are filled like a not-scored pair's)."""
    d, worst, best = (np.asarray(v, dtype=float) for v in (d, worst, best))
    if not len(d):
        raise ValueError("expected at least one pair scored in both runs; every pair so far has a not-scored episode")
    honest = looks(d, [len(d)], design_pairs, floor, alpha)[0]
    gone = len(worst) - len(d) + open_pairs
    if gone == 0:
        return honest
    w, b = (looks(v, [len(v)], design_pairs, floor, alpha)[0] for v in (worst, best))
    same = w.decision == b.decision and (w.decision != DIFFERENCE or (w.low > 0) == (b.low > 0))
    return Look(pairs=honest.pairs, estimate=honest.estimate, low=honest.low, high=honest.high,
                e_value=honest.e_value, floor=honest.floor, decision=w.decision if same else None,
                not_scored_pairs=gone, worst=(w.estimate, w.low, w.high, w.decision),
                best=(b.estimate, b.low, b.high, b.decision))


def _variance(x: np.ndarray) -> float:
    """The WSR variance estimate after all of ``x`` (the one the next bet would use)."""
    return float(predictable_variance(np.append(x, 0.5))[0, -1])


@dataclass(frozen=True)
class SequentialResult:
    """A finished sequential comparison."""

    run_a: str
    """A's run directory."""
    run_b: str
    """B's run directory."""
    agent_a: str
    """A's agent."""
    agent_b: str
    """B's agent."""
    scenarios: int
    """Scenarios both agents play."""
    budget: int
    """Most episodes per agent."""
    episodes: int
    """Episodes each agent played."""
    pairs: int
    """Pairs with both episodes scored (the decision's data)."""
    left_out: int
    """Pairs left out because an episode was not scored."""
    decision: str
    """``difference``, ``within the floor``, ``budget``, or ``not decided`` (the budget spent while the not-scored
    episodes counted either way decided differently)."""
    looks: tuple[Look, ...]
    """The interval and decision after every batch."""
    floor_given: float | None
    """The floor given (None: estimated from the pairs at each look)."""
    design_pairs: int
    """n x K of the fixed design whose floor the decision uses."""
    not_root: int = 0
    """Pairs left out because an episode was a fork or restore, not a root episode (never evidence about the agent;
    the runner plays every episode from reset, so this stays 0 unless a runner hands one back)."""
    select: str = "order"
    """How the pairs were chosen: ``order`` (the seeded order) or ``informative`` (:mod:`._adaptive`)."""

    @property
    def final(self) -> Look | None:
        """The last look (None when nothing was scored)."""
        return self.looks[-1] if self.looks else None


def play_order(scenarios: Sequence[str], rounds: int, seed: int) -> list[tuple[str, int]]:
    """(scenario, round) in play order: per round a fresh seeded permutation of ``scenarios`` (sorted first)."""
    names = sorted(scenarios)
    out = []
    for r in range(rounds):
        perm = np.random.default_rng([seed, r]).permutation(len(names))
        out += [(names[i], r) for i in perm]
    return out
