"""Measuring runs: headline numbers with intervals, pass^k, the resolution floor, comparisons, plots.

The scenario is the unit throughout: repeats of one scenario are averaged first, and intervals,
tests and floors work over scenarios (see each module's docstring for the method and references;
the specification is ``notes/statistics.md``). Not-scored episodes are excluded from every rate
and shown next to every headline, with their causes and a worst case. The coverage study
(:func:`coverage_study`, ``python measure.py --coverage-study``) checks by simulation that the
intervals cover and the floor holds. Typical use::

    from rehearsal_env.measure import load_run, summarize, compare, format_report
    (run,) = load_run("runs/2024-06-01")
    print(format_report(summarize(run)))
"""

from pathlib import Path
from typing import Any

from ._adaptive import SELECT
from ._adaptstudy import AdaptiveNull, AdaptivePower, AdaptiveStudy, adaptive_study, format_adaptive
from ._compare import BELOW_FLOOR, Comparison, MetricComparison, ProvenanceMismatch, Reproducibility, compare
from ._cost import CostReport, Prices, cost_report, pareto_front, parse_prices, ratio_estimate
from ._coverage import KNOWN, Cell, CoverageStudy, FloorCheck, coverage_study, format_coverage
from ._decision import A_HIGHER, B_HIGHER, DISAGREE, NO_DIFFERENCE, NOT_DECIDED, Extremes, Procedure
from ._floor import MIN_SCENARIOS, Z80, Floor, observed_floor, run_floor
from ._format import format_comparison, format_report, to_json
from ._intervals import (
    REWARD_BOUNDS,
    Estimate,
    bounded_mean_bounds,
    clopper_pearson_upper,
    clustered_se,
    mean_estimate,
    rate_bounds,
    rate_estimate,
    t_bounds,
    wilson,
)
from ._load import AgentRun, RunError, ScenarioEpisodes, load_run, select_agent
from ._noise import NoisePlan, Share, format_noise, noise_shares, plot_noise, simulated_branches, true_shares
from ._paired import PairedTest, mcnemar_exact, paired_t, sign_flip
from ._passk import PassK, pass_all, pass_any, pass_k_table
from ._reliability import CategoryComparison, CategoryRate, category_comparisons, category_rates, consistency, holm
from ._seqreport import SEQUENTIAL_FILE
from ._seqstudy import NullCell, PowerRow, SequentialStudy, format_sequential, sequential_study
from ._sequential import (
    BATCH_PAIRS,
    BUDGET,
    BUDGET_MULTIPLE,
    DESIGN_REPEATS,
    DIFFERENCE,
    WITHIN_FLOOR,
    Look,
    SequentialResult,
    looks,
    play_order,
)
from ._sequential import METHOD as SEQUENTIAL_METHOD
from ._sequential import REFERENCE as SEQUENTIAL_REFERENCE
from ._sprtbound import allocation_gain, simulate_sprt, sprt_saving
from ._summary import AgentReport, summarize


def plot_runs(runs: list[AgentRun], reports: list[AgentReport], path: str | Path,
              comparison: Comparison | None = None) -> Path:
    """Draw one or two runs' per-scenario outcomes into a PNG (matplotlib, Agg; imported on first use)."""
    from ._plot import plot_runs as draw

    return draw(runs, reports, path, comparison)


def compare_sequentially(config_a: Any, config_b: Any, out: str | Path, **options: Any) -> SequentialResult:
    """Play A (a ``runner.RunConfig``) and B on the same scenarios in paired batches until the comparison is
    decided; see :func:`._seqrun.compare_sequentially` for the options. The runner is imported on first use:
    it doubles measure.py's start-up, which never plays an episode."""
    from ._seqrun import compare_sequentially as play

    return play(config_a, config_b, out, **options)


def noise_of_run(run_dir: str, **options: Any) -> dict[str, Any]:
    """The branch outcomes that split the noise of the run in ``run_dir`` by source (forked resamples of its
    episodes; see :func:`._noiserun.noise_of_run` for the options). The runner is imported on first use."""
    from ._noiserun import noise_of_run as play

    return play(run_dir, **options)


def plot_cost_reliability(reports: list[AgentReport], path: str | Path) -> Path:
    """Draw several checkpoints' cost against accuracy (Pareto front marked) and pass^k into a PNG."""
    from ._costplot import plot_cost_reliability as draw

    return draw(reports, path)


__all__ = [
    "NoisePlan",
    "Share",
    "format_noise",
    "noise_of_run",
    "noise_shares",
    "plot_noise",
    "simulated_branches",
    "true_shares",
    "A_HIGHER",
    "B_HIGHER",
    "DISAGREE",
    "NO_DIFFERENCE",
    "NOT_DECIDED",
    "Extremes",
    "Procedure",
    "CategoryComparison",
    "CategoryRate",
    "CostReport",
    "Prices",
    "category_comparisons",
    "category_rates",
    "consistency",
    "cost_report",
    "holm",
    "pareto_front",
    "parse_prices",
    "plot_cost_reliability",
    "ratio_estimate",
    "BATCH_PAIRS",
    "BUDGET",
    "BUDGET_MULTIPLE",
    "DESIGN_REPEATS",
    "DIFFERENCE",
    "SEQUENTIAL_FILE",
    "SEQUENTIAL_METHOD",
    "SEQUENTIAL_REFERENCE",
    "WITHIN_FLOOR",
    "Look",
    "NullCell",
    "PowerRow",
    "SequentialResult",
    "SequentialStudy",
    "compare_sequentially",
    "format_sequential",
    "format_adaptive",
    "adaptive_study",
    "AdaptiveNull",
    "AdaptivePower",
    "AdaptiveStudy",
    "allocation_gain",
    "simulate_sprt",
    "sprt_saving",
    "SELECT",
    "looks",
    "play_order",
    "sequential_study",
    "BELOW_FLOOR",
    "KNOWN",
    "MIN_SCENARIOS",
    "REWARD_BOUNDS",
    "Z80",
    "AgentReport",
    "AgentRun",
    "Cell",
    "Comparison",
    "CoverageStudy",
    "Estimate",
    "Floor",
    "FloorCheck",
    "MetricComparison",
    "PairedTest",
    "PassK",
    "ProvenanceMismatch",
    "Reproducibility",
    "RunError",
    "ScenarioEpisodes",
    "bounded_mean_bounds",
    "clopper_pearson_upper",
    "clustered_se",
    "compare",
    "coverage_study",
    "format_comparison",
    "format_coverage",
    "format_report",
    "load_run",
    "mcnemar_exact",
    "mean_estimate",
    "observed_floor",
    "paired_t",
    "pass_all",
    "pass_any",
    "pass_k_table",
    "plot_runs",
    "rate_bounds",
    "rate_estimate",
    "run_floor",
    "select_agent",
    "sign_flip",
    "summarize",
    "t_bounds",
    "to_json",
    "wilson",
]
