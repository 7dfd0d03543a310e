"""The coverage study: the 95% intervals cover the truth 93-97% of the time, or a documented reason
says where and by how much they leave that band; at a true difference equal to the floor the
paired test rejects about 80% of the time.

The study is seeded and vectorised (rehearsal_env.measure._coverage); it runs the very interval
kernels the reports use, so a change of method shows here.
"""

from __future__ import annotations

import contextlib
import io
import math

import numpy as np
import pytest
from scipy import stats

from rehearsal_env.measure import KNOWN, CoverageStudy, coverage_study, format_coverage, rate_bounds, rate_estimate
from rehearsal_env.measure.__main__ import main
from rehearsal_env.measure._coverage import BAND, POPULATIONS


@pytest.fixture(scope="module")
def study() -> CoverageStudy:
    return coverage_study()


def test_every_cell_covers_within_the_band_or_its_documented_reason(study: CoverageStudy) -> None:
    metrics = {c.metric for c in study.cells}
    assert metrics == {"verified rate", "mean reward", "pass^2", "pass^K", "difference"}
    assert len(study.cells) == 4 * 3 * (4 + 4 + 3 + 2 + 4)  # populations x n x (designs per metric)
    for c in study.cells:
        if c.status == "ok":
            assert BAND[0] <= c.coverage <= BAND[1], c
        else:
            assert c.status in KNOWN, c
            low, high = KNOWN[c.status][0]
            assert low <= c.coverage <= high, c
    ok = [c for c in study.cells if c.status == "ok"]
    assert len(ok) >= 0.85 * len(study.cells)  # departures are the exception
    for metric in metrics:  # and on average each method is close to 95%
        mean = np.mean([c.coverage for c in study.cells if c.metric == metric])
        assert 0.94 <= mean <= 0.965, metric


def test_the_reasons_name_the_cells_they_explain(study: CoverageStudy) -> None:
    for c in study.cells:
        if c.status == "discrete":
            assert c.n <= 30 and (c.design == "1" or c.metric == "pass^K")
        if c.status == "bound":
            assert c.population == "p = 0.95"
        if c.status == "few":
            assert c.metric == "pass^2" and c.design == "1-5" and c.n == 10


def test_one_repeat_cells_match_the_exact_binomial_coverage_of_wilson(study: CoverageStudy) -> None:
    """With K = 1 and homogeneous p the verified count is binomial: the exact coverage is a finite sum."""
    for p in (0.5, 0.95):
        for n in (10, 30, 100):
            x = np.arange(n + 1)
            means = (x[:, None] > np.arange(n)[None, :]).astype(float)  # x of n verified, one row per x
            _, _, _, low, high = rate_bounds(means, float(n))
            exact = float(np.sum(stats.binom.pmf(x, n, p) * ((low <= p) & (p <= high))))
            cell = next(c for c in study.cells if c.metric == "verified rate" and c.population == f"p = {p:g}"
                        and c.n == n and c.design == "1")
            mc_se = math.sqrt(exact * (1 - exact) / study.replicates)
            assert abs(cell.coverage - exact) < 4 * mc_se + 1e-9, (p, n, cell.coverage, exact)
    assert rate_estimate([np.array([1.0])] * 9 + [np.array([0.0])]).low == pytest.approx(
        rate_bounds(np.array([[1.0] * 9 + [0.0]]), 10.0)[3][0])


def test_at_a_true_difference_equal_to_the_floor_the_paired_test_rejects_about_80_percent(
        study: CoverageStudy) -> None:
    assert [(f.n, f.design) for f in study.floors] == [(30, "3"), (30, "5"), (100, "3"), (30, "1-5")]
    for f in study.floors:
        assert 0.74 <= f.power_t <= 0.86, f
        assert 0.66 <= f.power_sign_flip <= 0.86, f  # exact and discrete: conservative (documented)
        assert f.stated_mean == pytest.approx(f.floor, rel=0.05)  # what one run states is about the truth
    big = study.floors[2]
    assert abs(big.power_t - 0.80) < 0.03  # the normal approximation holds at n = 100
    unbalanced = study.floors[3]  # defect 1: the floor at the design K is too optimistic, K_h is right
    assert unbalanced.design_k_floor is not None and unbalanced.design_k_power is not None
    assert unbalanced.design_k_floor < 0.8 * unbalanced.floor and unbalanced.design_k_power < 0.6
    assert all(f.design_k_floor is None for f in study.floors[:3])


def test_the_table_and_its_command(study: CoverageStudy) -> None:
    text = format_coverage(study)
    assert "0 cell(s) outside their band" in text
    for pop in POPULATIONS:
        assert pop.name in text
    assert "Floor check" in text and "paired t rejects" in text
    md = format_coverage(study, markdown=True)
    assert "| verified rate (Wilson at n_eff) | n | K = 1 | K = 3 | K = 5 | K = 1-5 |" in md
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["--replicates", "200", "--seed", "3"]) in (0, 1)
    assert out.getvalue().startswith("Coverage of the 95% intervals: 200 simulated suites per cell, seed 3")


def test_the_study_is_seeded() -> None:
    one = coverage_study(replicates=100, seed=1, floor_replicates=200, sign_flip_replicates=20)
    two = coverage_study(replicates=100, seed=1, floor_replicates=200, sign_flip_replicates=20)
    assert one == two
