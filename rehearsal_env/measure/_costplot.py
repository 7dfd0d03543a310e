"""A picture of several checkpoints' cost and reliability.

Left: cost per episode (x) against the verified rate (y), each checkpoint with both 95% intervals as error
bars; the Pareto front (no other checkpoint is both cheaper and better) is joined by a step line and drawn
filled, the rest hollow. Checkpoints without a cost (no prices, or no measured tokens) are listed under the
panel, not plotted at zero. Right: pass^k for k = 1..K of every checkpoint with its 95% intervals (the chance
that k attempts at a scenario all succeed), and each checkpoint's consistency in its legend.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from ._cost import pareto_front  # noqa: E402
from ._summary import AgentReport  # noqa: E402

COLOURS = ("#1f4e9c", "#e07b00", "#2e8b57", "#c0392b", "#7d3c98", "#5d6d7e", "#b7950b", "#117a65")
"""One colour per checkpoint, cycled."""


def cost_reliability_figure(reports: list[AgentReport]) -> Figure:
    """The figure (the caller closes it)."""
    if not reports:
        raise ValueError("expected at least one checkpoint's report to draw; got none")
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 5.2), layout="constrained")
    names = [r.agent for r in reports]
    label = {id(r): r.agent if names.count(r.agent) == 1 else f"{r.agent} ({Path(r.run).name})" for r in reports}
    costed = [r for r in reports if r.cost is not None and r.cost.per_episode is not None]
    front = pareto_front([(r.cost.per_episode.value, r.verified.value) for r in costed  # type: ignore[union-attr]
                          ])
    for i, (r, on) in enumerate(zip(costed, front, strict=True)):
        c, v = r.cost.per_episode, r.verified  # type: ignore[union-attr]
        assert c is not None
        colour = COLOURS[reports.index(r) % len(COLOURS)]
        left.errorbar(c.value, v.value, xerr=[[max(0.0, c.value - c.low)], [max(0.0, c.high - c.value)]],
                      yerr=[[max(0.0, v.value - v.low)], [max(0.0, v.high - v.value)]], fmt="o", color=colour,
                      capsize=3, markerfacecolor=colour if on else "white", markersize=8, label=label[id(r)])
        left.annotate(label[id(r)], (c.value, v.value), textcoords="offset points", xytext=(6, 6 + 10 * (i % 2)),
                      fontsize=8, color=colour)
    if any(front):
        pts = sorted((r.cost.per_episode.value, r.verified.value)  # type: ignore[union-attr]
                     for r, on in zip(costed, front, strict=True) if on)
        left.step([p[0] for p in pts], [p[1] for p in pts], where="post", color="#444444", linestyle="--",
                  linewidth=1, label="Pareto front (filled)")
    left.set_xlabel("cost per episode (95% CI, clustered by scenario)")
    left.set_ylabel("verified rate (95% CI)")
    left.set_ylim(-0.03, 1.03)
    left.set_title("cost and accuracy", fontsize=10)
    left.grid(True, color="#eeeeee")
    missing = [label[id(r)] for r in reports if r not in costed]
    if missing:
        left.text(0.0, -0.2, "not plotted, no cost (no prices or no measured tokens): " + ", ".join(missing),
                  transform=left.transAxes, fontsize=8, color="#555555", wrap=True)
    if not costed:
        left.text(0.5, 0.5, "no checkpoint has a cost", transform=left.transAxes, ha="center", color="#555555")
    else:
        left.legend(fontsize=8, loc="lower right")
    for i, r in enumerate(reports):
        colour = COLOURS[i % len(COLOURS)]
        ks = [p.k for p in r.pass_k]
        vals = [p.pass_all.value for p in r.pass_k]
        lows = [max(0.0, p.pass_all.value - p.pass_all.low) for p in r.pass_k]
        highs = [max(0.0, p.pass_all.high - p.pass_all.value) for p in r.pass_k]
        agree = ("" if r.consistency is None else
                 f"; consistency {r.consistent[0]}/{r.consistent[1]} = {r.consistency.value:.2f}")
        right.errorbar([k + 0.06 * (i - (len(reports) - 1) / 2) for k in ks], vals, yerr=[lows, highs], fmt="-o",
                       color=colour, capsize=3, markersize=5, label=f"{label[id(r)]}{agree}")
    right.set_xlabel("k (attempts)")
    right.set_ylabel("pass^k: all k attempts verified (95% CI)")
    right.set_ylim(-0.03, 1.03)
    right.set_xticks(range(1, max((len(r.pass_k) for r in reports), default=1) + 1))
    right.set_title("reliability", fontsize=10)
    right.grid(True, color="#eeeeee")
    right.legend(fontsize=8, loc="lower left")
    fig.suptitle("Cost and reliability of " + ", ".join(r.agent for r in reports), fontsize=10)
    return fig


def plot_cost_reliability(reports: list[AgentReport], path: str | Path) -> Path:
    """Draw :func:`cost_reliability_figure` into the PNG at ``path``."""
    fig = cost_reliability_figure(reports)
    out = Path(path)
    fig.savefig(out, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return out
