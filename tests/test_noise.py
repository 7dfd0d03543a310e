"""The noise split by its source (issue 35): the estimator from forked resamples, checked where the truth is known.

Branches are drawn from a model with known variance components (:func:`simulated_branches`): per base episode a
scenario level, and for each source (agent, customer, faults) its own draw, resampled alone in that source's
branches and all together in the ``all`` branches. The shares the estimator gives must cover the exact shares.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rehearsal_env.measure._noise import (
    ALL,
    INFRASTRUCTURE,
    SOURCES,
    format_noise,
    noise_shares,
    plot_noise,
    simulated_branches,
    true_shares,
)

DESIGNS = [
    ({"agent": 1.0, "customer": 0.6, "faults": 0.3}, 1.0),
    ({"agent": 0.2, "customer": 1.2, "faults": 0.5}, 0.5),
    ({"agent": 0.5, "customer": 0.0, "faults": 1.0}, 1.5),
]


@pytest.mark.parametrize(("sd", "level"), DESIGNS)
def test_the_shares_cover_the_true_shares(sd: dict[str, float], level: float) -> None:
    truth = true_shares(sd, level, draws=200_000)
    branches = simulated_branches(np.random.default_rng(7), 600, 6, sd, level)
    shares = {s.source: s for s in noise_shares(branches, resamples=400)}
    for source in (*SOURCES, "interaction"):
        s = shares[source]
        assert s.low - 0.04 <= truth[source] <= s.high + 0.04, (source, s, truth[source])  # 15 intervals at 95%
        assert s.high - s.low < 0.3  # an interval that says something
    assert shares[INFRASTRUCTURE].share == 0.0
    if sd["customer"] == 0.0:
        assert shares["customer"].share == 0.0 and truth["customer"] == 0.0


def test_a_source_that_dominates_is_named_first_and_not_scored_branches_are_infrastructure(tmp_path: Path) -> None:
    sd = {"agent": 0.1, "customer": 2.0, "faults": 0.1}
    branches = simulated_branches(np.random.default_rng(3), 300, 5, sd, 0.3, not_scored=0.1)
    shares = noise_shares(branches, resamples=200)
    by = {s.source: s.share for s in shares}
    assert max(SOURCES, key=lambda s: by[s]) == "customer" and by["customer"] > 0.8
    assert 0.05 < by[INFRASTRUCTURE] < 0.6
    text = format_noise(shares, true_shares(sd, 0.3, draws=50_000))
    assert "customer" in text and "infrastructure" in text
    assert Path(plot_noise(shares, str(tmp_path / "noise.png"))).stat().st_size > 1000


def test_unusable_branches_are_refused_saying_what_was_expected() -> None:
    with pytest.raises(ValueError, match="expected branches resampling every source under 'all'"):
        noise_shares({"agent": np.zeros((3, 2))})
    with pytest.raises(ValueError, match="expected the same number"):
        noise_shares({ALL: np.zeros((3, 2)), "agent": np.zeros((4, 2))})
