"""The run summary: counts per outcome, mean reward and the run metrics, from records alone."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..records import EpisodeRecord

OUTCOMES = ("verified", "not_achieved", "rule_violated", "not_scored")
METRICS = ("false_completions", "duplicate_effects", "recovered", "unnecessary_interruptions",
           "rejected_attempts", "faults_injected")


def summarize(records: Sequence[EpisodeRecord]) -> dict[str, Any]:
    """``summary.json``'s numbers. Not-scored episodes count in ``not_scored`` and nowhere else."""
    scored = [r for r in records if r.outcome != "not_scored"]
    out: dict[str, Any] = {"episodes": len(records)}
    for outcome in OUTCOMES:
        out[outcome] = sum(r.outcome == outcome for r in records)
    rewards = [r.reward for r in scored if r.reward is not None]
    outcome_rewards = [r.outcome_reward for r in scored if r.outcome_reward is not None]
    out["mean_reward"] = sum(rewards) / len(rewards) if rewards else None
    out["mean_outcome_reward"] = sum(outcome_rewards) / len(outcome_rewards) if outcome_rewards else None
    out["false_completions"] = sum(r.false_completion for r in scored)
    out["duplicate_effects"] = sum(r.duplicate_effects for r in scored)
    out["recovered"] = sum(r.recovered for r in scored)
    out["unnecessary_interruptions"] = sum(r.unnecessary_interruptions for r in scored)
    out["rejected_attempts"] = sum(r.rejected_attempts for r in records)
    out["faults_injected"] = sum(r.faults_injected for r in records)
    return out


def format_table(summary: dict[str, Any]) -> str:
    """The summary as a small table for people."""
    n = summary["episodes"] or 1
    lines = [f"{'outcome':<16}{'episodes':>9}{'share':>8}"]
    for outcome in OUTCOMES:
        lines.append(f"{outcome:<16}{summary[outcome]:>9}{summary[outcome] / n:>8.1%}")
    mean = summary["mean_reward"]
    lines.append(f"{'mean reward':<16}{'-' if mean is None else f'{mean:.3f}':>9}")
    lines.append("")
    lines.append("  ".join(f"{m}={summary[m]}" for m in METRICS))
    return "\n".join(lines)
