"""Cost per episode and per verified episode: literal data against statsmodels and by-hand formulas, episodes
without measured tokens counted apart, prices from the agent profile, the Pareto front and its plot."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy import stats
from statsmodels.regression.linear_model import OLS

from rehearsal_env.agents import Price, ProfileStore, parse_profile
from rehearsal_env.measure import (
    cost_report,
    load_run,
    pareto_front,
    parse_prices,
    plot_cost_reliability,
    ratio_estimate,
    summarize,
    to_json,
)
from rehearsal_env.records import RECORD_VERSION, VERSION_KEY, seal_run, write_part_bytes

ROOT = Path(__file__).resolve().parents[1]
PROFILE = 'name = "bot"\nagent = "openai"\nmodel = "m"\ninstructions = ""\n\n[price]\ninput_per_million = 0.5\n' \
          'output_per_million = 2.0\n'
# 6 scenarios x 3 repeats: (verified, input tokens, output tokens); None tokens = not measured (external mode)
Episode = tuple[Any, Any, Any]  # (verified, input tokens, output tokens), None where not measured
EPISODES: list[list[Episode]] = [
    [(1, 1000, 200), (1, 1200, 250), (0, 3000, 900)],
    [(0, 4000, 800), (0, 3500, 700), (1, 2000, 300)],
    [(1, 800, 100), (1, 900, 120), (1, 850, 110)],
    [(0, 5000, 1200), (1, 2500, 400), (None, None, None)],
    [(1, 1500, 300), (0, 2800, 600), (1, 1600, 320)],
    [(0, 6000, 1500), (0, 5500, 1400), (0, 5800, 1450)],
]


def write_costed(path: Path, episodes: list[list[Episode]], agent: str = "bot", profile: str | None = PROFILE,
                 scale: float = 1.0) -> Path:
    rows = []
    for j, eps in enumerate(episodes):
        for k, (v, inp, out) in enumerate(eps):
            rows.append({"scenario": f"w/s-{j}", "split": "dev", "agent": agent, "agent_version": "v1", "repeat": k,
                         "category": "refund" if j % 2 else "email",
                         "outcome": "verified" if v == 1 else "not_achieved", "reward": float(v or 0),
                         "false_completion": False,
                         "tokens": None if inp is None else int((inp + out) * scale),
                         "input_tokens": None if inp is None else int(inp * scale),
                         "output_tokens": None if out is None else int(out * scale)})
    path.mkdir(parents=True, exist_ok=True)
    if profile is not None:
        (path / "run.json").write_text(json.dumps({"version": 1, "config": {"agent_profile": profile}, "episodes": []}))
    sink = pa.BufferOutputStream()  # one part with its manifest, sealed, as a runner leaves a run
    pq.write_table(pa.Table.from_pylist(rows).replace_schema_metadata({VERSION_KEY: str(RECORD_VERSION)}), sink)
    write_part_bytes(path, bytes(sink.getvalue().to_pybytes()), 0)
    seal_run(path)
    return path


def test_cost_per_episode_is_the_clustered_mean_statsmodels_agrees(tmp_path: Path) -> None:
    (run,) = load_run(write_costed(tmp_path / "r", EPISODES))
    report = cost_report(run)
    assert report.prices is not None and report.prices.source == "agent profile bot"
    assert report.unmeasured_episodes == 1 and report.costed_episodes == 17
    assert "1 scored episode(s) without measured tokens" in report.note
    costs = [[(i * 0.5 + o * 2.0) / 1e6 for v, i, o in eps if i is not None] for eps in EPISODES]
    means = np.array([np.mean(c) for c in costs])
    e = report.per_episode
    assert e is not None and e.value == pytest.approx(means.mean(), rel=1e-12)
    y = means  # one scenario has 2 of 3 measured: scenarios still weigh the same (t over scenario means)
    half = stats.t.ppf(0.975, len(y) - 1) * y.std(ddof=1) / math.sqrt(len(y))
    assert (e.low, e.high) == pytest.approx((y.mean() - half, y.mean() + half), rel=1e-12)


def test_clustered_se_equals_statsmodels_on_balanced_episodes(tmp_path: Path) -> None:
    balanced = [eps for eps in EPISODES if all(i is not None for _, i, _ in eps)]
    (run,) = load_run(write_costed(tmp_path / "r", balanced))
    e = cost_report(run).per_episode
    y = np.array([(i * 0.5 + o * 2.0) / 1e6 for eps in balanced for _, i, o in eps])
    groups = np.repeat(np.arange(len(balanced)), 3)
    fit = OLS(y, np.ones_like(y)).fit(cov_type="cluster", cov_kwds={"groups": groups})
    assert e is not None and e.se == pytest.approx(float(fit.bse[0]), rel=1e-10)


def test_cost_per_verified_episode_is_the_ratio_with_its_delta_method_interval() -> None:
    c = np.array([0.002, 0.004, 0.001, 0.005, 0.003])
    v = np.array([2 / 3, 1 / 3, 1.0, 0.5, 2 / 3])
    e = ratio_estimate(c, v, 15)
    assert e is not None
    r = c.mean() / v.mean()
    assert e.value == pytest.approx(r)
    se = np.std(c - r * v, ddof=1) / (math.sqrt(5) * v.mean())
    assert e.se == pytest.approx(se)
    assert e.high - e.value == pytest.approx(stats.t.ppf(0.975, 4) * se)
    # the delta method is the linearisation: a jackknife over scenarios gives nearly the same SE
    jack = np.array([np.delete(c, j).mean() / np.delete(v, j).mean() for j in range(5)])
    assert math.sqrt(4 / 5 * np.sum((jack - jack.mean()) ** 2)) == pytest.approx(se, rel=0.25)
    assert ratio_estimate(c, np.zeros(5), 15) is None  # nothing verified: unbounded, not given


def test_without_prices_or_split_the_cost_is_not_invented(tmp_path: Path) -> None:
    (run,) = load_run(write_costed(tmp_path / "r", EPISODES, profile=None))
    report = cost_report(run)
    assert report.per_episode is None and "no prices" in report.note
    assert report.tokens_per_episode is not None and report.tokens_per_episode.n_episodes == 17
    (given,) = load_run(tmp_path / "r")
    assert cost_report(given, parse_prices("1,1")).per_episode is not None
    with pytest.raises(ValueError, match="expected --price IN,OUT"):
        parse_prices("cheap")


def test_pareto_front() -> None:
    points = [(1.0, 0.5), (2.0, 0.7), (1.5, 0.4), (3.0, 0.7), (0.5, 0.2)]
    assert pareto_front(points) == [True, True, False, False, True]


def test_measure_reports_cost_and_reliability_in_text_json_and_plot(tmp_path: Path) -> None:
    a = write_costed(tmp_path / "a", EPISODES)
    out = subprocess.run([sys.executable, str(ROOT / "measure.py"), str(a)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "cost per episode:" in out.stdout and "cost per verified episode:" in out.stdout
    assert "consistency: 2 of 6 scenarios' repeats all agree" in out.stdout and "refund" in out.stdout
    (run,) = load_run(a)
    blob = json.loads(to_json({"runs": [summarize(run)]}))["runs"][0]
    assert blob["cost"]["unmeasured_episodes"] == 1 and blob["consistent"] == [2, 6]
    assert {c["category"] for c in blob["categories"]} == {"email", "refund"}
    cheap = write_costed(tmp_path / "cheap", [[(v, None if i is None else i // 4, None if o is None else o // 4)
                                               for v, i, o in eps] for eps in EPISODES], agent="cheap")
    runs = [load_run(a)[0], load_run(cheap)[0], load_run(write_costed(tmp_path / "n", EPISODES, agent="nop",
                                                                      profile=None))[0]]
    png = plot_cost_reliability([summarize(r) for r in runs], Path(tmp_path / "c.png"))
    assert png.stat().st_size > 10_000


def test_a_profiles_price_is_part_of_its_version_and_measure_reads_it(tmp_path: Path) -> None:
    base = 'name = "bot"\nagent = "openai"\nmodel = "m"\ninstructions = ""\n'
    plain = parse_profile(base)
    priced = parse_profile(base + "\n[price]\ninput_per_million = 0.5\noutput_per_million = 2\n")
    assert priced.price == Price(0.5, 2.0) and plain.price is None
    assert priced.content_hash != plain.content_hash  # a changed price is another version
    assert parse_profile(priced.to_toml()) == priced and parse_profile(plain.to_toml()) == plain
    store = ProfileStore(tmp_path / "profiles")
    v1, _ = store.register(plain)
    v2, created = store.register(priced)
    assert created and (v1.version, v2.version) == (1, 2)
    with pytest.raises(ValueError, match=r"price.input_per_million to be a price per million tokens >= 0"):
        parse_profile(base + "\n[price]\ninput_per_million = -1\noutput_per_million = 2\n")
    (run,) = load_run(write_costed(tmp_path / "r", EPISODES, profile=priced.to_toml()))
    report = cost_report(run)
    assert report.prices is not None and (report.prices.input_per_million, report.prices.output_per_million) == (0.5, 2)
