"""measure.py: statistics against independent implementations, and the CLI end to end.

Every run directory here is built with pyarrow from fixed synthetic data, so the tests do not
depend on the runner.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import itertools
import json
import math
import shutil
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
    format_comparison,
    load_run,
    mcnemar_exact,
    mean_estimate,
    paired_t,
    pass_all,
    pass_any,
    pass_k_table,
    rate_estimate,
    run_floor,
    select_agent,
    sign_flip,
    summarize,
)
from rehearsal_env.measure._paired import _convolve, _grid
from rehearsal_env.records import RECORD_VERSION, VERSION_KEY, seal_run, write_part_bytes

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
    if provenance != {}:
        (path / "provenance.json").write_text(json.dumps(provenance or PROVENANCE))
    (path / "summary.json").write_text(json.dumps({"episodes": len(rows)}))
    if parts:
        for i, chunk in enumerate(np.array_split(np.arange(len(rows)), parts)):
            write_part_bytes(path, _bytes(table.take(chunk)), i)
        pq.write_table(table.slice(0, 3), path / "episodes.parquet" / ".part-99999.parquet.tmp")
        seal_run(path)
    else:
        store(path, table)
    return path


def _bytes(table: pa.Table) -> bytes:
    """The table as a part's bytes, stamped with the record version a runner stamps."""
    sink = pa.BufferOutputStream()
    pq.write_table(table.replace_schema_metadata({VERSION_KEY: str(RECORD_VERSION)}), sink)
    return bytes(sink.getvalue().to_pybytes())


def store(path: Path, table: pa.Table) -> None:
    """Write ``table`` as the run directory's one part, with its manifest, and seal the run (as a runner
    does when it finishes: write provenance.json and summary.json first)."""
    episodes = path / "episodes.parquet"
    if episodes.is_dir():
        shutil.rmtree(episodes)
    write_part_bytes(path, _bytes(table), 0)
    seal_run(path)


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


def test_mean_reward_is_the_bounded_score_interval_computed_by_hand() -> None:
    rewards = [np.array([REWARD[CODES[c]] for c in s]) for s in SUITE_A]
    means = np.array([r.mean() for r in rewards])
    n = len(means)
    q = (means + 1) / 2  # rescaled to [0, 1] by the bounds [-1, 1]
    qbar, se_q = q.mean(), q.std(ddof=1) / math.sqrt(n)
    n_eff = qbar * (1 - qbar) / se_q**2
    t = stats.t.ppf(0.975, n - 1)  # the dispersion is estimated: t quantile in place of z
    low, high = proportion_confint(qbar * n_eff, n_eff, alpha=2 * stats.norm.sf(t), method="wilson")
    est = mean_estimate(rewards)
    assert (est.value, est.se) == pytest.approx((means.mean(), means.std(ddof=1) / math.sqrt(n)), rel=1e-12)
    assert (est.low, est.high) == pytest.approx((2 * low - 1, 2 * high - 1), rel=1e-10)
    assert est.bounds == (-1.0, 1.0)
    # issue 27: q(1-q)/SE^2 = 49.4 for 48 episodes is no effective sample size; it is not given or printed
    assert n_eff > est.n_episodes == 48 and est.n_eff is None
    assert "n_eff" not in est.method and "dispersion 0.97 x binomial" in est.method
    tci = stats.ttest_1samp(means, 0).confidence_interval(0.95)  # to first order the t interval
    assert abs(est.low - tci.low) < 0.06 and abs(est.high - tci.high) < 0.06


def test_an_all_verified_run_has_no_zero_width_reward_interval() -> None:
    """Issue 12, defect 4: [1.000, 1.000] next to a verified-rate interval of [0.839, 1]."""
    verified = [np.array([1.0])] * 20
    rate = rate_estimate(verified)
    assert (rate.low, rate.high) == pytest.approx(proportion_confint(20, 20, method="wilson"), abs=1e-12)
    est = mean_estimate(verified)
    wilson_low = proportion_confint(20, 20, alpha=0.05, method="wilson")[0]  # 0.8389: the bound on the extreme
    assert est.high == 1.0 and est.low == pytest.approx(-1 + 2 * wilson_low, rel=1e-12)  # 0.678
    assert "worst-case" in est.method
    clustered = mean_estimate([np.ones(3)] * 20)  # 60 episodes, 20 scenarios: the bound is at n = 20
    assert clustered.low == pytest.approx(est.low)
    nothing = mean_estimate([np.zeros(3)] * 20)  # every reward 0: SE 0 inside the bounds, n_eff = N = 60
    lo, hi = proportion_confint(30, 60, alpha=0.05, method="wilson")
    assert (nothing.low, nothing.high) == pytest.approx((2 * lo - 1, 2 * hi - 1), rel=1e-12)
    rng = np.random.default_rng(5)
    for _ in range(200):  # never zero width, never outside the bounds
        k = int(rng.integers(1, 4))
        values = [rng.choice([-1.0, 0.0, 1.0], size=k, p=rng.dirichlet([0.3, 0.3, 0.3])) for _ in range(12)]
        e = mean_estimate(values)
        assert -1.0 <= e.low < e.high <= 1.0 and e.low <= e.value <= e.high


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
    floor = run_floor("verified", verified, binary=True)
    sw2 = np.mean([np.var(v, ddof=1) for v in verified])
    assert floor.floor_k == pytest.approx(Z80 * math.sqrt(2 * sw2 / (12 * 4)))
    assert floor.floor_1 == pytest.approx(Z80 * math.sqrt(2 * sw2 / 12))
    flips = np.mean([2 * v.sum() * (4 - v.sum()) / (4 * 3) for v in verified])
    assert floor.flip_rate == pytest.approx(flips)


def test_floor_is_unknown_with_one_repeat_and_says_how_to_get_it() -> None:
    floor = run_floor("verified", [np.array([1.0]), np.array([0.0])] * 3, binary=True)
    assert not floor.known and floor.floor_k is None
    assert "repeats >= 2" in floor.note


def test_a_true_difference_at_the_floor_is_detected_with_about_80_percent_power() -> None:
    rng = np.random.default_rng(11)
    n, k, sigma = 60, 3, 0.4
    mu = rng.normal(0, 1, n)
    floor = run_floor("reward", [mu[j] + rng.normal(0, sigma, k) for j in range(n)], binary=False)
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
    with pytest.raises(RunError, match="a single Parquet file says nothing about who wrote it"):
        load_run(tmp_path)
    (tmp_path / "episodes.parquet").unlink()
    (tmp_path / "provenance.json").write_text("{}")
    store(tmp_path, pa.table({"scenario": ["a"], "outcome": ["verified"]}))
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


def measure_cli(*args: str | Path) -> str:
    """measure.py's main() in this process (no interpreter start-up); its stdout."""
    spec = importlib.util.spec_from_file_location("measure_script", ROOT / "measure.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert module.main([str(x) for x in args]) == 0
    return out.getvalue()


def test_cli_compares_two_runs_with_the_floor(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", SUITE_A)
    b = write_run(tmp_path / "b", SUITE_B, agent="ckpt-2")
    out = run_cli(a, b)
    assert out.returncode == 0, out.stderr
    assert "paired by scenario" in out.stdout and "resolution floor" in out.stdout
    assert "RF(4) = " in out.stdout and "sign-flip permutation: p = " in out.stdout
    assert "0 not scored (0.0% of 48 episodes; excluded from every rate)" in out.stdout
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
    (both / "provenance.json").write_text(json.dumps(PROVENANCE))
    store(both, table)
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


# --- issue 12: K from scored episodes, the verdict, too few scenarios, not scored --------------

D1 = ["VVV", "VVN", "VNN", "NNN", "VNV", "NVV"] * 5  # 30 scenarios x 3 repeats


def hand_floor(suite: list[str]) -> float:
    """Z80 * sqrt(2 * sw2 * mean_j(1/K_j) / n) over the scored repeats, by hand."""
    values = [np.array([c == "V" for c in s if c != "S"], dtype=float) for s in suite]
    sw2 = np.mean([np.var(v, ddof=1) for v in values if len(v) >= 2])
    return Z80 * math.sqrt(2 * sw2 * np.mean([1 / len(v) for v in values]) / len(values))


def test_an_extra_not_scored_episode_is_no_repeat(tmp_path: Path) -> None:
    """Defect 1: one extra not-scored episode in 5 scenarios made it "4 repeats" and RF(4)."""
    extra = [s + "S" if j < 5 else s for j, s in enumerate(D1)]
    (run,) = load_run(write_run(tmp_path / "extra", extra))
    report = summarize(run)
    floor = report.floors[0]
    assert report.repeats == run.repeats == floor.repeats == 3 and report.balanced
    assert floor.label == "RF(3)"
    sw2 = np.mean([np.var([c == "V" for c in s], ddof=1) for s in D1])
    assert floor.floor_k == pytest.approx(Z80 * math.sqrt(2 * sw2 / (30 * 3)), rel=1e-12)
    assert floor.floor_k == pytest.approx(hand_floor(extra), rel=1e-12)
    out = measure_cli(tmp_path / "extra")
    assert "RF(3) = " in out and "RF(4)" not in out and "5 not scored (5.3% of 95 episodes" in out


def test_a_repeat_lost_everywhere_states_the_floor_at_the_repeats_left(tmp_path: Path) -> None:
    lost = [s[:2] + "S" for s in D1]
    (run,) = load_run(write_run(tmp_path / "lost", lost))
    floor = summarize(run).floors[0]
    assert run.repeats == 2 and floor.label == "RF(2)"
    sw2 = np.mean([np.var([c == "V" for c in s[:2]], ddof=1) for s in D1])
    assert floor.floor_k == pytest.approx(Z80 * math.sqrt(2 * sw2 / (30 * 2)), rel=1e-12)


def test_unbalanced_repeats_use_the_mean_of_one_over_k(tmp_path: Path) -> None:
    uneven = [s[:2] + "S" if j % 3 == 0 else s for j, s in enumerate(D1)]  # 10 scenarios keep 2, 20 keep 3
    (run,) = load_run(write_run(tmp_path / "u", uneven))
    report = summarize(run)
    floor = report.floors[0]
    inv = (10 / 2 + 20 / 3) / 30
    assert floor.harmonic_repeats == pytest.approx(1 / inv) and floor.label == "RF(K_h = 2.57)"
    assert floor.floor_k == pytest.approx(hand_floor(uneven), rel=1e-12)
    assert not report.balanced and report.harmonic_repeats == pytest.approx(1 / inv)
    (full,) = load_run(write_run(tmp_path / "full", D1, agent="ckpt-2"))
    cmp = compare(run, full).metrics[0]
    values_u = [np.array([c == "V" for c in s if c != "S"], dtype=float) for s in uneven]
    values_f = [np.array([c == "V" for c in s], dtype=float) for s in D1]
    sa = np.mean([np.var(v, ddof=1) for v in values_u])
    sb = np.mean([np.var(v, ddof=1) for v in values_f])
    assert cmp.floor == pytest.approx(Z80 * math.sqrt((sa * inv + sb / 3) / 30), rel=1e-12)


def shifted(suite: list[str], every: int) -> list[str]:
    """The suite with one verified repeat turned into not achieved in every ``every``-th scenario."""
    return [s.replace("V", "N", 1) if j % every == 0 and "V" in s else s for j, s in enumerate(suite)]


SIGNIFICANT_A = ["VVVV", "VVVN", "VVNN", "VNVN", "NVVV", "VNNV"] * 5  # 30 scenarios x 4 repeats
SIGNIFICANT_B = shifted(SIGNIFICANT_A, 2)  # 15 scenarios lose one verified repeat: d_j = 0.25 there


def test_a_significant_difference_below_the_floor_says_both(tmp_path: Path) -> None:
    """Defect 2: the test's result first (direction, size, CI, p), the floor as a power statement."""
    (a,) = load_run(write_run(tmp_path / "a", SIGNIFICANT_A))
    (b,) = load_run(write_run(tmp_path / "b", SIGNIFICANT_B, agent="ckpt-2"))
    m = compare(a, b).metrics[0]
    ma, mb = (np.array([v.mean() for v in matrix(s)]) for s in (SIGNIFICANT_A, SIGNIFICANT_B))
    d = ma - mb
    assert m.difference == pytest.approx(0.125) and d.mean() == pytest.approx(0.125)
    assert m.tests[0].p_value == pytest.approx(2 / 2**15)  # 15 positive d_j: exact sign flip
    ci = stats.ttest_rel(ma, mb).confidence_interval(0.95)
    assert (m.low, m.high) == pytest.approx((ci.low, ci.high), rel=1e-12)
    assert m.floor is not None and m.floor == pytest.approx(hand_floor_pair(SIGNIFICANT_A, SIGNIFICANT_B))
    assert m.significant and m.below_floor and m.difference < m.floor
    assert m.result == (f"A's verified rate is higher than B's by 0.125, a significant difference "
                        f"(A - B = +0.125, 95% CI [{ci.low:+.3f}, {ci.high:+.3f}] (t interval), p = 6.1e-05 by "
                        "sign-flip permutation).")
    assert m.power == (f"The difference is {BELOW_FLOOR}, the smallest true difference this suite detects "
                       f"80% of the time ({m.floor:.3f}): a true difference this small is missed more than 20% "
                       "of the time, so a rerun may not show it although this test did.")
    assert m.verdict == f"{m.result} {m.power}"
    reverse = compare(b, a).metrics[0]  # B higher: the direction comes first, never only "below the floor"
    assert reverse.result.startswith("B's verified rate is higher than A's by 0.125, a significant difference")


def hand_floor_pair(suite_a: list[str], suite_b: list[str]) -> float:
    sa = np.mean([np.var(v, ddof=1) for v in matrix(suite_a)])
    sb = np.mean([np.var(v, ddof=1) for v in matrix(suite_b)])
    return Z80 * math.sqrt((sa / 4 + sb / 4) / len(suite_a))


def test_cli_says_significant_and_below_the_floor_in_one_sentence_each(tmp_path: Path) -> None:
    out = run_cli(write_run(tmp_path / "a", SIGNIFICANT_A), write_run(tmp_path / "b", SIGNIFICANT_B, agent="ckpt-2"))
    assert out.returncode == 0, out.stderr
    lines = [x.strip() for x in out.stdout.splitlines()]
    i = lines.index(next(x for x in lines if x.startswith("=> A's verified rate")))
    result, power = lines[i].removeprefix("=> "), lines[i + 1]
    assert result.count(". ") == 0 and result.endswith(").")  # one sentence
    assert "a significant difference (A - B = +0.125, 95% CI [" in result and "p = 6.1e-05" in result
    assert power.startswith(f"The difference is {BELOW_FLOOR}, the smallest true difference this suite detects "
                            "80% of the time (") and power.count(". ") == 0 and power.endswith(".")


def test_the_other_verdicts_read_correctly(tmp_path: Path) -> None:
    (a,) = load_run(write_run(tmp_path / "a", SIGNIFICANT_A))
    (same,) = load_run(write_run(tmp_path / "s", shifted(SIGNIFICANT_A, 10), agent="ckpt-2"))
    m = compare(a, same).metrics[0]  # 3 scenarios differ: not significant, below the floor
    assert not m.significant and m.below_floor
    assert m.result.startswith("No significant difference in the verified rate (A - B = +0.025")
    assert m.power.endswith("so this is no evidence that A and B are equal.")
    (far,) = load_run(write_run(tmp_path / "f", [s.replace("V", "N") for s in SIGNIFICANT_A], agent="ckpt-3"))
    m = compare(a, far).metrics[0]
    assert m.significant and not m.below_floor
    assert m.power.startswith("The difference is above the resolution floor")


def test_the_plot_title_says_the_test_first_and_the_floor_as_power(tmp_path: Path) -> None:
    from rehearsal_env.measure._plot import _headline

    (a,) = load_run(write_run(tmp_path / "a", SIGNIFICANT_A))
    (b,) = load_run(write_run(tmp_path / "b", SIGNIFICANT_B, agent="ckpt-2"))
    test, power = _headline([summarize(a), summarize(b)], compare(a, b)).split("\n")
    assert test.startswith("verified rate: A higher, A - B = +0.125 [") and test.endswith("significant")
    assert power.startswith(f"{BELOW_FLOOR} (") and "detected less than 80% of the time" in power


def test_one_scenario_gives_no_floor_and_says_so(tmp_path: Path) -> None:
    """Defect 3: one scenario x 3 repeats printed RF(3) = 1.321 without a warning."""
    (run,) = load_run(write_run(tmp_path / "one", ["VVN"]))
    report = summarize(run)
    assert report.too_few_scenarios and not any(f.known for f in report.floors)
    assert all(f.floor_k is None and f.note.startswith("not given: only 1 scenario(s)") for f in report.floors)
    assert report.warnings[0].startswith("WARNING: only 1 scenario(s): with fewer than 5 no resolution floor")
    out = measure_cli(tmp_path / "one")
    assert "WARNING: only 1 scenario(s)" in out and "RF(" not in out and "1.321" not in out
    (four,) = load_run(write_run(tmp_path / "four", D1[:4]))
    (other,) = load_run(write_run(tmp_path / "other", D1[1:5], agent="ckpt-2"))
    m = compare(four, other).metrics[0]
    assert m.floor is None and m.below_floor is None and m.floor_source.startswith("not given: only 4")
    assert m.power.startswith("No resolution floor is given: only 4 paired scenario(s), fewer than 5")
    assert summarize(load_run(write_run(tmp_path / "five", D1[:5]))[0]).floors[0].known


def write_causes(path: Path, suite: list[str], causes: dict[tuple[int, int], str]) -> Path:
    """write_run, then add a not_scored_cause column (None where the record names none)."""
    write_run(path, suite)
    table = pq.read_table(path / "episodes.parquet")
    keys = zip(table.column("scenario").to_pylist(), table.column("repeat").to_pylist(), strict=True)
    column = [causes.get((int(s.rsplit("-", 1)[1]), r)) for s, r in keys]
    store(path, table.append_column("not_scored_cause", pa.array(column, pa.string())))
    return path


def test_not_scored_count_share_causes_and_worst_case(tmp_path: Path) -> None:
    """Defect 5: the count and share next to every headline, causes, and the worst case."""
    suite = ["VVSV", "NNNS", "VVVV", "VNVN", "SVVV", "NNVN"]
    path = write_causes(tmp_path / "r", suite, {(0, 2): "provider", (1, 3): "provider", (4, 0): "sandbox"})
    (run,) = load_run(path)
    report = summarize(run)
    assert (report.n_not_scored, report.not_scored_share) == (3, pytest.approx(3 / 24))
    assert report.not_scored_causes == {"provider": 2, "sandbox": 1}
    filled = [np.array([c == "V" for c in s], dtype=float) for s in suite]  # "S" counts as not verified
    worst = report.worst_case["verified"]
    assert worst.value == pytest.approx(np.mean([v.mean() for v in filled]))
    assert (worst.low, worst.high) == pytest.approx((rate_estimate(filled).low, rate_estimate(filled).high))
    assert report.worst_case["reward"].value == pytest.approx(
        np.mean([np.mean([{"V": 1, "N": 0, "S": -1}[c] for c in s]) for s in suite]))
    out = measure_cli(path)
    assert "3 not scored (12.5% of 24 episodes; excluded from every rate; causes: provider 2, sandbox 1)" in out
    rows = [x for x in out.splitlines() if x.strip().startswith(("verified rate ", "rule-violated rate ",
                                                                  "false-completion rate ", "mean reward "))]
    assert len(rows) == 8 and all("3 (12.5%)" in r for r in rows[:4])
    assert "worst case, the 3 not-scored episode(s) counted as failures" in out
    (old,) = load_run(write_run(tmp_path / "old", suite))  # records without the column
    assert old.not_scored_causes == {"unknown": 3}


def test_a_run_with_everything_scored_has_no_worst_case(tmp_path: Path) -> None:
    (run,) = load_run(write_run(tmp_path / "a", SUITE_A))
    assert summarize(run).worst_case == {}
    assert "worst case" not in measure_cli(tmp_path / "a")


def test_comparison_shows_not_scored_and_bounds_the_difference(tmp_path: Path) -> None:
    a_suite = [s[:3] + "S" if j < 4 else s for j, s in enumerate(SUITE_A)]
    (a,) = load_run(write_causes(tmp_path / "a", a_suite, {(j, 3): "worker" for j in range(4)}))
    (b,) = load_run(write_run(tmp_path / "b", SUITE_B, agent="ckpt-2"))
    c = compare(a, b)
    assert c.not_scored == ((4, 48, (("worker", 4),)), (0, 48, ()))
    m = c.metrics[0]
    fail = np.array([np.mean([x == "V" for x in s]) for s in a_suite])  # S as not verified
    win = np.array([np.mean([x in "VS" for x in s]) for s in a_suite])  # S as verified
    mb = np.array([v.mean() for v in matrix(SUITE_B)])
    assert (m.worst_low, m.worst_high) == pytest.approx(((fail - mb).mean(), (win - mb).mean()))
    out = format_comparison(c)
    assert "not scored (excluded): A 4 of 48 episodes (8.3%; worker 4); B 0 of 48 episodes (0.0%)" in out
    assert f"A - B between {m.worst_low:+.3f} and {m.worst_high:+.3f}" in out


def test_equal_differences_get_a_newcombe_interval_not_zero_width(tmp_path: Path) -> None:
    (a,) = load_run(write_run(tmp_path / "a", ["VVV"] * 12))
    (b,) = load_run(write_run(tmp_path / "b", ["VVV"] * 12, agent="ckpt-2"))
    m = compare(a, b).metrics[0]
    assert m.interval_method == "MOVER" and m.difference == 0
    one = rate_estimate([np.ones(3)] * 12)  # both runs [0.757, 1]: the difference is within -+0.243
    assert (m.low, m.high) == pytest.approx((-(1 - one.low), 1 - one.low))


def test_each_version_of_an_agent_profile_is_its_own_checkpoint(tmp_path: Path) -> None:
    """Records carry the profile's version: v1 and v2 of one name are measured and compared apart."""
    run = write_run(tmp_path / "two", SUITE_A, agent="support-bot")
    table = pq.read_table(run / "episodes.parquet").to_pylist()
    for i, row in enumerate(table):
        row["agent_version"] = "v1" if i % 2 else "v2"
    store(run, pa.Table.from_pylist(table))
    runs = load_run(run)
    assert [r.agent for r in runs] == ["support-bot@v1", "support-bot@v2"]
    assert select_agent(runs, "support-bot@v2", "x").agent == "support-bot@v2"
    with pytest.raises(RunError, match="several versions.*NAME@VERSION"):
        select_agent(runs, "support-bot", "x")
    (only,) = load_run(write_run(tmp_path / "one", SUITE_A, agent="support-bot"))
    assert select_agent([only], "support-bot", "x") is only


# --- issue 27: defects a real model's runs showed ------------------------------------------------


def test_a_floor_estimated_as_zero_is_unknown_and_never_reasoned_from(tmp_path: Path) -> None:
    agreed = ["VV", "NN", "VV", "VV", "NN", "VV"]  # every scenario's repeats agree: sw2 = 0
    (a,) = load_run(write_run(tmp_path / "a", agreed))
    (b,) = load_run(write_run(tmp_path / "b", agreed, agent="ckpt-2"))
    floor = summarize(a).floors[0]
    assert not floor.known and floor.floor_k is None and "unknown, not zero" in floor.note
    m = compare(a, b).metrics[0]
    assert m.floor is None and m.below_floor is None and m.floor_source.startswith("unknown")
    text = format_comparison(compare(a, b))
    assert "0.000)" not in text.split("floor")[-1] and "above the resolution floor" not in text
    assert "unknown, not zero" in text


def test_the_two_panel_titles_of_a_comparison_plot_do_not_overlap(tmp_path: Path) -> None:
    import matplotlib.pyplot as plt

    from rehearsal_env.measure._plot import outcome_figure

    (a,) = load_run(write_run(tmp_path / "a", [s[:2] for s in SUITE_A], agent="reference-checkpoint-number-one"))
    (b,) = load_run(write_run(tmp_path / "b", [s[:2] for s in SUITE_B], agent="wrong:do-nothing-but-claim-two"))
    fig = outcome_figure([a, b], [summarize(a), summarize(b)], compare(a, b))
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    boxes = [ax.title.get_window_extent(renderer) for ax in fig.axes if ax.get_title()]
    boxes += [t.get_window_extent(renderer) for t in fig.texts if t.get_text() == fig.get_suptitle()]
    assert len(boxes) == 3
    for i, one in enumerate(boxes):
        for other in boxes[i + 1:]:
            assert not one.overlaps(other), (one, other)
    assert "A = reference-checkpoint-number-one" in fig.get_suptitle()
    plt.close(fig)


# --- issue 31: forks and restores are never evidence -------------------------------------------


def with_branches(path: Path, branches: dict[int, str], kind: str = "fork", reuse_repeat: bool = False) -> Path:
    """Add to run ``path`` one episode per character of ``branches[j]`` on scenario j, each a ``kind`` (fork or
    restore) of that scenario's repeat 0, numbered after its repeats (as serve numbers them) or, with
    ``reuse_repeat``, under its parent's repeat (as a local fork that keeps its parent's number)."""
    table = pq.read_table(path / "episodes.parquet")
    rows = [{"parent_episode": None, "parent_kind": None, **r} for r in table.to_pylist()]
    template = rows[0]
    for j, codes in branches.items():
        scenario = f"shop/task-{j:02d}"
        last = max(r["repeat"] for r in rows if r["scenario"] == scenario)
        for i, code in enumerate(codes):
            outcome = CODES[code]
            rows.append({**template, "scenario": scenario, "repeat": 0 if reuse_repeat else last + 1 + i,
                         "outcome": outcome, "reward": REWARD[outcome], "outcome_reward": REWARD[outcome],
                         "false_completion": False, "parent_episode": f"{scenario}#0", "parent_kind": kind})
    store(path, pa.Table.from_pylist(rows))
    return path


HALF = ["VN"] * 6
"""A 50% agent: every scenario verified once in two."""


def test_forks_are_left_out_of_every_number_and_counted_apart(tmp_path: Path) -> None:
    """The break: forks of passing episodes, finished, count as more verified repeats of their scenario."""
    plain = write_run(tmp_path / "plain", HALF)
    forked = with_branches(write_run(tmp_path / "forked", HALF), {j: "VVVV" for j in range(6)})
    with_branches(forked, {0: "V", 1: "V"}, kind="restore")
    (a,), (b,) = load_run(plain), load_run(forked)
    ra, rb = summarize(a), summarize(b)
    assert rb.verified.value == pytest.approx(0.5) and rb.verified == ra.verified
    assert b.not_root == {"fork": 24, "restore": 2} and a.not_root == {}
    assert (rb.n_scored, rb.repeats, rb.pass_k) == (ra.n_scored, ra.repeats, ra.pass_k)
    assert rb.not_root == {"fork": 24, "restore": 2}
    out = measure_cli(forked)
    assert "left out, never evidence about the agent: 24 fork(s), 2 restore(s)" in out
    assert "left out, never evidence" not in measure_cli(plain)
    assert json.loads(measure_cli(forked, "--json"))["runs"][0]["not_root"] == {"fork": 24, "restore": 2}
    # compared with another agent, the forks change nothing of the comparison either
    other = write_run(tmp_path / "other", ["VV"] * 6, agent="ckpt-2")
    (c,) = load_run(other)
    assert compare(b, c).metrics[0].difference == compare(a, c).metrics[0].difference == pytest.approx(-0.5)


def test_a_fork_that_keeps_its_parents_repeat_is_left_out_not_refused(tmp_path: Path) -> None:
    forked = with_branches(write_run(tmp_path / "r", HALF), {0: "VV"}, reuse_repeat=True)
    (run,) = load_run(forked)
    assert run.not_root == {"fork": 2} and summarize(run).verified.value == pytest.approx(0.5)


def test_a_run_of_forks_only_has_nothing_to_measure(tmp_path: Path) -> None:
    path = write_run(tmp_path / "r", ["V"])
    table = pq.read_table(path / "episodes.parquet").to_pylist()
    store(path, pa.Table.from_pylist([{**r, "parent_episode": "x", "parent_kind": "fork"} for r in table]))
    with pytest.raises(RunError, match="no root episode.*1 fork"):
        load_run(path)
