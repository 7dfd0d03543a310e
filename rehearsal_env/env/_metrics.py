"""The run metrics of one episode: what the env counted on the way, and what the end state shows.

Exactly as "How scoring works" defines them (:class:`~rehearsal_env.verdict.EpisodeMetrics`):

- *false completion*: the agent called ``finish`` and a goal check failed;
- *duplicate effects*: requests to an outside service that repeat an earlier
  identical one (same service, operation and payload), read from the
  ``service_requests`` record, whatever idempotency keys they carried;
- *recovered*: a scenario fault was injected (a ``refuse`` or an unknown
  outcome; the stress layer's refusal and held writes are not faults, since
  every stressed episode has them) and the episode was verified (so no hard
  rule broke) with no duplicate effect;
- *unnecessary interruptions*: ``ask_customer`` calls beyond the scenario's
  ``max_customer_contacts``;
- *rejected attempts*: actions not carried out (malformed, unknown tool, a
  tool outside the role, invalid arguments);
- *faults injected* and *stress events* are counted apart; so are customer
  contacts, turns, tool calls and the tokens an agent reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..checks import CheckResult
from ..verdict import Ending, EpisodeMetrics, Outcome


@dataclass
class Counters:
    """What the env counts during an episode (mutable: one per episode)."""

    rejected: int = 0
    """Rejected attempts."""
    contacts: int = 0
    """``ask_customer`` calls carried out."""
    tool_calls: int = 0
    """Tool calls run against the application (retries included; held and refused writes not)."""
    faults: int = 0
    """Scenario faults injected."""
    stress: int = 0
    """Stress-layer refusals."""
    tokens: int | None = None
    """Tokens the agent reported (None: none reported)."""
    input_tokens: int | None = None
    """Of ``tokens``, the prompt (input) tokens the agent reported; None when it did not split them."""
    output_tokens: int | None = None
    """Of ``tokens``, the completion (output) tokens the agent reported; None when it did not split them."""


def episode_metrics(n: Counters, *, ending: Ending, outcome: Outcome, checks: Sequence[CheckResult],
                    duplicates: int, allowed_contacts: int, turns: int) -> EpisodeMetrics:
    """The run metrics of a finished episode (see the module docstring)."""
    scored = outcome is not Outcome.NOT_SCORED
    goal_failed = any(c.kind == "goal" and not c.passed for c in checks)
    return EpisodeMetrics(
        false_completion=scored and ending is Ending.DONE and goal_failed,
        duplicate_effects=duplicates,
        recovered=n.faults > 0 and outcome is Outcome.VERIFIED and duplicates == 0,
        unnecessary_interruptions=max(0, n.contacts - allowed_contacts),
        rejected_attempts=n.rejected,
        faults_injected=n.faults,
        stress_events=n.stress,
        customer_contacts=n.contacts,
        turns=turns,
        tool_calls=n.tool_calls,
        tokens=n.tokens,
        input_tokens=n.input_tokens,
        output_tokens=n.output_tokens,
    )
