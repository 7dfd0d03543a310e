"""measure.py's words agree with its numbers (issue 38): one procedure gives each decision and its interval, and the
floor lines agree with each other and with the runs' repeats; decisions at both not-scored extremes (issue 35)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_measure import measure_cli, write_run

from rehearsal_env.measure import (
    A_HIGHER,
    B_HIGHER,
    DISAGREE,
    NO_DIFFERENCE,
    NOT_DECIDED,
    compare,
    format_comparison,
    load_run,
    mcnemar_exact,
)
from rehearsal_env.measure._decision import mcnemar_interval, read


def test_five_pairs_all_against_a_is_no_difference_beside_an_interval_that_holds_0(tmp_path: Path) -> None:
    (a,) = load_run(write_run(tmp_path / "a", ["N"] * 5))
    (b,) = load_run(write_run(tmp_path / "b", ["V"] * 5, agent="ckpt-2"))
    m = compare(a, b).metrics[0]
    assert m.difference == -1.0 and m.tests[0].p_value == pytest.approx(0.0625)  # exact McNemar, 5 discordant
    assert m.decision == NO_DIFFERENCE and m.low == -1.0 and m.high > 0  # was [-1.000, -0.386] beside "no difference"
    assert m.interval_method == "McNemar-inverted exact"
    assert m.result.startswith("No significant difference in the verified rate (A - B = -1.000, 95% CI [-1.000, +0.04")
    six = compare(*(load_run(write_run(tmp_path / x, [c] * 6, agent=x))[0] for x, c in (("c", "N"), ("d", "V"))))
    assert six.metrics[0].decision == B_HIGHER and six.metrics[0].high < 0  # 6 of 6: p = 0.031, and the interval


def test_the_mcnemar_interval_excludes_0_exactly_when_the_test_rejects() -> None:
    for n in (5, 12, 40):
        for b in range(n + 1):
            for c in range(n + 1 - b):
                low, high = mcnemar_interval(b, c, n)
                rejects = mcnemar_exact(b, c).p_value < 0.05
                assert rejects == (low > 0 or high < 0), (b, c, n)
                assert low - 1e-12 <= (b - c) / n <= high + 1e-12


def test_no_decision_ever_sits_beside_an_interval_that_contradicts_it() -> None:
    rng = np.random.default_rng(5)
    seen = set()
    for _ in range(400):
        n, k = int(rng.integers(3, 25)), int(rng.integers(1, 4))
        pa, pb = rng.uniform(0, 1, n), rng.uniform(0, 1, n)
        metric = str(rng.choice(["verified", "reward"]))
        va = [(rng.random(k) < p).astype(float) for p in pa]
        vb = [(rng.random(k) < p).astype(float) for p in pb]
        if metric == "reward":
            va, vb = [2 * v - 1 for v in va], [2 * v - 1 for v in vb]
        p = read(metric, va, vb)
        seen.add(p.decision)
        if p.decision == NO_DIFFERENCE:
            assert p.low <= 0 <= p.high and p.tests[0].p_value >= 0.05
        elif p.decision == A_HIGHER:
            assert p.low > 0 and p.tests[0].p_value < 0.05 and p.difference > 0
        elif p.decision == B_HIGHER:
            assert p.high < 0 and p.tests[0].p_value < 0.05 and p.difference < 0
        else:
            assert p.decision == DISAGREE
    assert {NO_DIFFERENCE, A_HIGHER, B_HIGHER} <= seen


def test_when_test_and_interval_disagree_it_says_so_and_decides_nothing(tmp_path: Path) -> None:
    # 5 scenarios x 2 repeats, every one against A: the t interval has zero width (MOVER excludes 0), the exact
    # sign-flip test cannot go below 2/32 = 0.0625 with 5 scenarios
    (a,) = load_run(write_run(tmp_path / "a", ["NN"] * 5))
    (b,) = load_run(write_run(tmp_path / "b", ["VV"] * 5, agent="ckpt-2"))
    m = compare(a, b).metrics[0]
    assert m.decision == DISAGREE and not m.significant and m.high < 0
    assert m.result.startswith("Not decided for the verified rate: the deciding sign-flip permutation test and the "
                               "interval disagree at this size")
    assert "No significant difference in the verified rate" not in format_comparison(compare(a, b))


def test_the_floor_lines_agree_with_each_other_and_with_the_repeats(tmp_path: Path) -> None:
    """Two runs of one checkpoint with 2 repeats that all agree: every floor line says unknown, and why."""
    suite = ["VV", "NN", "VV", "VV", "NN", "VV"]
    (a,), (b,) = load_run(write_run(tmp_path / "a", suite)), load_run(write_run(tmp_path / "b", suite))
    c = compare(a, b)
    rep = c.reproducibility
    assert rep is not None and np.isnan(rep.observed_floor) and rep.within_floor is None
    assert "no repeats" not in rep.note and "agreed on every scenario" in rep.note
    out = measure_cli(tmp_path / "a", tmp_path / "b")
    assert "observed floor unknown; floor predicted by the repeats unknown" in out
    assert "observed floor 0.000" not in out and "the runs have no repeats" not in out
    assert "2 scored repeat(s) each" in out


def test_a_decision_that_holds_either_way_is_taken_and_says_so(tmp_path: Path) -> None:
    (a,) = load_run(write_run(tmp_path / "a", ["VVS", "VVV", "VVV", "VVV", "VVV", "VVV", "VVV", "VVV"]))
    (b,) = load_run(write_run(tmp_path / "b", ["NNN"] * 8, agent="ckpt-2"))
    m = compare(a, b).metrics[0]
    assert m.extremes is not None and m.decision == A_HIGHER
    assert m.extremes.worst_for_a.decision == m.extremes.best_for_a.decision == A_HIGHER
    assert "it holds with the 1 not-scored episodes counted either way" in m.result
    (flip,) = load_run(write_run(tmp_path / "c", ["VSS", "VSS", "VSS", "VSS", "VSS", "VSS", "VSS", "VSS"]))
    m = compare(flip, b).metrics[0]
    assert m.decision == NOT_DECIDED and m.extremes is not None
    assert m.result.startswith("The verified rate is not decided: 16 episodes not scored (unknown 16); ")
