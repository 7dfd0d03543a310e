"""Lessons from failed episodes, written into an agent profile's instructions.

Two writers, one output shape (a list of one-line lessons):

- :class:`RuleWriter` (no model): deterministic, from the names of the failed goal
  checks and broken hard rules (numbers generalised to ``N``, so one lesson covers
  every scenario of a template), the policy each broken rule enforces, and the run
  metrics (false completions, duplicate effects, rejected attempts, interruptions,
  turn limits). Lessons are ordered by how many episodes they cover.
- :class:`ModelWriter`: a model over an OpenAI-compatible API reads the same facts
  (:func:`failure_brief`) and the current instructions, and answers with lessons, one
  per line starting with ``- ``.

:func:`with_lessons` puts the lessons under one heading at the end of the
instructions, keeping the lessons already there and adding only new ones. Lessons are
deduplicated (:func:`lesson_key`: case, spacing and end punctuation aside), among
themselves and against those the instructions hold, whichever writer wrote them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import openai

from ..agents import Endpoint
from ..worlds import World
from ._reader import FailedEpisode

HEADING = "Lessons from failed train and dev episodes:"
"""The heading of the lessons section of improved instructions."""
MAX_LESSONS = 12
"""Most lessons one improvement adds."""
_NUMBER = re.compile(r"(#?)\d+(?:\.\d+)?")


def general(name: str) -> str:
    """A check name with its numbers as ``N`` (``#3294`` -> ``#N``), so scenarios of one template agree."""
    return _NUMBER.sub(lambda m: f"{m.group(1)}N", name)


def _policies(worlds: Sequence[World]) -> dict[str, str]:
    """General hard-rule name -> the policy text it enforces."""
    out: dict[str, str] = {}
    for world in worlds:
        for policy in world.policies:
            for rule in policy.hard_rules:
                out.setdefault(general(rule), policy.text)
    return out


@dataclass(frozen=True)
class Finding:
    """One kind of failure and how many episodes showed it."""

    kind: str
    """``rule``, ``goal``, ``no_world_tool`` (the agent called none of the world's tools) or a run metric
    (``false_completion``, ``duplicate``, ``rejected``, ``interruption``, ``turn_limit``)."""
    name: str
    """The general check name, or the metric's name."""
    episodes: int
    """Failed episodes that showed it."""
    policy: str | None = None
    """The policy a broken rule enforces (None: none known)."""
    detail: tuple[tuple[str, int], ...] = ()
    """For rejected attempts: each kind observed (``cut_off_length``, ...) with how many attempts had it."""


def findings(failures: Sequence[FailedEpisode], worlds: Sequence[World] = ()) -> list[Finding]:
    """What went wrong, counted per episode, most frequent first (ties by kind and name)."""
    policies = _policies(worlds)
    counts: Counter[tuple[str, str]] = Counter()
    kinds: Counter[str] = Counter(k for f in failures for k in f.rejected_kinds)
    for f in failures:
        seen = {("rule", general(r)) for r in f.broken_rules} | {("goal", general(g)) for g in f.failed_goals}
        if f.world_tool_calls == 0:
            seen.add(("no_world_tool", "no world tool called"))
        if f.false_completion:
            seen.add(("false_completion", "false completion"))
        if f.duplicate_effects:
            seen.add(("duplicate", "duplicate effect"))
        if f.rejected_attempts:
            seen.add(("rejected", "rejected attempt"))
        if f.unnecessary_interruptions:
            seen.add(("interruption", "unnecessary interruption"))
        if f.ending == "turn_limit":
            seen.add(("turn_limit", "turn limit"))
        counts.update(seen)
    order = {"no_world_tool": 0, "rule": 1, "false_completion": 2, "duplicate": 3, "goal": 4, "rejected": 5,
             "interruption": 6, "turn_limit": 7}
    found = [Finding(kind, name, n, policies.get(name) if kind == "rule" else None,
                     tuple(sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))) if kind == "rejected" else ())
             for (kind, name), n in counts.items()]
    return sorted(found, key=lambda x: (-x.episodes, order[x.kind], x.name))


def _times(n: int) -> str:
    return f"{n} failed episode{'s' if n != 1 else ''}"


REJECTED_KINDS = {
    "cut_off_length": "replies cut off at max_tokens",
    "cut_off_tokens": "replies running past max_tokens",
    "cut_off_time": "replies running past the time a call may take",
    "malformed_json": "call arguments that are not JSON",
    "unknown_tool": "tools not offered",
    "empty_reply": "empty replies",
    "invalid_action": "calls the environment refused",
}
"""What each kind of a model agent's rejected attempt means, as a lesson says it."""


def _rejected(finding: Finding, n: str) -> str:
    seen = "; ".join(f"{REJECTED_KINDS.get(k, k)} ({c}x)" for k, c in finding.detail)
    why = seen or ("replies cut off or empty, arguments that are not JSON, tools not offered, arguments the schema "
                   "refuses")
    return (f"Attempts were rejected in {n} ({why}): reply with one short, complete tool call from your tool list, "
            "its arguments one JSON object as the schema names them.")


def rule_lesson(finding: Finding) -> str:
    """The lesson the rule-based writer draws from one finding."""
    n = _times(finding.episodes)
    if finding.kind == "rejected":
        return _rejected(finding, n)
    if finding.kind == "rule":
        policy = f'follow the policy "{finding.policy}"' if finding.policy else "never do what it forbids"
        return f'Hard rule "{finding.name}" was broken in {n}: {policy}.'
    if finding.kind == "goal":
        return f'Goal "{finding.name}" was not met in {n}: check it with a read before you finish.'
    return {
        "false_completion": f"You said the work was done while it was not, in {n}: read the result back before "
                            "calling finish.",
        "duplicate": f"A request was sent twice in {n}: after an unknown outcome read the state or use "
                     "retry_operation; never repeat a write.",
        "no_world_tool": f"No world tool was called in {n}: the work is done only through the tools; answer each "
                         "turn with one tool call from your tool list, and finish only after the calls that do it.",
        "interruption": f"The customer was asked more often than needed in {n}: ask only for a fact no tool gives.",
        "turn_limit": f"The turn limit ran out in {n}: plan the calls, and finish once the work is checked.",
    }[finding.kind]


class LessonWriter(Protocol):
    """Writes lessons from failures (and the instructions they will join)."""

    name: str
    """How lineage names the writer (``rules`` or ``model:NAME``)."""

    def lessons(self, failures: Sequence[FailedEpisode], instructions: str, worlds: Sequence[World]) -> list[str]:
        ...


class RuleWriter:
    """The deterministic writer: one lesson per finding, most frequent first (see the module doc)."""

    name = "rules"

    def lessons(self, failures: Sequence[FailedEpisode], instructions: str, worlds: Sequence[World]) -> list[str]:
        return [rule_lesson(f) for f in findings(failures, worlds)][:MAX_LESSONS]


def failure_brief(failures: Sequence[FailedEpisode], worlds: Sequence[World] = ()) -> str:
    """The facts a model reads: each finding with its count and policy, and the scenarios it came from."""
    lines = [f"{len(failures)} failed episode(s) of train and dev scenarios."]
    for f in findings(failures, worlds):
        policy = f' (policy: "{f.policy}")' if f.policy else ""
        lines.append(f"- {f.kind}: {f.name}{policy}: {_times(f.episodes)}")
    categories = Counter(f.category for f in failures)
    lines.append("Scenario categories: " + ", ".join(f"{c} ({n})" for c, n in sorted(categories.items())))
    return "\n".join(lines)


MODEL_SYSTEM = (
    "You improve the instructions of a tool-using customer-support agent. You read what went wrong in its failed "
    "practice episodes (the names of the checks that failed, the hard rules it broke and the policies behind them, "
    "and counts). Write general lessons that would have prevented these failures: one short imperative sentence "
    "each, one per line, each line starting with '- '. Name no scenario, order id or amount. At most "
    f"{MAX_LESSONS} lessons; nothing else.")


class ModelWriter:
    """A model writes the lessons (see the module doc).

    Args:
        model: The model name sent to the provider.
        endpoint: Where the model is served.
    """

    def __init__(self, model: str, endpoint: Endpoint | None = None) -> None:
        self.model = model
        self.endpoint = endpoint or Endpoint()
        self.name = f"model:{model}"

    def lessons(self, failures: Sequence[FailedEpisode], instructions: str, worlds: Sequence[World]) -> list[str]:
        """The model's lessons.

        Raises:
            ValueError: the model answered no line starting with ``- `` (nothing is written).
        """
        user = (f"Current instructions:\n{instructions or '(none)'}\n\nWhat went wrong:\n"
                f"{failure_brief(failures, worlds)}")
        try:
            completion = self.endpoint.client().chat.completions.create(
                model=self.model, messages=[{"role": "system", "content": MODEL_SYSTEM},
                                            {"role": "user", "content": user}], temperature=0)
        except openai.OpenAIError as exc:
            raise ValueError(f"{self.endpoint.where(self.model)} failed ({type(exc).__name__}: {exc}); no new "
                             "version was written. Check --model, --base-url and --api-key-env") from exc
        text = (completion.choices[0].message.content or "") if completion.choices else ""
        lessons = [line.strip()[2:].strip() for line in text.splitlines() if line.strip().startswith("- ")]
        lessons = unique([lesson for lesson in lessons if lesson])[:MAX_LESSONS]
        if not lessons:
            raise ValueError(f"{self.endpoint.where(self.model)} answered no lesson (expected lines starting with "
                             f"'- '), so no new version was written; it said: {text[:300]!r}")
        return lessons


def lesson_key(lesson: str) -> str:
    """What makes two lessons the same: the words, case, spacing and end punctuation aside."""
    return " ".join(lesson.lower().split()).rstrip(".!;: ")


def unique(lessons: Sequence[str]) -> list[str]:
    """``lessons`` without repeats (:func:`lesson_key`), first one kept, in order."""
    seen: set[str] = set()
    out = []
    for lesson in lessons:
        key = lesson_key(lesson)
        if key and key not in seen:
            seen.add(key)
            out.append(lesson.strip())
    return out


def with_lessons(instructions: str, lessons: Sequence[str]) -> str:
    """``instructions`` with ``lessons`` under :data:`HEADING` (existing lessons kept, new ones appended; no
    lesson twice, see :func:`unique`)."""
    body, _, section = instructions.partition(HEADING)
    old = [line.strip()[2:] for line in section.splitlines() if line.strip().startswith("- ")]
    merged = unique([*old, *lessons])
    if not merged:
        return instructions
    text = body.rstrip()
    return (text + "\n\n" if text else "") + HEADING + "\n" + "\n".join(f"- {lesson}" for lesson in merged)
