"""Reliability: Holm's correction against statsmodels, consistency over scenarios, per-category rates and
Holm-corrected per-category comparisons between two checkpoints, on literal data."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import proportion_confint

from rehearsal_env.measure import (
    category_comparisons,
    category_rates,
    compare,
    consistency,
    format_comparison,
    holm,
    load_run,
    mcnemar_exact,
    sign_flip,
)
from rehearsal_env.records import RECORD_VERSION, VERSION_KEY, seal_run, write_part_bytes

PROVENANCE = {"reward_version": "3", "reward_profile": "benchmark", "world_version": "wv_shop_1"}
# category -> per-scenario outcome strings (V verified, N not achieved), A and B on the same scenarios
A = {"refund": ["VVV", "VVV", "VVN", "VVV", "VNV", "VVV", "VVV", "VVN"], "email": ["NNN", "VNN", "NNN", "NNV", "NNN"],
     "address": ["VVV", "VVV", "NVV", "VVV"]}
B = {"refund": ["NNN", "VNN", "NNN", "NNV", "NNN", "NNN", "NNN", "NNN"], "email": ["NNN", "NNV", "VNN", "NNN", "NNN"],
     "address": ["VVV", "VNV", "VVV", "VVV"]}


def write(path: Path, suite: dict[str, list[str]], agent: str) -> Path:
    rows = [{"scenario": f"{cat}-{j}", "split": "dev", "category": cat, "agent": agent, "repeat": k,
             "outcome": "verified" if c == "V" else "not_achieved", "reward": float(c == "V"),
             "false_completion": False}
            for cat, scenarios in suite.items() for j, codes in enumerate(scenarios) for k, c in enumerate(codes)]
    path.mkdir(parents=True, exist_ok=True)
    (path / "provenance.json").write_text(json.dumps(PROVENANCE))
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(rows).replace_schema_metadata({VERSION_KEY: str(RECORD_VERSION)}), sink)
    write_part_bytes(path, bytes(sink.getvalue().to_pybytes()), 0)
    seal_run(path)
    return path


def test_holm_matches_statsmodels() -> None:
    for p in ([0.01, 0.04, 0.03, 0.2], [0.5, 0.001, 0.049, 0.049, 0.9], [0.02], [0.3, 0.3, 0.01]):
        assert holm(p) == pytest.approx(list(multipletests(p, method="holm")[1]), abs=1e-15)


def test_consistency_is_the_share_of_scenarios_whose_repeats_agree_with_wilson() -> None:
    values = [np.array([1.0, 1, 1]), np.array([0.0, 0]), np.array([1.0, 0, 1]), np.array([1.0]), np.array([0.0, 1])]
    est, agree, multi = consistency(values)
    assert (agree, multi) == (2, 4) and est is not None and est.value == 0.5
    assert (est.low, est.high) == pytest.approx(proportion_confint(2, 4, method="wilson"), abs=1e-12)
    assert consistency([np.array([1.0])] * 3) == (None, 0, 0)


def test_per_category_rates_and_holm_corrected_comparisons(tmp_path: Path) -> None:
    (a,) = load_run(write(tmp_path / "a", A, "ckpt-a"))
    (b,) = load_run(write(tmp_path / "b", B, "ckpt-b"))
    rates = {c.category: c.verified for c in category_rates(a)}
    assert set(rates) == {"refund", "email", "address"}
    assert rates["refund"].value == pytest.approx(np.mean([np.mean([c == "V" for c in s]) for s in A["refund"]]))
    rows = {c.category: c for c in category_comparisons(a, b)}
    raw = []
    for cat in sorted(A):  # the same tests by hand: sign flip on the scenario means (3 repeats each)
        d = np.array([np.mean([c == "V" for c in x]) - np.mean([c == "V" for c in y]) for x, y in zip(A[cat], B[cat],
                                                                                                        strict=True)])
        raw.append(sign_flip(d).p_value)
        assert rows[cat].difference == pytest.approx(d.mean()) and rows[cat].test.p_value == pytest.approx(raw[-1])
    adjusted = multipletests(raw, method="holm")[1]
    assert [rows[c].p_holm for c in sorted(A)] == pytest.approx(list(adjusted))
    assert rows["refund"].significant and not rows["email"].significant and not rows["address"].significant
    assert rows["refund"].p_holm == pytest.approx(3 * 2 / 2**8)  # 8 scenarios all favour A; times 3 categories
    text = format_comparison(compare(a, b))
    assert "Holm-corrected over 3 categories" in text and "differs" in text


def test_one_repeat_categories_use_exact_mcnemar(tmp_path: Path) -> None:
    one_a = {k: [s[0] for s in v] for k, v in A.items()}
    one_b = {k: [s[0] for s in v] for k, v in B.items()}
    (a,) = load_run(write(tmp_path / "a", one_a, "ckpt-a"))
    (b,) = load_run(write(tmp_path / "b", one_b, "ckpt-b"))
    refund = next(c for c in category_comparisons(a, b) if c.category == "refund")
    assert refund.test.name == "exact McNemar" and refund.test.p_value == mcnemar_exact(7, 0).p_value
