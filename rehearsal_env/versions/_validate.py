"""Validate one scenario: the five checks that show a job is fair before a version publishes it.

1. The checks fail when nothing is done: the null agent is not verified and breaks no hard rule.
2. The reference solution is verified.
3. Each wrong solution is scored and not verified.
4. A replay gives the same result: the reference's exact actions, after a reset
   with another seed, give the same outcome, check values and database digest.
5. Every needed fact is reachable (:mod:`._reach`).

Every episode runs on the given database (reset by the env at each start), with
the stress layer on as runs have it. :func:`validate_scenario` also returns the
timestamps the reference wrote, for the clock fact (:mod:`._isolation`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..agents import NullAgent, Policy, ScriptedAgent
from ..backends import changes, digest
from ..env import RehearsalEnv, TurnRecord
from ..scenarios import Scenario, ToolCall
from ..verdict import Outcome, Verdict
from ._manifest import Finding, ScenarioValidation
from ._reach import facts_reachable

if TYPE_CHECKING:
    from ..backends import Database
    from ..worlds import World

REPLAY_SEED_OFFSET = 1
"""The replay resets with ``seed + 1``: the outcome must not depend on the seed."""
TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?")


@dataclass(frozen=True)
class Played:
    """One validation episode."""

    verdict: Verdict | None
    """The verdict (None when the episode raised)."""
    trace: tuple[TurnRecord, ...]
    """Every turn."""
    digest: str | None
    """SHA-256 of the database at the end (when asked for)."""
    error: str | None = None
    """What the episode raised, if it did."""


class ReplayAgent:
    """Sends recorded actions in order, then gives up."""

    def __init__(self, actions: Sequence[str]) -> None:
        self._actions = list(actions)

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        if self._actions:
            return self._actions.pop(0)
        return ToolCall("give_up", {"reason": "the replay has no more actions"}).to_action()


def play(env: RehearsalEnv, agent: Policy, seed: int, *, want_digest: bool = False) -> Played:
    """Play one episode to its verdict; an exception becomes :attr:`Played.error`."""
    try:
        observation, info = env.reset(seed=seed)
        while True:
            observation, _, terminated, truncated, info = env.step(agent(observation, info))
            if terminated or truncated:
                break
        trace = tuple(env.episode.trace)
        return Played(info["verdict"], trace, digest(env.db) if want_digest else None)
    except Exception as exc:  # a broken scenario must be reported, not crash the build
        return Played(None, _trace_so_far(env), None, f"{type(exc).__name__}: {exc}")


def _trace_so_far(env: RehearsalEnv) -> tuple[TurnRecord, ...]:
    try:
        return tuple(env.episode.trace)
    except RuntimeError:  # the reset itself failed
        return ()


def describe(p: Played) -> str:
    """The outcome and what decided it, in words."""
    if p.verdict is None:
        return f"the episode raised {p.error}"
    v = p.verdict
    if v.outcome is Outcome.NOT_SCORED:
        return f"not scored ({v.reason})"
    failed = [c for c in v.checks if not c.passed]
    text = f"{v.outcome.value} in {v.metrics.turns} turn(s), ending {v.ending.value}"
    if failed:
        text += "; failed: " + "; ".join(
            f"{'hard rule' if c.kind == 'hard_rule' else 'goal check'} {c.name!r} wanted {c.op} {c.want!r}, "
            f"held {c.held!r}" for c in failed)
    rejected = [t for t in p.trace if t.status == "rejected"]
    if rejected:
        text += "; rejected: " + "; ".join(f"turn {t.turn} {t.tool or '?'}" for t in rejected[:3])
    return text


def _outcome(p: Played) -> Outcome | None:
    return p.verdict.outcome if p.verdict else None


def null_fails(null: Played) -> Finding:
    if _outcome(null) in (Outcome.NOT_ACHIEVED,):
        return Finding(True, f"null agent: {describe(null)}")
    return Finding(False, f"null agent: {describe(null)}")


def reference_passes(ref: Played) -> Finding:
    return Finding(_outcome(ref) is Outcome.VERIFIED, f"reference: {describe(ref)}")


def wrong_fail(scenario: Scenario, wrong: dict[str, Played]) -> Finding:
    if not wrong:
        return Finding(True, "the scenario has no wrong solutions")
    caught = [_outcome(p) in (Outcome.NOT_ACHIEVED, Outcome.RULE_VIOLATED) for p in wrong.values()]
    parts = [f"{name}: {describe(p)}" for name, p in wrong.items()]
    if all(caught):
        return Finding(True, "; ".join(f"{n} -> {p.verdict.outcome.value}" for n, p in wrong.items()
                                       if p.verdict))
    return Finding(False, "; ".join(part for part, ok in zip(parts, caught, strict=True) if not ok))


def _check_values(p: Played) -> list[tuple[str, Any, bool]]:
    return [(c.name, c.held, c.passed) for c in p.verdict.checks] if p.verdict else []


def replay_same(ref: Played, again: Played, seed: int) -> Finding:
    if ref.verdict is None or again.verdict is None:
        return Finding(False, f"could not replay: {ref.error or again.error}")
    diffs = []
    if again.verdict.outcome is not ref.verdict.outcome:
        diffs.append(f"outcome {ref.verdict.outcome.value} then {again.verdict.outcome.value}")
    if _check_values(again) != _check_values(ref):
        diffs.append("check values differ: "
                     + "; ".join(f"{a[0]!r} held {a[1]!r} then {b[1]!r}"
                                 for a, b in zip(_check_values(ref), _check_values(again), strict=False)
                                 if a != b))
    if again.digest != ref.digest:
        diffs.append(f"database digest {str(ref.digest)[:12]} then {str(again.digest)[:12]}")
    if diffs:
        return Finding(False, f"the same {len(ref.trace)} actions after a reset with seed {seed}: "
                       + "; ".join(diffs))
    return Finding(True, f"the same {len(ref.trace)} actions after a reset with seed {seed}: "
                   f"{again.verdict.outcome.value}, same check values, digest {str(ref.digest)[:12]}")


def written_timestamps(world: World, db: Database) -> set[str]:
    """Every timestamp-like text written since the reset (in new rows, and changed values of updated rows)."""
    seed = world.seed_rows()
    out: set[str] = set()
    for name, table in changes(db, dict(seed)).items():
        before = {row[0]: row for row in seed.get(name, ())}
        for row in table["inserted"]:
            out.update(v for v in row if isinstance(v, str) and TIMESTAMP.match(v))
        for row in table["updated"]:
            old = before.get(row[0], ())
            out.update(v for i, v in enumerate(row)
                       if isinstance(v, str) and TIMESTAMP.match(v) and (i >= len(old) or old[i] != v))
    return out


def validate_scenario(world: World, scenario: Scenario, db: Database, *, seed: int = 0,
                      stress: bool = True) -> tuple[ScenarioValidation, set[str]]:
    """The five findings for ``scenario`` (module docstring) and the timestamps the reference wrote."""
    env = RehearsalEnv(scenario, world, database=db, stress=stress)
    ref = play(env, ScriptedAgent(scenario.reference), seed, want_digest=True)
    stamps = written_timestamps(world, db) if ref.verdict is not None else set()
    null = play(env, NullAgent(), seed)
    wrong = {w.name: play(env, ScriptedAgent(w), seed) for w in scenario.wrong}
    again = play(env, ReplayAgent([t.action for t in ref.trace]), seed + REPLAY_SEED_OFFSET, want_digest=True)
    validation = ScenarioValidation(
        scenario=scenario.id, split=scenario.split, category=scenario.category,
        null_fails=null_fails(null),
        reference_passes=reference_passes(ref),
        wrong_fail=wrong_fail(scenario, wrong),
        replay_same=replay_same(ref, again, seed + REPLAY_SEED_OFFSET),
        facts_reachable=facts_reachable(world, scenario, ref.trace),
        end_digest=ref.digest,
    )
    return validation, stamps
