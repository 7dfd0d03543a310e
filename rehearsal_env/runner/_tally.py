"""The run summary kept as running totals: records are added as they are written, none is read again.

``rehearsal serve`` rewrites ``summary.json`` after every part it writes; summing every record the directory
holds each time (:func:`._summary.summary_of`) made a flush cost more with every part. A
:class:`SummaryTally` holds the totals ``summary_of`` computes, so adding a part costs its own records only,
and :meth:`SummaryTally.summary` gives the same dictionary as ``summary_of`` over every record added (the
means' float sums are added in the order the records came, so they may differ from a sum in another order
in the last digit).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..verdict import NotScoredCause
from ._summary import OUTCOMES, Summarized

_CAUSES = (*(c.value for c in NotScoredCause), "unknown")


@dataclass
class SummaryTally:
    """Running totals of ``summary.json``'s numbers over the records added so far."""

    episodes: int = 0
    """Records added."""
    outcomes: Counter[str] = field(default_factory=Counter)
    """Records per outcome."""
    causes: Counter[str] = field(default_factory=Counter)
    """Not-scored records per failed part (``unknown`` when none is named)."""
    rewards: tuple[float, int] = (0, 0)
    """Sum and count of the scored records' rewards (None left out)."""
    outcome_rewards: tuple[float, int] = (0, 0)
    """Sum and count of the scored records' outcome rewards (None left out)."""
    scored: Counter[str] = field(default_factory=Counter)
    """Sums over scored records: false completions, duplicate effects, recovered, unnecessary interruptions."""
    every: Counter[str] = field(default_factory=Counter)
    """Sums over every record: rejected attempts, faults injected."""
    tokens: tuple[int, int] = (0, 0)
    """Sum and count of the reported tokens."""
    modelled: tuple[int, int, float] = (0, 0, 0.0)
    """Records of a model agent, their model calls and the calls' latency in ms."""
    crashes: Counter[str] = field(default_factory=Counter)
    """Tool crashes per tool."""
    world_calls: tuple[int, int, bool] = (0, 0, False)
    """Sum and count of world tool calls (None left out), and whether any was not zero."""

    def add(self, records: Iterable[Summarized]) -> None:
        """Add records (in the order they are to be summed)."""
        for r in records:
            self.episodes += 1
            self.outcomes[r.outcome] += 1
            self.every["rejected_attempts"] += r.rejected_attempts
            self.every["faults_injected"] += r.faults_injected
            if r.outcome == "not_scored":
                self.causes[r.not_scored_cause or "unknown"] += 1
            else:
                if r.reward is not None:
                    self.rewards = (self.rewards[0] + r.reward, self.rewards[1] + 1)
                if r.outcome_reward is not None:
                    self.outcome_rewards = (self.outcome_rewards[0] + r.outcome_reward, self.outcome_rewards[1] + 1)
                self.scored["false_completions"] += r.false_completion
                self.scored["duplicate_effects"] += r.duplicate_effects
                self.scored["recovered"] += r.recovered
                self.scored["unnecessary_interruptions"] += r.unnecessary_interruptions
            if r.tokens is not None:
                self.tokens = (self.tokens[0] + r.tokens, self.tokens[1] + 1)
            if r.model_calls is not None:
                n, calls, ms = self.modelled
                self.modelled = (n + 1, calls + (r.model_calls or 0), ms + (r.model_latency_ms or 0.0))
            for crash in r.tool_crashes or ():
                self.crashes[crash["tool"] if isinstance(crash, dict) else crash.tool] += 1
            if r.world_tool_calls is not None:
                total, count, nonzero = self.world_calls
                self.world_calls = (total + r.world_tool_calls, count + 1, nonzero or bool(r.world_tool_calls))

    def summary(self) -> dict[str, Any]:
        """``summary.json``'s numbers over the records added (what :func:`._summary.summary_of` gives)."""
        out: dict[str, Any] = {"episodes": self.episodes, **{o: self.outcomes[o] for o in OUTCOMES}}
        out["not_scored_by_cause"] = {c: self.causes[c] for c in _CAUSES if self.causes[c]}
        out["mean_reward"] = self.rewards[0] / self.rewards[1] if self.rewards[1] else None
        out["mean_outcome_reward"] = (self.outcome_rewards[0] / self.outcome_rewards[1]
                                      if self.outcome_rewards[1] else None)
        for name in ("false_completions", "duplicate_effects", "recovered", "unnecessary_interruptions"):
            out[name] = self.scored[name]
        out["rejected_attempts"] = self.every["rejected_attempts"]
        out["faults_injected"] = self.every["faults_injected"]
        n, calls, ms = self.modelled
        out.update({"tokens_per_episode": self.tokens[0] / self.tokens[1] if self.tokens[1] else None,
                    "model_calls": calls if n else None,
                    "model_latency_ms_per_episode": ms / n if n else None,
                    "model_latency_ms_per_call": ms / calls if calls else None})
        out["tool_crashes"] = dict(sorted(self.crashes.items()))
        out["tool_crashes_total"] = sum(self.crashes.values())
        total, count, nonzero = self.world_calls
        out.update({"world_tool_calls": total if count else None, "no_world_tool_calls": bool(count) and not nonzero})
        return out
