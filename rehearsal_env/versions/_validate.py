"""Validate one scenario: the five checks that show a job is fair before a version publishes it.

1. The checks fail when nothing is done: the null agent is not verified and breaks no hard rule.
2. The reference solution is verified.
3. Each wrong solution is scored and not verified.
4. A replay gives the same result: the reference's exact actions, after a reset
   with another seed, give the same outcome, check values and database digest.
5. Every needed fact is reachable (:mod:`._reach`).

Every episode runs on the given database (reset by the env at each start), with
the stress layer on as runs have it; an episode that raises aborts the build
(:class:`~._play.BuildAborted`): that is a broken environment, not an unfair job.
:func:`validate_scenario` also returns the timestamps the reference wrote, for
the clock fact (:mod:`._isolation`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..agents import NullAgent, ScriptedAgent
from ..backends import Database, changes
from ..env import RehearsalEnv
from ..scenarios import Scenario
from ..verdict import Outcome
from ..worlds import World
from ._manifest import Finding, ScenarioValidation
from ._play import ReplayAgent, ValidationEpisode, describe, play_validation
from ._reach import facts_reachable

REPLAY_SEED_OFFSET = 1
"""The replay resets with ``seed + 1``: the outcome must not depend on the seed."""
TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?")


def null_fails(null: ValidationEpisode) -> Finding:
    if null.outcome is Outcome.NOT_ACHIEVED:
        return Finding(True, f"the null agent: {describe(null)}")
    return Finding(False, f"the null agent: {describe(null)}")


def reference_passes(ref: ValidationEpisode) -> Finding:
    return Finding(ref.outcome is Outcome.VERIFIED, describe(ref))


def wrong_fail(scenario: Scenario, wrong: dict[str, ValidationEpisode]) -> Finding:
    if not wrong:
        return Finding(True, "the scenario has no wrong solutions")
    caught = [p.outcome in (Outcome.NOT_ACHIEVED, Outcome.RULE_VIOLATED) for p in wrong.values()]
    parts = [f"{name}: {describe(p)}" for name, p in wrong.items()]
    if all(caught):
        return Finding(True, "; ".join(f"{n} -> {p.outcome.value}" for n, p in wrong.items()))
    return Finding(False, "; ".join(part for part, ok in zip(parts, caught, strict=True) if not ok))


def _check_values(p: ValidationEpisode) -> list[tuple[str, Any, bool]]:
    return [(c.name, c.held, c.passed) for c in p.verdict.checks]


def replay_same(ref: ValidationEpisode, again: ValidationEpisode, seed: int) -> Finding:
    """Same actions, same verdict and state? A failure names what differed, never the (random) values."""
    diffs = []
    if again.outcome is not ref.outcome:
        diffs.append(f"outcome {ref.outcome.value} then {again.outcome.value}")
    differing = [a[0] for a, b in zip(_check_values(ref), _check_values(again), strict=False) if a != b]
    if differing:
        diffs.append("the value of check(s) " + ", ".join(repr(n) for n in differing) + " differed")
    if again.digest != ref.digest:
        diffs.append("the database ended in a different state (digest differs)")
    if diffs:
        return Finding(False, f"the same {len(ref.trace)} actions after a reset with seed {seed}: "
                       + "; ".join(diffs))
    return Finding(True, f"the same {len(ref.trace)} actions after a reset with seed {seed}: "
                   f"{again.outcome.value}, same check values, digest {str(ref.digest)[:12]}")


_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def data_dates(seed: Mapping[str, Any]) -> set[str]:
    """Every date (YYYY-MM-DD) the world's own data holds, in any text value (JSON text included): a flight's
    date, a booking's day. A reference that writes one of them copies the data; it is not the clock."""
    return {d for rows in seed.values() for row in rows for v in row if isinstance(v, str) for d in _DATE.findall(v)}


def written_timestamps(world: World, db: Database) -> set[str]:
    """Every timestamp-like text written since the reset (in new rows, and changed values of updated rows),
    less the bare dates the world's own data holds (:func:`data_dates`: a future flight date copied from the
    data is not a clock reading)."""
    seed = world.seed_rows()
    own = data_dates(seed)
    out: set[str] = set()
    for name, table in changes(db, dict(seed)).items():
        before = {row[0]: row for row in seed.get(name, ())}
        for row in table["inserted"]:
            out.update(v for v in row if isinstance(v, str) and TIMESTAMP.match(v))
        for row in table["updated"]:
            old = before.get(row[0], ())
            out.update(v for i, v in enumerate(row)
                       if isinstance(v, str) and TIMESTAMP.match(v) and (i >= len(old) or old[i] != v))
    return {v for v in out if not (len(v) == 10 and v in own)}


def validate_scenario(world: World, scenario: Scenario, db: Database, *, seed: int = 0,
                      stress: bool = True) -> tuple[ScenarioValidation, set[str]]:
    """The five findings for ``scenario`` (module docstring) and the timestamps the reference wrote."""
    env = RehearsalEnv(scenario, world, database=db, stress=stress)
    ref = play_validation(env, ScriptedAgent(scenario.reference), seed, "reference", want_digest=True)
    stamps = written_timestamps(world, db)
    null = play_validation(env, NullAgent(), seed, "null agent")
    wrong = {w.name: play_validation(env, ScriptedAgent(w), seed, w.name) for w in scenario.wrong}
    again = play_validation(env, ReplayAgent([t.action for t in ref.trace]), seed + REPLAY_SEED_OFFSET, "replay",
                 want_digest=True)
    replay = replay_same(ref, again, seed + REPLAY_SEED_OFFSET)
    validation = ScenarioValidation(
        scenario=scenario.id, split=scenario.split, category=scenario.category,
        null_fails=null_fails(null),
        reference_passes=reference_passes(ref),
        wrong_fail=wrong_fail(scenario, wrong),
        replay_same=replay,
        facts_reachable=facts_reachable(world, scenario, ref.trace),
        end_digest=ref.digest if replay.passed else None,  # no single end state to publish otherwise
    )
    return validation, stamps
