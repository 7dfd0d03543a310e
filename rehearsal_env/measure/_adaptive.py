"""Choosing which scenario a sequential comparison plays next: by how much it can tell A from B.

A scenario that A and B both always pass, or both always fail, gives pairs with d = 0 every time: it tells
nothing, and a fixed design spends its share of episodes on it anyway. After one round in the seeded order
(every scenario once), each pair of a batch goes to the scenario whose **discordance** (the chance that A and B
disagree on it, ``P(y_A != y_B)``) is largest in a draw from its posterior (:func:`pick`: Thompson sampling on a
Beta(1/2, 1/2) prior updated with the pairs scored on that scenario so far and, when given, pseudo-pairs from
earlier runs of the world: an item model of each scenario, :func:`prior_from_rates`). With an item model there is
no seeded round: the item model already says which scenarios are likely to tell A from B, so Thompson sampling
chooses from the first pair on (:func:`first_round`). Scenarios that never disagreed fade out of play; those that
do are played more; none is ever excluded.

The anytime-valid guarantee is kept because the choice is predictable: it uses only pairs already scored (a
batch's pairs are chosen before any of them is played) and a seeded generator. Under "no difference" (A and B
succeed equally often on every scenario) each pair's x = (d + 1) / 2 has conditional mean 1/2 whichever scenario
was chosen, so the betting capital at 1/2 is still a nonnegative martingale and the chance of ever declaring a
difference stays at most alpha (Ville); the item model is fixed before the comparison starts, so choosing from
the first pair with it changes nothing here. What the interval covers changes: the mean difference of the pairs
as played, weighted to the scenarios that disagree. Scenarios that never disagree have difference 0, so when the
scenarios' differences share one sign that mean has the sign of the suite's and is at least as large: "a
difference" keeps its direction, and "within the floor" on it implies within the floor on the suite; with mixed
signs it is the mean weighted toward the scenarios that disagree most (see docs/measure.md for the study and the
one assumption: a scenario that never disagreed in the pairs played, or, with an item model, was never played,
would not have disagreed later either).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

PRIOR = 0.5
"""The Beta prior's two parameters (Jeffreys): a scenario played once is still drawn often."""
PRIOR_WEIGHT = 4.0
"""How many pairs the earlier runs' item model counts for, per scenario, at most."""
SELECT = ("order", "informative")
"""The selection rules ``rehearsal compare`` knows: the seeded order (every scenario in turn), or informative."""


def pick(rng: np.random.Generator, plays: np.ndarray, discordant: np.ndarray, size: int,
         prior_a: np.ndarray | None = None, prior_b: np.ndarray | None = None) -> np.ndarray:
    """The scenarios (indices) of the next ``size`` pairs: for each pair, a Thompson draw of every scenario's
    discordance from Beta(PRIOR + discordant + prior_a, PRIOR + concordant + prior_b), and its argmax.

    ``plays`` and ``discordant`` have shape (..., n): leading axes are independent comparisons (replicates); the
    result has shape (..., size)."""
    plays, discordant = np.asarray(plays, dtype=float), np.asarray(discordant, dtype=float)
    a = PRIOR + discordant + (0.0 if prior_a is None else prior_a)
    b = PRIOR + (plays - discordant) + (0.0 if prior_b is None else prior_b)
    shape = (*plays.shape[:-1], size, plays.shape[-1])
    draws = rng.beta(np.broadcast_to(a[..., None, :], shape), np.broadcast_to(b[..., None, :], shape))
    return np.asarray(draws.argmax(axis=-1))


def prior_from_rates(rates: Sequence[float] | np.ndarray,
                     episodes: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pseudo-pairs of discordance per scenario from earlier runs of the world (an item model): a scenario passed at
    rate p by earlier agents disagrees, between two agents like them, with chance 2 p (1 - p); it counts as
    ``min(episodes, PRIOR_WEIGHT)`` pairs. Returns (prior_a, prior_b) for :func:`pick`."""
    p = np.clip(np.asarray(rates, dtype=float), 0.0, 1.0)
    w = np.minimum(np.asarray(episodes, dtype=float), PRIOR_WEIGHT)
    disagree = 2 * p * (1 - p)
    return w * disagree, w * (1 - disagree)


def earlier_rates(records: Sequence[Mapping[str, object]], scenarios: Sequence[str]) -> tuple[list[float], list[int]]:
    """Each scenario's verified share and scored episodes in earlier records (rows with ``scenario`` and
    ``outcome``); a scenario without any has rate 1/2 and 0 episodes (no prior)."""
    counts = {s: [0, 0] for s in scenarios}
    for r in records:
        got = counts.get(str(r["scenario"]))
        if got is not None and r["outcome"] != "not_scored":
            got[0] += r["outcome"] == "verified"
            got[1] += 1
    return ([v / n if n else 0.5 for v, n in counts.values()], [n for _, n in counts.values()])


def first_round(scenarios: int, prior: object | None) -> int:
    """Pairs played in the seeded order before :func:`pick` chooses: one round (every scenario once) without an
    item model, none with one (its prior already tells the scenarios apart)."""
    return 0 if prior is not None else scenarios


def adaptive_outcomes(rng: np.random.Generator, pa: np.ndarray, pb: np.ndarray, total: int, batch: int,
                      prior: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """Simulated paired differences (replicates x ``total`` pairs) in play order under informative selection: the
    first round (:func:`first_round`) a seeded permutation, then batches of ``batch`` pairs chosen by :func:`pick`
    from the pairs of the earlier batches."""
    reps, n = pa.shape
    d = np.zeros((reps, total))
    plays = np.zeros((reps, n))
    disagree = np.zeros((reps, n))
    row = np.arange(reps)[:, None]
    first = min(first_round(n, prior), total)
    order = rng.permuted(np.tile(np.arange(n), (reps, 1)), axis=1)[:, :first]
    done = 0
    while done < total:
        size = min(batch, total - done)
        if done < first:
            size = min(size, first - done)
            chosen = order[:, done:done + size]
        else:
            chosen = pick(rng, plays, disagree, size, *(prior or (None, None)))
        ya = rng.random(chosen.shape) < pa[row, chosen]
        yb = rng.random(chosen.shape) < pb[row, chosen]
        diff = ya.astype(float) - yb.astype(float)
        d[:, done:done + size] = diff
        np.add.at(plays, (np.broadcast_to(row, chosen.shape), chosen), 1.0)
        np.add.at(disagree, (np.broadcast_to(row, chosen.shape), chosen), (diff != 0).astype(float))
        done += size
    return d
