"""The readiness verdict for people: the label, the numbers behind it (with the not-scored bounds), the reasons."""

from __future__ import annotations

from ._rules import Readiness


def _causes(causes: tuple[tuple[str, int], ...]) -> str:
    return ", ".join(f"{c} {k}" for c, k in causes)


def format_readiness(r: Readiness) -> str:
    """The verdict for people: the label, the numbers behind it, and the reasons."""
    share = "-" if r.verified_share is None else f"{r.verified_share:.0%}"
    scope = "holdout, improved version" if r.improved else "all scenarios"
    played = f" (played by key {r.key_id})" if r.key_id is not None else ""
    lines = [f"{r.label}: agent {r.agent} ({r.agent_version}) on world {r.world} {r.world_version}{played}",
             f"  counted {r.counted} scored episode(s) ({scope}), {r.verified} verified ({share}); "
             f"hard rules broken {len(r.rule_violations)}; false completions {len(r.false_completions)}"]
    if r.bounds is not None:
        lo, hi = ("-" if x is None else f"{x:.0%}" for x in r.bounds)
        lines.append(f"  verified share with the not-scored episodes as failures {lo}, as successes {hi}")
    ns = "-" if r.not_scored_share is None else f"{r.not_scored_share:.1%}"
    causes = f"; causes: {_causes(r.not_scored_causes)}" if r.not_scored else ""
    lines.append(f"  not scored {r.not_scored} of {r.counted + r.not_scored} episode(s) it would count ({ns}; "
                 f"at most {r.max_not_scored_share:.0%} may be){causes}")
    if r.left_out:
        lines.append("  not counted: " + ", ".join(f"{n} {why}" for why, n in r.left_out))
    if r.other_keys:
        lines.append(f"  also played under this agent version by key(s) {', '.join(r.other_keys)}: each key has its "
                     "own verdict, and none changes this one")
    lines += [f"  - {reason}" for reason in r.reasons]
    return "\n".join(lines)
