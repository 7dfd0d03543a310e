"""Sequential comparison: the betting confidence sequence against a by-hand computation, its error under
continuous monitoring by simulation, and `rehearsal compare` on scripted agents with known success rates."""

from __future__ import annotations

import contextlib
import io
import json
import math
import random
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from rehearsal_env.agents import ScriptedAgent
from rehearsal_env.cli import main as rehearsal
from rehearsal_env.measure import (
    BUDGET,
    DIFFERENCE,
    SEQUENTIAL_FILE,
    WITHIN_FLOOR,
    RunError,
    adaptive_study,
    allocation_gain,
    compare,
    compare_sequentially,
    format_adaptive,
    format_comparison,
    format_sequential,
    load_run,
    looks,
    play_order,
    sequential_study,
    simulate_sprt,
    sprt_saving,
    summarize,
)
from rehearsal_env.measure._adaptive import adaptive_outcomes, prior_from_rates
from rehearsal_env.measure._seqstudy import simulate
from rehearsal_env.measure._sequential import interval, log_capital, predictable_variance
from rehearsal_env.runner import RunConfig
from rehearsal_env.scenarios import Scenario
from rehearsal_env.worlds import load_world

WRONG = "wrong:do-nothing-but-claim"
X = np.array([1, 0.5, 0.5, 1, 0, 0.5, 1, 1, 0.5, 1, 0.5, 1, 0.5, 0.5, 1, 0.5, 1, 0, 1, 0.5])
"""Literal paired differences (d + 1) / 2 of 20 pairs: A won 9, B won 2, 9 ties."""


def by_hand_log_capital(x: np.ndarray, m: float, f: float, design: float) -> float:
    """WSR's hedged capital (theta = 1/2, c = 1/2) with the floor-tuned bet, written out loop by loop."""
    plus = minus = 1.0
    total_sq, total = 0.0, 0.0
    for i, xi in enumerate(x):  # i pairs seen before this one
        var = (0.25 + total_sq) / (i + 1)
        g = f / 2
        lam = g / (var + g * g)
        plus *= 1 + min(lam, 0.5 / m) * (xi - m)
        minus *= 1 - min(lam, 0.5 / (1 - m)) * (xi - m)
        total += xi
        mean = (0.5 + total) / (i + 2)
        total_sq += (xi - mean) ** 2
    return math.log(0.5 * plus + 0.5 * minus)


def test_the_capital_matches_the_formula_written_out() -> None:
    from rehearsal_env.measure._sequential import bets

    lam = bets(X[None, :], 0.3, 60)[0]
    for m in (0.2, 0.5, 0.61, 0.9):
        assert log_capital(X[None, :], lam[None, :], m)[0, -1] == pytest.approx(
            by_hand_log_capital(X, m, 0.3, 60), rel=1e-12)
    var = predictable_variance(X)[0]
    assert var[0] == 0.25 and var[3] == pytest.approx((0.25 + sum(
        (X[j] - (0.5 + X[: j + 1].sum()) / (j + 2)) ** 2 for j in range(3))) / 4)


def test_the_interval_ends_are_where_the_capital_reaches_one_over_alpha() -> None:
    from rehearsal_env.measure._sequential import bets

    lam = bets(X[None, :], 0.3, 60)[0]
    low, high, e0 = interval(X, lam)
    for end in (low, high):
        assert by_hand_log_capital(X, (end + 1) / 2, 0.3, 60) == pytest.approx(math.log(20), abs=1e-6)
    assert low < 2 * X.mean() - 1 < high
    assert e0 == pytest.approx(math.exp(by_hand_log_capital(X, 0.5, 0.3, 60)), rel=1e-12)
    # 9 wins to 2 over 20 pairs: the exact sign test rejects at 0.05 with a fixed n; the anytime-valid interval,
    # which pays for looking after every pair, still holds 0: wider, as it must be
    assert stats.binomtest(9, 11).pvalue < 0.07 and low < 0 < high


def test_a_large_difference_is_decided_and_none_ends_within_the_floor() -> None:
    wins = np.ones(12)
    (look,) = looks(wins, [12], design_pairs=90)
    assert look.decision == DIFFERENCE and look.low > 0
    ties = np.zeros(400)
    (look,) = looks(ties, [400], design_pairs=90, floor=0.2)
    assert look.decision == WITHIN_FLOOR and -0.2 < look.low < look.high < 0.2
    # estimated from pairs that never disagreed, the floor is unknown, not small: no "within the floor" on it
    (look,) = looks(ties, [400], design_pairs=90)
    assert look.floor is None and look.decision is None and -0.2 < look.low < look.high < 0.2
    (look,) = looks(np.append(ties, [1.0, -1.0]), [402], design_pairs=90)
    assert look.floor is not None and look.floor > 0
    with pytest.raises(ValueError, match=r"in \[-1, 1\]"):
        looks(np.array([2.0]), [1], design_pairs=10)


def test_no_difference_is_declared_at_most_5_percent_of_the_time_under_continuous_monitoring() -> None:
    rng = np.random.default_rng(3)
    n, k, reps = 30, 3, 600
    p = rng.beta(0.5, 0.5, (reps, n))
    order = np.concatenate([rng.permuted(np.tile(np.arange(n), (reps, 1)), axis=1) for _ in range(2 * k)], axis=1)
    pp = np.take_along_axis(p, order, axis=1)
    d = (rng.random(pp.shape) < pp).astype(float) - (rng.random(pp.shape) < pp)
    differ, within, pairs, naive = simulate(d, n * k)
    assert differ.mean() <= 0.05 < naive.mean()  # the naive t test after every batch is far above 5%
    assert within.mean() > 0.5 and pairs.mean() < 2 * n * k


def test_the_study_table_small_grid() -> None:
    study = sequential_study(replicates=150, scenarios=(10, 30), designs=(3,), multiples=(2,))
    assert all(c.sequential <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / 150) for c in study.nulls)
    assert max(c.naive for c in study.nulls) > 0.1
    at_floor = [r for r in study.power if r.shift == 1.0]
    assert all(0.5 < r.power for r in at_floor) and all(r.saving is not None for r in at_floor)
    text = format_sequential(study, markdown=True)
    assert "| p = 0.5 | 10 |" in text and "the goal of 2 x is met in" in text


def test_play_order_puts_every_scenario_before_any_repeat() -> None:
    names = [f"s{i}" for i in range(7)]
    order = play_order(names, 3, seed=5)
    assert [r for _, r in order] == [0] * 7 + [1] * 7 + [2] * 7
    assert all(sorted(s for s, r in order if r == k) == names for k in range(3))
    assert order == play_order(list(reversed(names)), 3, seed=5) != play_order(names, 3, seed=6)
    assert [s for s, _ in order[:7]] != [s for s, _ in order[7:14]]  # a fresh permutation each round


def mixture(p: float, seed: int) -> Callable[[Scenario], ScriptedAgent]:
    """An agent that plays the reference solution with probability p, else the scenario's WRONG solution."""
    rng = random.Random(seed)

    def factory(scenario: Scenario) -> ScriptedAgent:
        name = "reference" if rng.random() < p else WRONG
        return ScriptedAgent(scenario.solution(name))

    return factory


def configs() -> tuple[RunConfig, RunConfig]:
    """A and B on the dev scenarios that have WRONG (the mixtures' scenarios)."""
    return (RunConfig(world="shop", agent=WRONG, split="dev", agent_version="mix-a"),
            RunConfig(world="shop", agent=WRONG, split="dev", agent_version="mix-b"))


def test_compare_stops_early_when_the_difference_is_large(tmp_path: Path) -> None:
    a, b = configs()
    result = compare_sequentially(a, b, tmp_path, max_episodes=120, factory_a=mixture(1.0, 1),
                                  factory_b=mixture(0.1, 2))
    assert result.decision == DIFFERENCE and result.episodes <= 30 < result.budget
    assert result.final is not None and result.final.low > 0
    # two ordinary runs: measure reads them, says the stopping was sequential, and recomputes the interval
    (ra,), (rb,) = load_run(tmp_path / "A"), load_run(tmp_path / "B")
    assert ra.n_episodes == rb.n_episodes == result.episodes
    marker = json.loads((tmp_path / "A" / SEQUENTIAL_FILE).read_text())
    assert marker["decision"] == DIFFERENCE and marker["partner"] == "B" and "Waudby-Smith" in marker["reference"]
    assert "stopping was sequential" in (summarize(ra).sequential or "")
    comparison = compare(ra, rb)
    assert comparison.sequential is not None and comparison.sequential.agrees
    assert comparison.sequential.look.low == pytest.approx(result.final.low)
    text = format_comparison(comparison)
    assert "anytime-valid 95% interval of A - B" in text and "beside the fixed-sample" in text
    # the seal covers the marker: a run cannot drop (or edit) that its stopping was sequential
    (tmp_path / "A" / SEQUENTIAL_FILE).unlink()
    with pytest.raises(RunError, match="sequential.json: is missing after the run was sealed"):
        load_run(tmp_path / "A")


def test_compare_runs_to_the_budget_or_the_floor_when_there_is_no_difference(tmp_path: Path) -> None:
    a, b = configs()
    seen: list[int] = []
    result = compare_sequentially(a, b, tmp_path, max_episodes=60, design_repeats=1, factory_a=mixture(0.6, 3),
                                  factory_b=mixture(0.6, 4), on_look=lambda look, n: seen.append(n))
    assert result.decision in (BUDGET, WITHIN_FLOOR)
    assert seen == list(range(10, result.episodes + 1, 10))
    if result.decision == BUDGET:
        assert result.episodes == 60
    plan = json.loads((tmp_path / "A" / "run.json").read_text())["episodes"]  # the pairs played, in play order
    assert plan == json.loads((tmp_path / "B" / "run.json").read_text())["episodes"] and len(plan) == result.episodes
    order = compare_sequentially(a, b, tmp_path / "order", max_episodes=60, design_repeats=1, select="order",
                                 factory_a=mixture(0.6, 3), factory_b=mixture(0.6, 4))
    plan = json.loads((tmp_path / "order" / "A" / "run.json").read_text())["episodes"]
    assert order.select == "order" and len(plan) == 60  # the seeded order's plan is the whole budget


def test_cli_compare_decides_reference_against_a_wrong_agent(tmp_path: Path) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = rehearsal(["compare", "reference", WRONG, "--world", "shop", "--split", "dev", "--out",
                          str(tmp_path / "cmp")])
    text = out.getvalue()
    assert code == 0, text
    assert "decided after 10 of" in text and "A's verified rate is higher than B's" in text
    assert (tmp_path / "cmp" / "A" / SEQUENTIAL_FILE).is_file() and (tmp_path / "cmp" / "B" / "summary.json").is_file()
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert rehearsal(["compare", "reference", WRONG, "--world", "shop", "--max-episodes", "0"]) == 2
    assert err.getvalue().startswith("rehearsal: error: expected --max-episodes >= 1")


def test_a_pair_with_a_fork_or_restore_is_left_out_and_counted_apart(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 31: only root episodes are evidence. The runner plays every episode from reset, so a fork can only
    reach a comparison from a runner that hands one back; such a pair is left out of the decision and counted."""
    import dataclasses

    from rehearsal_env.measure import _seqrun

    played = _seqrun.run_batch

    def forking(config: RunConfig, specs: object, **kw: object) -> object:
        records = played(config, specs, **kw)  # type: ignore[arg-type]
        if config.agent_version == "mix-b":  # B's episodes of repeat 0 come back as forks
            records = [dataclasses.replace(r, parent_episode="p", parent_turn=1, parent_kind="fork")
                       if r.repeat == 0 else r for r in records]
        return records

    monkeypatch.setattr(_seqrun, "run_batch", forking)
    a, b = configs()
    result = compare_sequentially(a, b, tmp_path, max_episodes=20, batch_pairs=20, factory_a=mixture(1.0, 1),
                                  factory_b=mixture(0.0, 2))
    n = result.scenarios
    assert result.episodes == 20 and result.not_root == n and result.pairs == 20 - n and result.left_out == 0
    assert json.loads((tmp_path / "A" / SEQUENTIAL_FILE).read_text())["not_root_pairs"] == n


def test_informative_selection_plays_the_scenarios_that_tell_a_from_b(tmp_path: Path) -> None:
    """B fails half the scenarios and passes the rest, like A: after the first round the pairs go to the half
    where they disagree; measure recomputes the same interval from the run.json the choice wrote."""
    a, b = configs()
    names = sorted(s.id for s in load_world("shop").scenarios("dev") if any(w.name == WRONG for w in s.wrong))
    hard = set(names[::2])

    def b_factory(scenario: Scenario) -> ScriptedAgent:
        return ScriptedAgent(scenario.solution(WRONG if scenario.id in hard else "reference"))

    result = compare_sequentially(a, b, tmp_path, max_episodes=3 * len(names), design_repeats=1, floor=0.05,
                                  factory_a=mixture(1.0, 1), factory_b=b_factory)
    plan = json.loads((tmp_path / "A" / "run.json").read_text())["episodes"]
    later = [s for s, _, _ in plan[len(names):]]
    assert result.select == "informative" and sorted(s for s, _, _ in plan[:len(names)]) == names  # one round first
    assert later and sum(s in hard for s in later) >= 0.9 * len(later)
    assert all(seed == k for _, k, seed in plan) and len({(s, k) for s, k, _ in plan}) == len(plan)
    (ra,), (rb,) = load_run(tmp_path / "A"), load_run(tmp_path / "B")
    check = compare(ra, rb).sequential
    assert check is not None and check.agrees  # the interval recomputed in run.json's order is the recorded one


def test_with_earlier_runs_compare_chooses_from_the_first_pair(tmp_path: Path) -> None:
    """Earlier runs where A passed every scenario and B failed half: their item model says which half tells, and
    the next comparison plays that half from its first batch on (no seeded round)."""
    a, b = configs()
    names = sorted(s.id for s in load_world("shop").scenarios("dev") if any(w.name == WRONG for w in s.wrong))
    hard = set(names[::2])

    def b_factory(scenario: Scenario) -> ScriptedAgent:
        return ScriptedAgent(scenario.solution(WRONG if scenario.id in hard else "reference"))

    compare_sequentially(a, b, tmp_path / "before", max_episodes=len(names), design_repeats=1, floor=0.05,
                         select="order", factory_a=mixture(1.0, 1), factory_b=b_factory)
    earlier = [tmp_path / "before" / "A", tmp_path / "before" / "B"]
    result = compare_sequentially(a, b, tmp_path / "now", max_episodes=len(names), design_repeats=1, floor=0.05,
                                  batch_pairs=5, earlier=earlier, factory_a=mixture(1.0, 3), factory_b=b_factory)
    plan = [s for s, _, _ in json.loads((tmp_path / "now" / "A" / "run.json").read_text())["episodes"]]
    assert result.select == "informative" and len(plan) >= 5
    assert sum(s in hard for s in plan) >= 0.85 * len(plan)  # the seeded order gives half, in any batch about half
    (ra,), (rb,) = load_run(tmp_path / "now" / "A"), load_run(tmp_path / "now" / "B")
    check = compare(ra, rb).sequential
    assert check is not None and check.agrees


def test_the_adaptive_study_keeps_its_error_and_saves_where_scenarios_tell_nothing() -> None:
    study = adaptive_study(replicates=300, seed=3, scenarios=(30,), designs=(3,))
    assert {c.chooser for c in study.nulls} == {"informative", "informative + item model"}
    assert all(c.error <= 0.08 for c in study.nulls)  # at most 5% in expectation; 300 replicates
    rows = {(r.suite, r.chooser): r for r in study.power}
    idle, busy, primed = (rows[("half the scenarios tell nothing", c)]
                          for c in ("seeded order", "informative", "informative + item model"))
    assert busy.mean_pairs < idle.mean_pairs and busy.saving is not None and idle.saving is not None
    assert busy.saving > 1.5 * idle.saving
    assert primed.mean_pairs < busy.mean_pairs  # no seeded round: the item model's first pairs already tell
    # every scenario informative: no sequential test could save 2 x at the power reached, and none did
    for r in (r for r in study.power if r.suite == "every scenario informative"):
        assert r.saving is not None and r.sprt_bound is not None and r.saving < r.sprt_bound < 2.0
    # half the scenarios tell nothing: giving the pairs to the half that tells doubles what can be saved
    assert primed.allocation_bound is not None and primed.sprt_bound is not None
    assert 1.8 * primed.sprt_bound < primed.allocation_bound < 2.2 * primed.sprt_bound
    assert idle.allocation_bound is None
    text = format_adaptive(study)
    assert "the 2 x saving is met in" in text and "beyond any sequential test at the power reached" in text


def test_the_sprt_bound_is_walds_closed_form() -> None:
    def by_hand(power: float) -> float:  # fixed n x I over the SPRT's E[N] x I, alpha 5% two-sided
        z = stats.norm.ppf(0.975) + stats.norm.ppf(power)
        return (z * z / 2) / (power * math.log(power / 0.025) + (1 - power) * math.log((1 - power) / 0.975))

    for power, figure in ((0.8, 1.598), (0.9, 1.753)):
        assert sprt_saving(power) == pytest.approx(by_hand(power)) and abs(sprt_saving(power) - figure) < 1e-3
    assert sprt_saving(0.95) < 2.0 < sprt_saving(0.97)  # 2 x needs a power near 96%, whatever the test
    assert all(sprt_saving(a) < sprt_saving(b) for a, b in [(0.6, 0.8), (0.8, 0.9), (0.9, 0.99)])
    with pytest.raises(ValueError, match="alpha / 2 < power < 1"):
        sprt_saving(0.02)


def test_a_simulated_sprt_saves_what_walds_bound_says() -> None:
    reached, pairs, fixed = simulate_sprt(0.9, shift=0.1, replicates=2000, seed=1)
    assert abs(reached - 0.9) < 0.02  # Wald's boundaries give about the power they are set for
    assert fixed / pairs == pytest.approx(sprt_saving(reached), rel=0.05)
    # a large shift per pair overshoots the boundaries: the real SPRT saves less than the approximation
    reached, pairs, fixed = simulate_sprt(0.9, shift=0.5, replicates=2000, seed=1)
    assert fixed / pairs < sprt_saving(reached)


def test_allocation_gain_is_neymans() -> None:
    assert allocation_gain(np.full(8, 0.3)) == pytest.approx(1.0)
    assert allocation_gain(np.array([0.0, 0.0, 0.4, 0.4])) == pytest.approx(2.0)  # half tell nothing
    assert allocation_gain(np.array([0.1, 0.4])) == pytest.approx(10 / 9)  # 0.25 / ((sqrt .1 + sqrt .4) / 2)^2
    with pytest.raises(ValueError, match="at least one above 0"):
        allocation_gain(np.zeros(3))


def test_with_an_item_model_the_first_pairs_go_to_the_scenarios_that_tell() -> None:
    rng = np.random.default_rng(4)
    n, reps = 40, 200
    p = np.where(np.arange(n) < n // 2, 0.5, 1.0)  # the second half: both always pass
    pa = np.broadcast_to(p, (reps, n))
    told = adaptive_outcomes(rng, pa, pa, 20, 10, prior_from_rates(p, [3] * n))
    seeded = adaptive_outcomes(rng, pa, pa, 20, 10)
    # a pair on a scenario that tells disagrees half the time; on one that tells nothing, never
    assert np.mean(told != 0) > 0.4 > 0.3 > np.mean(seeded != 0)
    # and "no difference" is still declared at most 5% of the time with the item model choosing from the start
    q = rng.beta(0.5, 0.5, (600, 30))
    d = adaptive_outcomes(rng, q, q, 180, 10, prior_from_rates(rng.binomial(3, q) / 3, np.full(q.shape, 3)))
    differ, *_ = simulate(d, 90)
    assert differ.mean() <= 0.05
