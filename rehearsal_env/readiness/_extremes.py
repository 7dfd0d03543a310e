"""The readiness rules over a list of episodes, and the two extremes of the not-scored ones.

Readiness decides only what not-scored episodes cannot change. The model endpoint is often the party under test's
own, and a provider failure must be recorded ``not_scored (provider)``; an endpoint that fails exactly the episodes
its agent is losing would otherwise choose which episodes count. So the rules are applied twice: with every
not-scored root episode on a scenario in use counted as the worst outcome for the agent (not verified, a broken hard
rule, a false completion, no world-tool call) and as the best (verified, clean). The verdict is "Ready to pilot"
only when both extremes are ready, "Needs work" only when neither is, and otherwise "Not decided", naming the
not-scored episodes and their causes: rerun them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

MIN_SCORED = 3
"""Scored episodes needed on scenarios the version never learned from."""
MIN_VERIFIED_SHARE = 0.8
"""Share of those episodes that must be verified."""


@dataclass(frozen=True)
class Episode:
    """One root episode on a scenario in use, as the rules read it."""

    tag: str
    """``scenario#repeat``."""
    outcome: str
    """``verified``, ``not_achieved``, ``rule_violated`` or ``not_scored``."""
    false_completion: bool
    """Whether it claimed to be done when a goal check failed."""
    world_tool_calls: int | None
    """World-tool calls (None: the record does not say)."""
    counted: bool
    """Whether rules 2 and 3 count it (a scenario this version never learned from)."""
    open: bool = False
    """Whether it was scored by a retry that did not replay the attempt it retried (filled at both extremes like a
    not-scored episode; :mod:`rehearsal_env.records._attempts`)."""


def extreme(episodes: Sequence[Episode], worst: bool) -> list[Episode]:
    """``episodes`` with each not-scored (or open) one the worst outcome for the agent (``worst``) or the best."""
    if worst:
        fill = {"outcome": "rule_violated", "false_completion": True, "world_tool_calls": 0}
    else:
        fill = {"outcome": "verified", "false_completion": False, "world_tool_calls": 1}
    return [replace(e, **fill) if e.outcome == "not_scored" or e.open else e  # type: ignore[arg-type]
            for e in episodes]


def rule_reasons(episodes: Sequence[Episode], scope: str, improved: bool) -> list[str]:
    """Why scored ``episodes`` need work under rules 2-5 and the world-tool check (empty: ready)."""
    reasons = []
    counted = [e for e in episodes if e.counted]
    verified = sum(e.outcome == "verified" for e in counted)
    if len(counted) < MIN_SCORED:
        reasons.append(f"only {len(counted)} scored episode(s) on {scope} this version never learned "
                       f"from; needs at least {MIN_SCORED}: run more {'holdout ' * improved}episodes")
    if counted and verified / len(counted) < MIN_VERIFIED_SHARE:
        reasons.append(f"{verified / len(counted):.0%} verified ({verified} of {len(counted)} on "
                       f"{scope} it never learned from); needs {MIN_VERIFIED_SHARE:.0%} or more")
    violations = [e.tag for e in episodes if e.outcome == "rule_violated"]
    if violations:
        reasons.append(f"{len(violations)} episode(s) broke a hard rule: {some(violations)}")
    false = [e.tag for e in episodes if e.false_completion]
    if false:
        reasons.append(f"{len(false)} episode(s) claimed to be done when they were not: {some(false)}")
    tool_use = [e.world_tool_calls for e in episodes if e.world_tool_calls is not None]
    if tool_use and not any(tool_use):
        reasons.append(f"none of the {len(tool_use)} scored episode(s) called one of the world's tools (the agent only "
                       "talked, finished or gave up): its outcomes say nothing of its tool use; check that its "
                       "model is offered the tools")
    return reasons


def verified_share(episodes: Sequence[Episode]) -> float | None:
    """Verified share of the counted episodes (None: none counted)."""
    counted = [e for e in episodes if e.counted]
    return sum(e.outcome == "verified" for e in counted) / len(counted) if counted else None


def some(tags: Sequence[str], n: int = 5) -> str:
    """The first ``n`` tags, and how many more."""
    return ", ".join(tags[:n]) + (f" and {len(tags) - n} more" if len(tags) > n else "")
