"""measure.py: statistics against independent implementations, and the CLI end to end.

Every run directory here is built with pyarrow from fixed synthetic data, so the tests do not
depend on the runner.
"""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys
from math import comb
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy import stats
from statsmodels.regression.linear_model import OLS
from statsmodels.stats.proportion import proportion_confint

from rehearsal_env.measure import (
    BELOW_FLOOR,
    Z80,
    ProvenanceMismatch,
    RunError,
    clopper_pearson_upper,
    clustered_se,
    compare,
    load_run,
    mcnemar_exact,
    mean_estimate,
    paired_t,
    pass_all,
    pass_any,
    pass_k_table,
    rate_estimate,
    run_floor,
    sign_flip,
    summarize,
)
from rehearsal_env.measure._paired import _convolve, _grid

ROOT = Path(__file__).resolve().parents[1]
PROVENANCE = {"reward_version": "3", "reward_profile": "benchmark", "world_version": "wv_shop_1",
              "dataset": {"catalog_hash": "c1", "data_anchor": "2024-06-01", "seed_manifest_hash": "s1"},
              "suite": {"version": "1"}, "capabilities": {"suite_fingerprint": "f1", "catalog_match": True}}
REWARD = {"verified": 1.0, "not_achieved": 0.0, "rule_violated": -1.0, "not_scored": None}

# Fixed synthetic data: 12 scenarios x 4 repeats of outcomes; V verified, N not achieved,
# R rule violated, S not scored. Scenarios differ in difficulty, as real suites do.
SUITE_A = ["VVVV", "VVVN", "VVNN", "VNNN", "NNNN", "VVVV", "VVNV", "NNVN", "VVVV", "RNNN", "NNNN", "VVVR"]
SUITE_B = ["VVVV", "VVVV", "VVVN", "VVNN", "NNVN", "VVVV", "VVVV", "NVVN", "VVVV", "NNNN", "VNNN", "VVVV"]
CODES = {"V": "verified", "N": "not_achieved", "R": "rule_violated", "S": "not_scored"}


def write_run(path: Path, suite: list[str], agent: str = "ckpt-1", provenance: dict[str, Any] | None = None,
              false_done: set[tuple[int, int]] | frozenset[tuple[int, int]] = frozenset(),
              parts: int = 0) -> Path:
    """A run directory: one string of outcome codes per scenario, one character per repeat.

    ``parts`` > 0 writes ``episodes.parquet/`` as the runner does: part files plus a hidden
    temporary part that must be ignored. ``provenance={}`` writes no provenance.json.
    """
    rows = []
    for j, codes in enumerate(suite):
        for k, code in enumerate(codes):
            outcome = CODES[code]
            rows.append({"scenario": f"shop/task-{j:02d}", "split": "holdout", "agent": agent, "repeat": k,
                         "outcome": outcome, "reward": REWARD[outcome], "outcome_reward": REWARD[outcome],
                         "false_completion": (j, k) in false_done})
    path.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist(rows)
    if parts:
        (path / "episodes.parquet").mkdir()
        for i, chunk in enumerate(np.array_split(np.arange(len(rows)), parts)):
            pq.write_table(table.take(chunk), path / "episodes.parquet" / f"part-{i:05d}.parquet")
        pq.write_table(table.slice(0, 3), path / "episodes.parquet" / ".part-99999.parquet.tmp")
    else:
        pq.write_table(table, path / "episodes.parquet")
    if provenance != {}:
        (path / "provenance.json").write_text(json.dumps(provenance or PROVENANCE))
    (path / "summary.json").write_text(json.dumps({"episodes": len(rows)}))
    return path


def matrix(suite: list[str], code: str = "V") -> list[np.ndarray]:
    """Per-scenario 0/1 arrays of ``code`` among scored episodes."""
    return [np.array([c == code for c in s if c != "S"], dtype=float) for s in suite]


def cluster_se_statsmodels(values: list[np.ndarray]) -> float:
    y = np.concatenate(values)
    groups = np.repeat(np.arange(len(values)), [len(v) for v in values])
    fit = OLS(y, np.ones_like(y)).fit(cov_type="cluster", cov_kwds={"groups": groups})
    return float(fit.bse[0])


# --- the scenario as the unit -------------------------------------------------------------


def test_clustered_se_matches_statsmodels_cluster_robust() -> None:
    for suite in (SUITE_A, SUITE_B):
        for code in ("V", "R"):
            values = matrix(suite, code)
            means = np.array([v.mean() for v in values])
            assert clustered_se(means) == pytest.approx(cluster_se_statsmodels(values), rel=1e-10)
    rng = np.random.default_rng(7)
    rewards = [rng.normal(rng.normal(), 0.5, 5) for _ in range(30)]
    assert mean_estimate(rewards).se == pytest.approx(cluster_se_statsmodels(rewards), rel=1e-10)


def test_clustered_se_is_wider_than_the_naive_one_when_scenarios_differ() -> None:
    est = rate_estimate(matrix(SUITE_A))
    naive = math.sqrt(est.value * (1 - est.value) / est.n_episodes)
    assert est.se > 1.3 * naive
    assert est.design_effect == pytest.approx(est.se**2 / naive**2)


def test_wilson_matches_statsmodels_for_one_repeat_and_at_n_eff() -> None:
    for x, n in ((0, 20), (3, 20), (17, 20), (20, 20), (7, 18), (1, 5)):
        values = [np.array([1.0])] * x + [np.array([0.0])] * (n - x)
        est = rate_estimate(values)
        low, high = proportion_confint(x, n, alpha=0.05, method="wilson")
        assert (est.low, est.high) == pytest.approx((low, high), abs=1e-12)
        assert est.n_eff == n
    est = rate_estimate(matrix(SUITE_A))
    assert est.n_eff is not None and len(SUITE_A) < est.n_eff < est.n_episodes
    assert est.n_eff == pytest.approx(est.value * (1 - est.value) / est.se**2)
    low, high = proportion_confint(est.value * est.n_eff, est.n_eff, alpha=0.05, method="wilson")
    assert (est.low, est.high) == pytest.approx((low, high), abs=1e-12)


def test_n_eff_is_clamped_to_scenarios_and_episodes() -> None:
    same = [np.array([1.0, 1.0, 1.0]), np.array([0.0, 0.0, 0.0])] * 5  # all variance between scenarios
    assert rate_estimate(same).n_eff == 10
    mixed = [np.array([1.0, 0.0, 1.0, 0.0])] * 6  # no variance between scenarios
    assert rate_estimate(mixed).n_eff == 24


def test_zero_rate_gets_the_exact_clopper_pearson_bound_not_a_collapsed_interval() -> None:
    est = rate_estimate([np.array([0.0])] * 20)
    assert est.high > 0.1  # Wald would give [0, 0]
    assert est.exact_upper == pytest.approx(proportion_confint(0, 20, alpha=0.10, method="beta")[1])
    assert est.exact_upper == pytest.approx(1 - 0.05 ** (1 / 20))
    assert est.exact_upper == pytest.approx(3 / 20, rel=0.08)  # the rule of three
    for x, n in ((2, 30), (0, 7), (5, 9)):
        one_sided_95 = proportion_confint(x, n, alpha=0.10, method="beta")[1]
        assert clopper_pearson_upper(x, n) == pytest.approx(one_sided_95)
    clustered = rate_estimate([np.zeros(4)] * 12)  # 0 of 48 episodes, 12 scenarios: bound at n = 12
    assert clustered.exact_upper == pytest.approx(1 - 0.05 ** (1 / 12))
    assert rate_estimate([np.array([0.0, 1.0])]).exact_upper is None


def test_mean_reward_is_a_t_interval_on_scenario_means() -> None:
    rewards = [np.array([REWARD[CODES[c]] for c in s]) for s in SUITE_A]
    means = np.array([r.mean() for r in rewards])
    est = mean_estimate(rewards)
    ci = stats.ttest_1samp(means, 0).confidence_interval(0.95)
    assert (est.low, est.high) == pytest.approx((ci.low, ci.high), rel=1e-12)


# --- pass^k and pass@k --------------------------------------------------------------------


def test_pass_k_estimators_equal_enumeration_over_all_k_subsets() -> None:
    for outcomes in ((1, 1, 0, 1, 0), (1, 1, 1), (0, 0, 1, 0), (1, 0, 1, 1, 1, 0)):
        n, c = len(outcomes), sum(outcomes)
        for k in range(1, n + 1):
            subsets = list(itertools.combinations(outcomes, k))
            assert pass_all(n, c, k) == pytest.approx(np.mean([all(s) for s in subsets]))
            assert pass_any(n, c, k) == pytest.approx(np.mean([any(s) for s in subsets]))


def test_pass_k_table_averages_scenarios_and_pass_1_is_the_verified_rate() -> None:
    verified = matrix(SUITE_A)
    table = pass_k_table(verified, 4)
    assert [p.k for p in table] == [1, 2, 3, 4]
    expected = np.mean([comb(int(v.sum()), 2) / comb(4, 2) for v in verified])
    assert table[1].pass_all.value == pytest.approx(expected)
    one = rate_estimate(verified)
    assert (table[0].pass_all.low, table[0].pass_all.high) == pytest.approx((one.low, one.high))
    assert all(a.pass_all.value >= b.pass_all.value for a, b in itertools.pairwise(table))
    assert all(a.pass_any.value <= b.pass_any.value for a, b in itertools.pairwise(table))


# --- paired tests -------------------------------------------------------------------------


def test_exact_mcnemar_matches_scipy_binomtest() -> None:
    for b, c in ((0, 9), (2, 0), (5, 3), (12, 4), (7, 7), (1, 1), (0, 0)):
        expected = stats.binomtest(b, b + c, 0.5).pvalue if b + c else 1.0
        assert mcnemar_exact(b, c).p_value == pytest.approx(expected, rel=1e-12)


def brute_force_sign_flip(d: np.ndarray) -> float:
    observed = abs(d.sum())
    sums = [abs(np.dot(s, d)) for s in itertools.product((-1.0, 1.0), repeat=len(d))]
    return float(np.mean([s >= observed - 1e-12 for s in sums]))


def test_sign_flip_matches_brute_force_enumeration() -> None:
    cases = [np.array([0.5, 0.25, -0.25, 0.75, 1.0, 0.0, -0.5, 0.25, 0.5, 1 / 3, 2 / 3]),
             np.array([1.0, 1.0, -1.0, 1.0, 0.0, 1.0, 1.0]),
             np.random.default_rng(3).normal(0.3, 1.0, 13)]
    for d in cases:
        result = sign_flip(d)
        assert result.p_value == pytest.approx(brute_force_sign_flip(d), abs=1e-12)
        assert result.detail.startswith("exact")


def test_sign_flip_convolution_matches_brute_force() -> None:
    d = np.array([1 / 3, 2 / 3, 1.0, 1 / 3, 1 / 3, 2 / 3, 1 / 3, 1.0, 2 / 3, 1 / 3, 1 / 3, 1.0])
    signed = d * np.array([1, 1, 1, -1, 1, 1, -1, 1, 1, 1, -1, 1])
    grid = _grid(np.abs(signed))
    assert grid is not None and grid[1] == 3
    assert _convolve(grid[0], abs(signed.sum()) * grid[1]) == pytest.approx(brute_force_sign_flip(signed))


def test_sign_flip_on_many_scenarios_stays_exact_for_outcome_rewards() -> None:
    # With every |d_j| equal the sign-flip test is the exact binomial (sign) test.
    d = np.array([1 / 3] * 38 + [-1 / 3] * 24 + [0.0] * 8)
    result = sign_flip(d)
    assert "convolution" in result.detail
    assert result.p_value == pytest.approx(stats.binomtest(38, 62, 0.5).pvalue, rel=1e-9)


def test_paired_t_matches_scipy() -> None:
    a, b = (np.array([np.mean(v) for v in matrix(s)]) for s in (SUITE_A, SUITE_B))
    expected = stats.ttest_rel(a, b)
    result = paired_t(a - b)
    assert result.statistic == pytest.approx(expected.statistic)
    assert result.p_value == pytest.approx(expected.pvalue)


# --- the resolution floor -----------------------------------------------------------------


def test_z80_and_floor_formula() -> None:
    assert Z80 == pytest.approx(2.8015852181, abs=1e-9)
    verified = matrix(SUITE_A)
    floor = run_floor("verified", verified, 4, binary=True)
    sw2 = np.mean([np.var(v, ddof=1) for v in verified])
    assert floor.floor_k == pytest.approx(Z80 * math.sqrt(2 * sw2 / (12 * 4)))
    assert floor.floor_1 == pytest.approx(Z80 * math.sqrt(2 * sw2 / 12))
    flips = np.mean([2 * v.sum() * (4 - v.sum()) / (4 * 3) for v in verified])
    assert floor.flip_rate == pytest.approx(flips)


def test_floor_is_unknown_with_one_repeat_and_says_how_to_get_it() -> None:
    floor = run_floor("verified", [np.array([1.0]), np.array([0.0])], 1, binary=True)
    assert not floor.known and floor.floor_k is None
    assert "repeats >= 2" in floor.note


def test_a_true_difference_at_the_floor_is_detected_with_about_80_percent_power() -> None:
    rng = np.random.default_rng(11)
    n, k, sigma = 60, 3, 0.4
    mu = rng.normal(0, 1, n)
    floor = run_floor("reward", [mu[j] + rng.normal(0, sigma, k) for j in range(n)], k, binary=False)
    assert floor.floor_k is not None
    sims = 4000
    a = mu + rng.normal(0, sigma, (sims, n, k)).mean(axis=2)
    b = mu + floor.floor_k + rng.normal(0, sigma, (sims, n, k)).mean(axis=2)
    p = stats.ttest_rel(a, b, axis=1).pvalue
    assert 0.72 < np.mean(p < 0.05) < 0.88


# --- loading, comparing -------------------------------------------------------------------


def test_not_scored_episodes_are_excluded_and_counted(tmp_path: Path) -> None:
    suite = ["VVSV", "NNNS", "SSSS", "VNVN"]
    (run,) = load_run(write_run(tmp_path / "r", suite))
    report = summarize(run)
    assert report.n_not_scored == 6 and report.n_scored == 10
    assert report.n_scenarios == 3 and not report.balanced
    assert report.verified.value == pytest.approx(np.mean([1.0, 0.0, 0.5]))


def test_the_runners_directory_of_parts_reads_as_one_table(tmp_path: Path) -> None:
    (whole,) = load_run(write_run(tmp_path / "file", SUITE_A))
    (parted,) = load_run(write_run(tmp_path / "parts", SUITE_A, parts=5))
    assert parted.n_scored == whole.n_scored == 48
    assert summarize(parted).verified == summarize(whole).verified


def test_runs_without_provenance_are_measured_but_not_compared(tmp_path: Path) -> None:
    (a,) = load_run(write_run(tmp_path / "a", SUITE_A, provenance={}))
    (b,) = load_run(write_run(tmp_path / "b", SUITE_B))
    assert a.provenance is None and summarize(a).n_scored == 48
    with pytest.raises(ProvenanceMismatch, match="expected provenance.json in both"):
        compare(a, b)
    assert compare(a, b, force=True).provenance_differs == ("provenance.json (missing)",)


def test_bad_run_directories_are_refused_with_a_fix(tmp_path: Path) -> None:
    with pytest.raises(RunError, match="episodes.parquet"):
        load_run(tmp_path)
    pq.write_table(pa.table({"scenario": ["a"], "outcome": ["verified"]}), tmp_path / "episodes.parquet")
    (tmp_path / "provenance.json").write_text("{}")
    missing = r"missing \['split', 'agent', 'repeat', 'reward', 'false_completion'\]"
    with pytest.raises(RunError, match=missing):
        load_run(tmp_path)


def test_provenance_mismatch_names_the_fields(tmp_path: Path) -> None:
    other = {**PROVENANCE, "reward_profile": "rl"}
    (a,) = load_run(write_run(tmp_path / "a", SUITE_A))
    (b,) = load_run(write_run(tmp_path / "b", SUITE_B, agent="ckpt-2", provenance=other))
    with pytest.raises(ProvenanceMismatch, match="reward_profile: 'benchmark' vs 'rl'"):
        compare(a, b)
    assert compare(a, b, force=True).provenance_differs == ("reward_profile",)


def test_one_repeat_comparison_uses_exact_mcnemar_on_scenarios(tmp_path: Path) -> None:
    a_codes = "VVNNVVNNVVVNNV"
    b_codes = "VNVVVVVVVVVVNV"
    (a,) = load_run(write_run(tmp_path / "a", list(a_codes)))
    (b,) = load_run(write_run(tmp_path / "b", list(b_codes), agent="ckpt-2"))
    verified = compare(a, b).metrics[0]
    b_only = sum(x == "V" and y != "V" for x, y in zip(a_codes, b_codes, strict=True))
    c_only = sum(x != "V" and y == "V" for x, y in zip(a_codes, b_codes, strict=True))
    assert verified.tests[0].name == "exact McNemar"
    assert verified.tests[0].p_value == pytest.approx(stats.binomtest(b_only, b_only + c_only).pvalue)
    assert verified.floor is None and verified.floor_source.startswith("unknown")


def test_repeated_comparison_uses_sign_flip_and_the_paired_floor(tmp_path: Path) -> None:
    (a,) = load_run(write_run(tmp_path / "a", SUITE_A))
    (b,) = load_run(write_run(tmp_path / "b", SUITE_B, agent="ckpt-2"))
    verified = compare(a, b).metrics[0]
    ma, mb = (np.array([v.mean() for v in matrix(s)]) for s in (SUITE_A, SUITE_B))
    assert verified.difference == pytest.approx(np.mean(ma - mb))
    assert [t.name for t in verified.tests] == ["sign-flip permutation", "paired t"]
    assert verified.tests[0].p_value == pytest.approx(brute_force_sign_flip(ma - mb))
    sa = np.mean([np.var(v, ddof=1) for v in matrix(SUITE_A)])
    sb = np.mean([np.var(v, ddof=1) for v in matrix(SUITE_B)])
    assert verified.floor == pytest.approx(Z80 * math.sqrt((sa / 4 + sb / 4) / 12))
    assert verified.correlation == pytest.approx(np.corrcoef(ma, mb)[0, 1])
    assert verified.floor is not None
    assert (BELOW_FLOOR in verified.verdict) == (abs(verified.difference) < verified.floor)


def test_same_checkpoint_reports_flips_observed_floor_and_drift(tmp_path: Path) -> None:
    rerun = ["VVVN", "VVVN", "VNNN", "VVNN", "NNNN", "VVVV", "VVVV", "NNVV", "VVVV", "NNNN", "NNNN", "VVVR"]
    (a,) = load_run(write_run(tmp_path / "a", SUITE_A))
    (b,) = load_run(write_run(tmp_path / "b", rerun))
    result = compare(a, b)
    rep = result.reproducibility
    assert result.same_checkpoint and rep is not None
    flips = sum((x == "V") != (y == "V") for s, t in zip(SUITE_A, rerun, strict=True)
                for x, y in zip(s, t, strict=True))
    assert (rep.flips, rep.pairs) == (flips, 48)
    d = np.array([v.mean() for v in matrix(SUITE_A)]) - np.array([v.mean() for v in matrix(rerun)])
    assert rep.observed_floor == pytest.approx(Z80 * np.std(d, ddof=1) / math.sqrt(12))
    assert rep.drift == pytest.approx(d.mean())
    assert rep.drift_p == pytest.approx(brute_force_sign_flip(d))


# --- the CLI ------------------------------------------------------------------------------


def run_cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "measure.py"), *map(str, args)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_cli_compares_two_runs_with_the_floor(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", SUITE_A)
    b = write_run(tmp_path / "b", SUITE_B, agent="ckpt-2")
    out = run_cli(a, b)
    assert out.returncode == 0, out.stderr
    assert "paired by scenario" in out.stdout and "resolution floor" in out.stdout
    assert "RF(4) = " in out.stdout and "sign-flip permutation: p = " in out.stdout
    assert "0 not scored (excluded from every rate)" in out.stdout
    close = write_run(tmp_path / "c", [s[:3] + "N" if s[3] == "V" else s for s in SUITE_A], agent="ckpt-3")
    assert BELOW_FLOOR in run_cli(a, close).stdout


def test_cli_json_and_plot(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", SUITE_A, false_done={(4, 0)})
    b = write_run(tmp_path / "b", SUITE_B, agent="ckpt-2")
    png = tmp_path / "ab.png"
    out = run_cli(a, b, "--json", "--plot", png)
    assert out.returncode == 0, out.stderr
    blob = json.loads(out.stdout)
    assert blob["runs"][0]["false_completion"]["count"] == 1
    assert blob["comparison"]["metrics"][0]["floor"] > 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000


def test_cli_single_run_with_one_repeat_says_the_floor_is_unknown(tmp_path: Path) -> None:
    out = run_cli(write_run(tmp_path / "a", list("VVNNVRVNV")))
    assert out.returncode == 0, out.stderr
    assert "unknown" in out.stdout and "repeats >= 2" in out.stdout
    assert "exact upper bound" in out.stdout  # no false completions: 0/9


def test_cli_asks_which_agent_when_a_run_holds_several(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", SUITE_A)
    both = tmp_path / "both"
    write_run(tmp_path / "x", SUITE_A, agent="ckpt-1")
    write_run(tmp_path / "y", SUITE_B, agent="ckpt-2")
    both.mkdir()
    table = pa.concat_tables([pq.read_table(tmp_path / d / "episodes.parquet") for d in ("x", "y")])
    pq.write_table(table, both / "episodes.parquet")
    (both / "provenance.json").write_text(json.dumps(PROVENANCE))
    assert [r.agent for r in load_run(both)] == ["ckpt-1", "ckpt-2"]
    refused = run_cli(a, both)
    assert refused.returncode == 2 and "--agent NAME" in refused.stderr and "ckpt-2" in refused.stderr
    chosen = run_cli(a, both, "--agent", "ckpt-1")
    assert chosen.returncode == 0 and "same checkpoint twice" in chosen.stdout


def test_cli_refuses_differing_provenance_unless_forced(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", SUITE_A)
    b = write_run(tmp_path / "b", SUITE_B, provenance={**PROVENANCE, "suite": {"version": "2"}})
    refused = run_cli(a, b)
    assert refused.returncode == 2 and "suite.version" in refused.stderr and "--force" in refused.stderr
    forced = run_cli(a, b, "--force")
    assert forced.returncode == 0 and "WARNING" in forced.stderr and "suite.version" in forced.stdout
