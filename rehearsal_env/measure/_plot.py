"""A picture of one or two runs: every episode's outcome, and each scenario's verified rate.

Left: a grid of scenarios (rows) by repeats (columns), one block per run, coloured by outcome.
Right: each scenario's verified rate with its Wilson 95% interval over that scenario's repeats
(wide with few repeats, as it should be), and the run's overall rate with its clustered interval
as a shaded band. Rows are sorted by the verified rate, so the easy and the hard scenarios group.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.colors import ListedColormap  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from ._compare import BELOW_FLOOR, Comparison  # noqa: E402
from ._intervals import wilson  # noqa: E402
from ._load import AgentRun  # noqa: E402
from ._summary import AgentReport  # noqa: E402

OUTCOME_COLOURS = {"not scored / missing": "#f3ecd8", "not achieved": "#c8c8c8", "verified": "#2e8b57",
                   "rule violated": "#c0392b"}
"""Outcome -> colour, in code order 0..3."""
RUN_COLOURS = ("#1f4e9c", "#e07b00")
"""Run A, run B."""


def _slots(run: AgentRun) -> int:
    """Columns of the grid: the highest scored repeat index + 1 (lost repeats show as blanks)."""
    return max([int(s.repeats.max()) + 1 for s in run.scenarios if len(s.repeats)] or [1])


def _grid(run: AgentRun, names: list[str]) -> np.ndarray:
    """Scenario x repeat outcome codes: 0 not scored or missing, 1 not achieved, 2 verified, 3 violated."""
    grid = np.zeros((len(names), _slots(run)))
    by_name = {s.scenario: s for s in run.scenarios}
    for i, name in enumerate(names):
        s = by_name.get(name)
        if s is None:
            continue
        for rep, ver, vio in zip(s.repeats, s.values["verified"], s.values["rule_violated"], strict=True):
            grid[i, rep] = 3 if vio else 2 if ver else 1
    return grid


def _headline(reports: list[AgentReport], comparison: Comparison | None) -> str:
    """The lines under the title: the test's result, then the floor as a power statement."""
    if comparison is not None:
        m = comparison.metrics[0]
        p = f"p = {m.tests[0].p_value:.3g}"
        ci = f"{m.difference:+.3f} [{m.low:+.3f}, {m.high:+.3f}], {p}"
        if m.significant:
            test = f"verified rate: {'A' if m.difference > 0 else 'B'} higher, A - B = {ci}: significant"
        else:
            test = f"verified rate: no significant difference, A - B = {ci}"
        if m.floor is None:
            power = "resolution floor " + m.floor_source.split(":")[0]
        elif m.below_floor:
            power = (f"{BELOW_FLOOR} ({m.floor:.3f}): a true difference this small is detected "
                     "less than 80% of the time")
        else:
            power = f"above the resolution floor ({m.floor:.3f}), the size detected 80% of the time"
        return f"{test}\n{power}"
    r = reports[0]
    floor = r.floors[0]
    if r.too_few_scenarios:
        return f"only {r.n_scenarios} scenario(s): too few for a resolution floor"
    if floor.known:
        return f"resolution floor of the verified rate: {floor.label} = {floor.floor_k:.3f}"
    if "agreed on every scenario" in floor.note:
        return "resolution floor unknown (not zero): every scenario's repeats agreed"
    return "resolution floor unknown: each scenario ran once"


def plot_runs(runs: list[AgentRun], reports: list[AgentReport], path: str | Path,
              comparison: Comparison | None = None) -> Path:
    """Draw one or two runs' per-scenario outcomes into the PNG at ``path`` (with the comparison if given)."""
    fig = outcome_figure(runs, reports, comparison)
    out = Path(path)
    fig.savefig(out, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return out


def outcome_figure(runs: list[AgentRun], reports: list[AgentReport],
                   comparison: Comparison | None = None) -> Figure:
    """The figure :func:`plot_runs` saves (the caller closes it)."""
    if not 1 <= len(runs) <= 2 or len(runs) != len(reports):
        raise ValueError(f"expected one or two runs with their reports; got {len(runs)} runs, "
                         f"{len(reports)} reports")
    rates = [{s: float(np.mean(v)) for s, v in r.per_scenario("verified").items()} for r in runs]
    every = {s.scenario for r in runs for s in r.scenarios}
    names = sorted(every, key=lambda s: (-float(np.mean([r[s] for r in rates if s in r] or [-1.0])), s))
    n = len(names)
    height = 1.9 + 0.24 * n
    widths = [_slots(r) for r in runs] + [max(8.0, 1.2 * sum(_slots(r) for r in runs))]
    fig, axes = plt.subplots(1, len(runs) + 1, figsize=(11, height + 1.2), sharey=True, layout="constrained",
                             gridspec_kw={"width_ratios": widths})
    cmap = ListedColormap(list(OUTCOME_COLOURS.values()))
    y = np.arange(n)
    for i, (run, ax) in enumerate(zip(runs, axes[:-1], strict=True)):
        ax.imshow(_grid(run, names), cmap=cmap, vmin=-0.5, vmax=3.5, aspect="auto", interpolation="nearest")
        ax.set_xticks(range(_slots(run)))
        ax.set_xticks(np.arange(-0.5, _slots(run)), minor=True)
        ax.set_yticks(np.arange(-0.5, n), minor=True)
        ax.grid(which="minor", color="white", linewidth=1.2)
        ax.tick_params(which="minor", length=0)
        ax.set_xlabel("repeat")
        # the letter only: a panel is a few repeats wide, and two checkpoints' names side by side overlapped
        # (issue 27); the names are in the title and the legend
        ax.set_title("AB"[i], fontsize=10, color=RUN_COLOURS[i], fontweight="bold")
    axes[0].set_yticks(y)
    axes[0].set_yticklabels(names, fontsize=8)
    ax = axes[-1]
    offsets = (0.0,) if len(runs) == 1 else (-0.17, 0.17)
    for i, (run, rep) in enumerate(zip(runs, reports, strict=True)):
        per = run.per_scenario("verified")
        for j, name in enumerate(names):
            if name not in per:
                continue
            v = per[name]
            lo, hi = wilson(float(np.mean(v)), len(v))
            ax.plot([lo, hi], [j + offsets[i]] * 2, color=RUN_COLOURS[i], alpha=0.45, linewidth=2)
            ax.plot(float(np.mean(v)), j + offsets[i], "o", color=RUN_COLOURS[i], markersize=5)
        e = rep.verified
        ax.axvspan(e.low, e.high, color=RUN_COLOURS[i], alpha=0.10)
        ax.axvline(e.value, color=RUN_COLOURS[i], linewidth=1.2, linestyle="--",
                   label=f"{'AB'[i]} {run.agent}: {e.value:.2f} [{e.low:.2f}, {e.high:.2f}]")
    ax.set_xlim(-0.03, 1.03)
    ax.set_xlabel("verified rate per scenario\n(dot; line: Wilson 95% CI over its repeats)")
    ax.xaxis.grid(True, color="#eeeeee")
    ax.set_ylim(n - 0.5, -0.5)
    handles = [Patch(facecolor=c, edgecolor="#888888", label=k) for k, c in OUTCOME_COLOURS.items()]
    fig.legend(handles=handles, loc="outside lower left", ncol=4, fontsize=8, frameon=False,
               title="episode outcome (left)", title_fontsize=8)
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower right", fontsize=8, frameon=False,
               title="overall verified rate (dashed) and 95% CI (band), scenario as the unit",
               title_fontsize=8)
    title = "Outcomes per scenario: " + "  vs  ".join(f"{'AB'[i]} = {r.agent} ({r.run})" if len(runs) == 2 else
                                                      f"{r.agent} ({r.run})" for i, r in enumerate(runs))
    fig.suptitle(f"{title}\n{_headline(reports, comparison)}", fontsize=10)
    return fig
