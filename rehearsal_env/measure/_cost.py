"""Cost: what an episode, and a verified episode, cost, with intervals clustered by scenario.

Prices come from the agent profile the run played (``run.json``'s ``agent_profile``, its ``[price]`` table:
``input_per_million`` and ``output_per_million``, in the profile's currency, USD unless it says), or are given
(``measure.py --price IN,OUT``). An episode's cost is ``input_tokens x input price + output_tokens x output
price`` (per million), from the records' ``input_tokens`` and ``output_tokens`` where they have them. Records
of version 5 carry them when the agent split its usage (the ``openai`` agent does, from each reply's
``usage.prompt_tokens`` and ``usage.completion_tokens``); records with only the total ``tokens`` (older records,
or an agent that reports a total) are costed only when both prices are equal (then the total suffices), and are
otherwise counted and said. Episodes without
measured tokens (external mode: the agent reported none) are counted apart and left out of the cost, never
counted as free.

* Cost per episode: the mean over scenarios of each scenario's mean cost, with the t interval on n - 1 df
  over those means (the clustered standard error, as for every rate: :mod:`._intervals`).
* Cost per verified episode: the ratio R = mean_j(c_j) / mean_j(v_j) of the mean cost to the verified rate,
  scenario means c_j and v_j; its standard error by the delta method over scenarios,
  ``sd_j(c_j - R v_j) / (sqrt(n) mean_j(v_j))`` (the ratio estimator's linearisation: Cochran, "Sampling
  Techniques", 3rd ed., sec. 6.4), t interval on n - 1 df. With no verified episode it is unbounded: not given.
* The Pareto front of several checkpoints: those no other checkpoint beats on both cost per episode (lower)
  and verified rate (higher).
"""

from __future__ import annotations

import json
import math
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.dataset as ds
from scipy import stats

from ..records._record import ROOT_EPISODE, episode_kind
from ._intervals import CONFIDENCE, Estimate, t_bounds
from ._load import AgentRun, checkpoint_of

MILLION = 1_000_000


@dataclass(frozen=True)
class Prices:
    """Prices per million tokens."""

    input_per_million: float
    """Price of a million input (prompt) tokens."""
    output_per_million: float
    """Price of a million output (completion) tokens."""
    source: str
    """Where they come from: ``agent profile NAME`` or ``given``."""


@dataclass(frozen=True)
class CostReport:
    """What one checkpoint's episodes cost."""

    prices: Prices | None
    """The prices used; None when neither the profile nor the command line gives any."""
    costed_episodes: int
    """Scored episodes whose cost is known."""
    unmeasured_episodes: int
    """Scored episodes without measured tokens (external mode): counted apart, left out of the cost."""
    tokens_per_episode: Estimate | None
    """Total tokens per episode (over the episodes with measured tokens); None when none has."""
    per_episode: Estimate | None
    """Cost per episode; None when it cannot be computed (see ``note``)."""
    per_verified: Estimate | None
    """Cost per verified episode (ratio estimator); None when unknown or unbounded."""
    note: str
    """What was left out or could not be computed, and why."""


def parse_prices(text: str) -> Prices:
    """``IN,OUT`` (per million tokens) from the command line."""
    try:
        a, b = (float(x) for x in text.split(","))
    except ValueError:
        raise ValueError(f"expected --price IN,OUT (prices per million input and output tokens, e.g. 0.15,0.60); "
                         f"got {text!r}") from None
    if a < 0 or b < 0 or not (math.isfinite(a) and math.isfinite(b)):
        raise ValueError(f"expected non-negative prices per million tokens; got {text!r}")
    return Prices(a, b, "given")


def profile_prices(run_dir: str | Path) -> Prices | None:
    """The ``[price]`` of the agent profile in the run's ``run.json`` (None when it declares none)."""
    path = Path(run_dir) / "run.json"
    try:
        config = json.loads(path.read_text()).get("config", {})
        profile = tomllib.loads(config.get("agent_profile") or "")
    except (OSError, ValueError, AttributeError):
        return None
    price = profile.get("price")
    if not isinstance(price, dict):
        return None
    try:
        return Prices(float(price["input_per_million"]), float(price["output_per_million"]),
                      f"agent profile {profile.get('name', '?')}")
    except (KeyError, TypeError, ValueError):
        return None


def token_rows(run_dir: str | Path) -> dict[tuple[str, str, int], dict[str, Any]]:
    """(checkpoint, scenario, repeat) -> the token columns the records have (``tokens``, and the split if any), of
    root episodes only (a fork or restore that kept its parent's repeat never stands in for it)."""
    dataset = ds.dataset(str(Path(run_dir) / "episodes.parquet"), format="parquet")
    names = dataset.schema.names
    wanted = [c for c in ("agent", "agent_version", "scenario", "repeat", "tokens", "input_tokens",
                          "output_tokens", "parent_episode", "parent_kind") if c in names]
    return {(checkpoint_of(r), str(r["scenario"]), int(r["repeat"])): r
            for r in dataset.to_table(columns=wanted).to_pylist()
            if episode_kind(r.get("parent_episode"), r.get("parent_kind")) == ROOT_EPISODE}


def _t_estimate(means: np.ndarray, episodes: int, method: str) -> Estimate:
    m, se, low, high = (float(x[0]) for x in t_bounds(means[None, :]))
    return Estimate(value=m, low=low, high=high, se=se, method=method, n_scenarios=len(means), n_episodes=episodes)


def ratio_estimate(costs: np.ndarray, verified: np.ndarray, episodes: int) -> Estimate | None:
    """Cost per verified episode from per-scenario mean costs and verified rates (None when nothing verified)."""
    n = len(costs)
    vbar = float(np.mean(verified))
    if n == 0 or vbar == 0:
        return None
    r = float(np.mean(costs)) / vbar
    if n < 2:
        return Estimate(r, math.nan, math.nan, math.nan, "ratio of means; one scenario: no interval", n, episodes)
    se = float(np.std(costs - r * verified, ddof=1) / (math.sqrt(n) * vbar))
    half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, n - 1)) * se
    return Estimate(r, r - half, r + half, se, f"ratio of scenario means, delta method, t on {n - 1} df", n, episodes)


def cost_report(run: AgentRun, prices: Prices | None = None,
                rows: Mapping[tuple[str, str, int], Mapping[str, Any]] | None = None) -> CostReport:
    """The cost of ``run``'s scored episodes at ``prices`` (default: the run's profile's)."""
    prices = prices or profile_prices(run.run)
    rows = rows if rows is not None else token_rows(run.run)
    total: dict[str, list[float]] = {}
    cost: dict[str, list[float]] = {}
    verified: dict[str, list[float]] = {}
    unmeasured = unsplit = 0
    for s in run.scenarios:
        for rep, ver in zip(s.repeats.tolist(), s.values["verified"].tolist(), strict=True):
            row = rows.get((run.agent, s.scenario, int(rep)), {})
            inp, out, whole = row.get("input_tokens"), row.get("output_tokens"), row.get("tokens")
            split = (float(inp), float(out)) if inp is not None and out is not None else None
            tokens = sum(split) if split is not None else None if whole is None else float(whole)
            if tokens is None:
                unmeasured += 1
                continue
            total.setdefault(s.scenario, []).append(tokens)
            if prices is None:
                continue
            if split is not None:
                c = (split[0] * prices.input_per_million + split[1] * prices.output_per_million) / MILLION
            elif prices.input_per_million == prices.output_per_million:
                c = tokens * prices.input_per_million / MILLION
            else:
                unsplit += 1
                continue
            cost.setdefault(s.scenario, []).append(c)
            verified.setdefault(s.scenario, []).append(ver)
    measured = sum(len(v) for v in total.values())
    tokens_est = (_t_estimate(np.array([np.mean(v) for v in total.values()]), measured,
                              "t on scenario means") if total else None)
    notes = []
    if unmeasured:
        notes.append(f"{unmeasured} scored episode(s) without measured tokens (the agent reported none: external "
                     "mode, or a scripted agent) are counted apart and left out of the cost")
    if prices is None:
        notes.append("no prices: the agent profile declares no [price] and none was given (measure.py --price IN,OUT)")
    if unsplit:
        notes.append(f"{unsplit} episode(s) record only a total of tokens, and input and output prices differ: "
                     "left out of the cost (records carry input_tokens and output_tokens only where the writer "
                     "recorded them; give equal prices with --price P,P to cost the totals)")
    per_episode = per_verified = None
    if cost:
        names = sorted(cost)
        costs = np.array([np.mean(cost[s]) for s in names])
        rates = np.array([np.mean(verified[s]) for s in names])
        episodes = sum(len(cost[s]) for s in names)
        per_episode = _t_estimate(costs, episodes, f"t on {len(costs) - 1} df over scenario means")
        per_verified = ratio_estimate(costs, rates, episodes)
        if per_verified is None:
            notes.append("no verified episode among the costed ones: the cost per verified episode is unbounded")
    return CostReport(prices=prices, costed_episodes=sum(len(v) for v in cost.values()), unmeasured_episodes=unmeasured,
                      tokens_per_episode=tokens_est, per_episode=per_episode, per_verified=per_verified,
                      note="; ".join(notes))


def pareto_front(points: Sequence[tuple[float, float]]) -> list[bool]:
    """For (cost, rate) points: whether each is on the front (no other is as cheap and as good, and better in one)."""
    out = []
    for i, (c, r) in enumerate(points):
        beaten = any(c2 <= c and r2 >= r and (c2 < c or r2 > r) for j, (c2, r2) in enumerate(points) if j != i)
        out.append(not beaten)
    return out
