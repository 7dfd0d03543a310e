"""Retried episodes: which attempt of a planned episode counts, in the headline and in the bounds.

A planned episode (one scenario, one repeat, one seed) that is not scored because a part other than the agent and
the world failed is played again by the runner, a bounded number of times (``RunConfig.retries``); every attempt is
its own record (``attempt``: 1 for the first retry, null or 0 for the episode as planned; ``retry_of`` names the
attempt it retries; ``retry_replayed`` says whether it played that attempt exactly, action for action and
observation for observation, up to where that one failed). ``measure.py``, compare and readiness read the attempts
of one episode by one rule (:func:`settle`):

- **The headline** counts the first scored attempt (:data:`SETTLED` or :data:`OPEN`); an episode none of whose
  attempts was scored is :data:`NOT_SCORED`, once (its last attempt's cause).
- **The bounds** (each not-scored episode counted as the worst and as the best outcome for the agent) take the
  scored attempt in its episode's place only when every retry up to it replayed the attempt it retried
  (:data:`SETTLED`). Then the failure left the episode in a state the retry reached again and went on from, so
  whoever failed it chose nothing but that the rest was played once more: a model endpoint that fails the episodes
  it is losing meets the same losing state on the retry. A retry that went another way before that point is a new
  draw of the whole episode; a provider that fails what it is losing and is retried until it wins would gain by it,
  so the episode stays :data:`OPEN`: counted at both extremes like a not-scored one.

So a retry never removes the attempt it retries from the accounting: at worst it leaves the bounds as they were.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")
SETTLED = "settled"
"""Scored, and it stands for its episode in the bounds too (the episode as planned, or replaying retries)."""
OPEN = "open"
"""Scored by a retry that did not replay the attempt it retried: the headline counts it, the bounds fill it."""
NOT_SCORED = "not scored"
"""No attempt of the episode was scored (within the retries)."""
SLOT_FIELDS = ("run_id", "agent", "agent_version", "key_id", "scenario", "repeat")
"""What names one planned episode (the fields a record may lack read as None)."""


@dataclass(frozen=True)
class Settled(Generic[T]):
    """One planned episode, its attempts read by the rule."""

    record: T
    """The attempt that counts in the headline: the first scored one, else the last attempt."""
    status: str
    """:data:`SETTLED`, :data:`OPEN` or :data:`NOT_SCORED`."""
    attempts: int
    """How many attempts the episode had (1: never retried)."""
    superseded: tuple[T, ...] = ()
    """The attempts that do not count (not scored before the one that counts, or after it)."""


def _number(value: Any) -> int:
    """An attempt number (null, in records without retries, is 0: the episode as planned)."""
    return int(value) if value is not None else 0


def settle(items: Iterable[T], get: Callable[[T, str], Any]) -> list[Settled[T]]:
    """Each planned episode among ``items`` (records, or rows read as dicts; ``get(item, field)`` reads a field,
    None when absent) with its status, in the order the episodes first appear.

    Raises:
        ValueError: two records of one episode have the same attempt number (two runs mixed).
    """
    slots: dict[tuple[Any, ...], list[T]] = {}
    for item in items:
        slots.setdefault(tuple(get(item, f) for f in SLOT_FIELDS), []).append(item)
    out = []
    for key, attempts in slots.items():
        numbered = sorted(((_number(get(r, "attempt")), n, r) for n, r in enumerate(attempts)), key=lambda x: x[:2])
        attempts = [r for _, _, r in numbered]
        numbers = [k for k, _, _ in numbered]
        if len(set(numbers)) != len(numbers):
            raise ValueError(f"episode {key[-2]}#{key[-1]}: expected each attempt once; found attempts {numbers} "
                             "(two runs' records mixed?); measure each run from its own directory")
        first = next((n for n, r in enumerate(attempts) if get(r, "outcome") != "not_scored"), None)
        if first is None:
            out.append(Settled(attempts[-1], NOT_SCORED, len(attempts), tuple(attempts[:-1])))
            continue
        replayed = all(bool(get(r, "retry_replayed")) for r in attempts[1:first + 1])
        out.append(Settled(attempts[first], SETTLED if replayed else OPEN, len(attempts),
                           tuple(attempts[:first] + attempts[first + 1:])))
    return out


def row_field(row: Any, name: str) -> Any:
    """``get`` for rows read as dicts (a missing column reads as None)."""
    return row.get(name)


def record_field(record: Any, name: str) -> Any:
    """``get`` for record objects (a field the record lacks reads as None)."""
    return getattr(record, name, None)
