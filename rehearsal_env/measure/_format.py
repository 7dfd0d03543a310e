"""Rendering reports as a readable text table and as JSON."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

from ._compare import Comparison
from ._floor import ALPHA, POWER
from ._intervals import Estimate
from ._summary import LABELS, AgentReport


def to_json(obj: Any) -> str:
    """JSON of result records (dataclasses), with NaN and infinities as null."""
    return json.dumps(_plain(obj), indent=2)


def _plain(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def _f(x: float | None, digits: int = 3) -> str:
    return "n/a" if x is None or math.isnan(x) else f"{x:.{digits}f}"


def _unknown(x: float | None) -> str:
    return "unknown" if x is None or math.isnan(x) else f"{x:.3f}"


def _ci(e: Estimate) -> str:
    return f"[{_f(e.low)}, {_f(e.high)}]"


def _share(k: int, total: int) -> str:
    return f"{k} ({k / total:.1%})" if total else str(k)


def _causes(causes: dict[str, int] | tuple[tuple[str, int], ...]) -> str:
    items = causes.items() if isinstance(causes, dict) else causes
    return ", ".join(f"{c} {k}" for c, k in items)


def _rate_row(label: str, e: Estimate, not_scored: str = "", bounds: tuple[float, float] | None = None) -> str:
    count = f"{e.count}/{e.n_episodes}" if e.count is not None else ""
    extra = e.method
    if bounds is not None:
        extra = f"not-scored bounds [{_f(bounds[0])}, {_f(bounds[1])}]; " + extra
    if e.exact_upper is not None:
        extra += f"; exact upper bound {_f(e.exact_upper)} (one-sided 95%, Clopper-Pearson)"
    if e.exact_lower is not None:
        extra += f"; exact lower bound {_f(e.exact_lower)} (one-sided 95%, Clopper-Pearson)"
    if e.design_effect is not None:
        extra += f"; design effect {e.design_effect:.2f}"
    return f"  {label:<22}{_f(e.value):>7}  {_ci(e):<17}{count:>9}  {not_scored:>12}  {extra}"


def not_root_line(not_root: dict[str, int]) -> str:
    """The line that says which forks and restores were left out (they are never evidence about the agent)."""
    kinds = ", ".join(f"{k} {kind}(s)" for kind, k in not_root.items())
    return (f"  left out, never evidence about the agent: {kinds} (a fork or restore is a training and search tool; "
            "only root episodes, begun at reset, are counted)")


def format_report(r: AgentReport) -> str:
    """The one-run table: headline numbers with the not-scored share, worst case, pass^k / pass@k, floors."""
    splits = ", ".join(f"{k} {v}" for k, v in r.splits.items())
    total = r.n_scored + r.n_not_scored
    repeats = (f"{r.repeats} scored repeat(s) each" if r.balanced else
               f"1 to {r.repeats} scored repeats (harmonic mean K_h = {r.harmonic_repeats:.2f})")
    causes = f"; causes: {_causes(r.not_scored_causes)}" if r.n_not_scored else ""
    lines = [f"run {r.run}  agent {r.agent}", *(f"  {w}" for w in r.warnings),
             f"  {r.n_scenarios} scenarios scored, {repeats}: {r.n_scored} scored episodes; "
             f"{r.n_not_scored} not scored ({r.not_scored_share:.1%} of {total} episodes; excluded from every "
             f"rate{causes}); scenarios per split: {splits}"]
    if r.not_root:
        lines.append(not_root_line(r.not_root))
    if r.retried:
        lines.append(f"  {r.retried} retry(ies) of not-scored episodes played, each recorded: the first scored attempt "
                     f"counts; {r.open_episodes} of those counted did not replay the attempt they retried, so the "
                     "bounds count them as not scored")
    if r.sequential:
        lines.append(f"  {r.sequential}")
    if not r.balanced:
        lines.append("  unbalanced repeats after exclusions: each scenario still weighs the same")
    if r.missing_rewards:
        lines.append(f"  {r.missing_rewards} scored episodes have no reward (left out of the mean reward)")
    ns = _share(r.n_not_scored, total)
    lines += [
        "  95% intervals with the scenario as the unit",
        f"  {'':<22}{'value':>7}  {'95% CI':<17}{'count':>9}  {'not scored':>12}  method",
        _rate_row(LABELS["verified"], r.verified, ns, r.bounds("verified")),
        _rate_row(LABELS["rule_violated"], r.rule_violated, ns, r.bounds("rule_violated")),
        _rate_row(LABELS["false_completion"], r.false_completion, ns, r.bounds("false_completion")),
        _rate_row(LABELS["reward"], r.mean_reward, _share(r.n_not_scored + r.missing_rewards, total),
                  r.bounds("reward")),
        "  (not-scored bounds: the value with every not-scored episode a failure, and a success; the value itself "
        "counts scored episodes only)" if r.n_not_scored or r.open_episodes else
        "  (not-scored bounds: every episode was scored, so each bound is the value itself)",
    ]
    if r.worst_case:
        lines.append(f"  worst case, the {r.n_not_scored + r.open_episodes} not-scored episode(s) counted as failures "
                     "(not verified, "
                     "rule violated, false completion, reward -1):")
        lines += [f"  {LABELS[m]:<22}{_f(e.value):>7}  {_ci(e):<17}" for m, e in r.worst_case.items()]
    lines.append(f"  {'k':>3}  {'pass^k':>7}  {'95% CI':<17}{'pass@k':>7}  95% CI")
    for p in r.pass_k:
        gone = p.scenarios_left_out
        left = f"({gone} scenario(s) with < k scored left out)" if gone else ""
        lines.append(f"  {p.k:>3}  {_f(p.pass_all.value):>7}  {_ci(p.pass_all):<17}"
                     f"{_f(p.pass_any.value):>7}  {_ci(p.pass_any):<17}{left}".rstrip())
    lines += _reliability_lines(r)
    lines += _cost_lines(r)
    lines.append(f"  resolution floor (alpha {ALPHA}, power {POWER:.0%}; from scored repeats only):")
    if not any(fl.known for fl in r.floors):
        lines.append(f"    {r.floors[0].note}")
    for fl in r.floors if any(fl.known for fl in r.floors) else ():
        label = LABELS[fl.metric]
        if not fl.known:
            lines.append(f"    {label}: {fl.note}")
            continue
        flips = f"; flip rate {_f(fl.flip_rate)}" if fl.flip_rate is not None else ""
        lines.append(f"    {label}: {fl.label} = {_f(fl.floor_k)}, RF(1) = {_f(fl.floor_1)}"
                     f" (within-scenario variance {_f(fl.within_variance, 4)}{flips})")
        lines.append(f"      {fl.note}")
    return "\n".join(lines)


def _reliability_lines(r: AgentReport) -> list[str]:
    """Consistency, per-category rates, and the rule-violation and false-completion shares (pass^k is above)."""
    lines = ["  reliability (95% intervals, scenario as the unit; pass^k above is the chance k attempts all succeed):"]
    agree, multi = r.consistent
    if r.consistency is None:
        lines.append("    consistency: unknown, each scenario ran once (repeats >= 2 show whether repeats agree)")
    else:
        lines.append(f"    consistency: {agree} of {multi} scenarios' repeats all agree = {_f(r.consistency.value)} "
                     f"{_ci(r.consistency)} (Wilson over scenarios)")
    for label, e in (("rule violations", r.rule_violated), ("false completions", r.false_completion)):
        lines.append(f"    {label}: {_f(e.value)} {_ci(e)} of scored episodes"
                     + (f"; exact upper bound {_f(e.exact_upper)}" if e.exact_upper is not None else ""))
    if r.categories:
        lines.append(f"    {'category':<24}{'scenarios':>9}  {'verified':>8}  95% CI")
        lines += [f"    {c.category:<24}{c.verified.n_scenarios:>9}  {_f(c.verified.value):>8}  {_ci(c.verified)}"
                  for c in r.categories]
    return lines


def _money(x: float | None) -> str:
    return "n/a" if x is None or math.isnan(x) else f"{x:.4g}"


def _cost_lines(r: AgentReport) -> list[str]:
    """Tokens and cost per episode and per verified episode, and what was left out."""
    c = r.cost
    if c is None:
        return []
    lines = ["  cost (95% t intervals over scenario means):"]
    if c.tokens_per_episode is not None:
        t = c.tokens_per_episode
        lines.append(f"    tokens per episode: {t.value:.1f} [{t.low:.1f}, {t.high:.1f}] over {t.n_episodes} episodes")
    if c.prices is not None:
        lines.append(f"    prices per million tokens: input {c.prices.input_per_million:g}, output "
                     f"{c.prices.output_per_million:g} ({c.prices.source})")
    for label, e in (("cost per episode", c.per_episode), ("cost per verified episode", c.per_verified)):
        if e is not None:
            lines.append(f"    {label}: {_money(e.value)} [{_money(e.low)}, {_money(e.high)}] ({e.method}; "
                         f"{e.n_episodes} episodes)")
    if c.note:
        lines.append(f"    {c.note}")
    return lines


def format_comparison(c: Comparison) -> str:
    """The two-run table: per metric the test's result, then the floor as a power statement."""
    kind = "same checkpoint: the difference is drift" if c.same_checkpoint else "paired by scenario"
    lines = [f"A = {c.run_a} ({c.agent_a})  vs  B = {c.run_b} ({c.agent_b}); {kind}"]
    if c.provenance_differs:
        fields = ", ".join(c.provenance_differs)
        lines.append(f"  WARNING: provenance differs in {fields} (compared with --force)")
    if c.not_scored:
        shown = [f"{side} {k} of {total} episodes ({k / total if total else 0:.1%}"
                 f"{'; ' + _causes(causes) if k else ''})"
                 for side, (k, total, causes) in zip("AB", c.not_scored, strict=True)]
        lines.append(f"  not scored (excluded): {'; '.join(shown)}")
    for side, names in (("A", c.only_in_a), ("B", c.only_in_b)):
        if names:
            shown_names = ", ".join(names[:5]) + (" ..." if len(names) > 5 else "")
            lines.append(f"  {len(names)} scenarios scored only in {side} are left out: {shown_names}")
    lines.append(f"  {'':<20}{'A':>7}{'B':>7}{'A - B':>8}  {'95% CI':<18}{'corr':>5}  floor")
    for m in c.metrics:
        lines.append(f"  {LABELS[m.metric]:<20}{_f(m.value_a):>7}{_f(m.value_b):>7}{m.difference:>+8.3f}  "
                     f"[{_f(m.low)}, {_f(m.high)}]".ljust(64) + f"{_f(m.correlation, 2):>5}  {_f(m.floor)}")
        for t in m.tests:
            lines.append(f"      {t.name}: p = {t.p_value:.3g} ({t.detail})")
        if m.interval_method == "MOVER":
            lines.append("      every scenario differs by the same amount: interval by Newcombe's square-and-add "
                         "(MOVER) from each run's own interval")
        lines.append(f"      floor {m.floor_source}")
        if m.worst_low is not None and m.worst_high is not None:
            lines.append(f"      worst case, not-scored episodes as failures in one run and successes in the "
                         f"other: A - B between {m.worst_low:+.3f} and {m.worst_high:+.3f}")
        if m.extremes is not None:
            for label, p in (("failures of A, successes of B", m.extremes.worst_for_a),
                             ("successes of A, failures of B", m.extremes.best_for_a)):
                lines.append(f"      not scored as {label}: {p.decision}, A - B = {p.difference:+.3f} "
                             f"[{p.low:+.3f}, {p.high:+.3f}] ({p.interval_method} interval, p = "
                             f"{p.tests[0].p_value:.3g})")
        lines.append(f"      decision: {m.decision}")
        lines.append(f"      => {m.result}")
        lines.append(f"         {m.power}")
        if m.metric == "verified" and c.sequential is not None:
            s, lk = c.sequential, c.sequential.look
            lines.append(f"      stopped sequentially ({s.decision}): anytime-valid 95% interval of A - B "
                         f"[{lk.low:+.3f}, {lk.high:+.3f}] over {lk.pairs} pairs (beside the fixed-sample "
                         f"[{m.low:+.3f}, {m.high:+.3f}]); e-value against no difference {lk.e_value:.3g}, floor "
                         f"{_f(lk.floor)}")
            lines.append(f"      {s.note}")
    if c.categories:
        lines.append("  verified rate per category, A - B (exact paired test per category, Holm-corrected over "
                     f"{len(c.categories)} categories):")
        lines.append(f"    {'category':<24}{'paired':>7}{'A - B':>8}  {'95% CI':<18}{'p':>8}{'p (Holm)':>10}")
        for g in c.categories:
            mark = "  differs" if g.significant else "  not decided (not scored)" if g.not_decided else ""
            lines.append(f"    {g.category:<24}{g.n_paired:>7}{g.difference:>+8.3f}  "
                         f"[{_f(g.low)}, {_f(g.high)}]".ljust(59) + f"{g.test.p_value:>8.3g}{g.p_holm:>10.3g}{mark}")
    rep = c.reproducibility
    if rep is not None:
        lines += [
            "  same checkpoint twice:",
            f"    flips {rep.flips} of {rep.pairs} episode pairs (rate {_f(rep.flip_rate)}); "
            f"expected from repeats {_f(rep.within_flip_rate)}",
            f"    observed floor {_unknown(rep.observed_floor)}; "
            f"floor predicted by the repeats {_unknown(rep.within_floor)}",
            f"    drift {rep.drift:+.3f}, p = {rep.drift_p:.3g}",
            f"    {rep.note}",
        ]
    return "\n".join(lines)
