"""Per-turn rewards from the world's own checks: potential-based shaping (Ng, Harada & Russell 1999).

A profile with ``[shaping] potential = "goal_share"`` (``rl_turns``) pays a reward at every turn. The potential of a
state is the share of the scenario's goal checks that pass on it (read-only SQL, as at the end; a check that errors
counts as not passing), measured relative to the state the episode started from, so that an untouched database is
worth 0:

* a turn that does not end the episode earns ``potential(after) - potential(before)``;
* the final turn earns the profile's end reward less the potential already paid (the terminal state's potential
  is 0).

The terms telescope: an episode's rewards sum to exactly its end reward under the profile's gates and weights, so
the ordering of policies, and the best policy, are those of the end reward; undoing a write gives back what doing it
earned, so undo-and-redo loops earn nothing net; a broken hard rule (the safety gate) makes the end reward 0 and the
episode's sum 0; a not-scored episode's final turn takes back what was paid (its sum is 0, its record's reward
None, as without shaping).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..backends import Database
from ..checks import Check
from ..verdict import run_check


def goal_share(db: Database, goal_checks: tuple[Check, ...]) -> float:
    """The share of ``goal_checks`` that pass on ``db`` (0.0 without goal checks), read-only."""
    if not goal_checks:
        return 0.0
    return sum(run_check(db, c, "goal").passed for c in goal_checks) / len(goal_checks)


class GoalShare:
    """:func:`goal_share` of one scenario's goal checks, run again only when the database may have changed.

    A backend with ``state_mark()`` (SQLite: its copy's change and schema counters; PostgreSQL and the sandbox:
    the server's snapshot) gives a value that is equal to the last one only if nothing a check reads changed;
    while it is, the last share stands (most turns read and write nothing: a lookup, a rejected call). A
    backend without one, or a mark of None, runs the checks every time.
    """

    def __init__(self, goal_checks: tuple[Check, ...]) -> None:
        self.goal_checks = goal_checks
        """The checks whose passing share is the potential."""
        self._last: tuple[Database, object, float] | None = None
        self.evaluated = 0
        """How many times the checks ran (the rest were answered from the last run)."""

    def __call__(self, db: Database) -> float:
        marker = getattr(db, "state_mark", None)
        mark = marker() if marker is not None and self.goal_checks else None
        last = self._last
        if mark is not None and last is not None and last[0] is db and last[1] == mark:
            return last[2]
        share = goal_share(db, self.goal_checks)
        self.evaluated += 1
        self._last = (db, mark, share) if mark is not None else None
        return share


@dataclass(frozen=True)
class Shaped:
    """One turn's shaped reward and the potentials it came from."""

    reward: float
    """What the turn earns."""
    potential: float
    """The potential after the turn, relative to the start (0.0 once the episode ended)."""


def turn_reward(before: float, after: float) -> Shaped:
    """A turn that did not end the episode: the change in potential (both relative to the start)."""
    return Shaped(round(after - before, 9), after)


def final_reward(before: float, end_reward: float | None) -> Shaped:
    """The final turn: the end reward (None: not scored, 0) less the potential already paid."""
    return Shaped(round((end_reward or 0.0) - before, 9), 0.0)
