"""The running-totals summary a served run keeps gives what the summary over every record gives."""

from __future__ import annotations

import random

import pytest

from rehearsal_env.runner import SummaryRow, SummaryTally, summary_of


def _row(rng: random.Random) -> SummaryRow:
    outcome = rng.choice(["verified", "not_achieved", "rule_violated", "not_scored"])
    scored = outcome != "not_scored"
    model = rng.random() < 0.5
    return SummaryRow(
        outcome=outcome, reward=rng.uniform(-1, 1) if scored and rng.random() < 0.9 else None,
        outcome_reward=rng.choice([1.0, 0.0, -1.0]) if scored else None, false_completion=rng.random() < 0.2,
        duplicate_effects=rng.randrange(3), recovered=rng.random() < 0.3, unnecessary_interruptions=rng.randrange(2),
        rejected_attempts=rng.randrange(4), faults_injected=rng.randrange(2),
        not_scored_cause=None if scored else rng.choice([None, "world", "database", "provider"]),
        tokens=rng.randrange(1000) if model and rng.random() < 0.8 else None,
        model_calls=rng.randrange(5) if model else None, model_latency_ms=rng.uniform(0, 900) if model else None,
        tool_crashes=[{"tool": rng.choice(["a", "b"])}] * rng.randrange(3) if rng.random() < 0.3 else None,
        world_tool_calls=rng.randrange(3) if rng.random() < 0.9 else None)


@pytest.mark.parametrize("seed", range(20))
def test_the_tally_added_part_by_part_equals_the_summary_of_every_record(seed: int) -> None:
    rng = random.Random(seed)
    rows = [_row(rng) for _ in range(rng.randrange(0, 60))]
    tally = SummaryTally()
    start = 0
    while start < len(rows):
        end = start + rng.randrange(1, 9)
        tally.add(rows[start:end])
        start = end
    assert tally.summary() == summary_of(rows)


def test_an_empty_tally_is_the_summary_of_no_records() -> None:
    assert SummaryTally().summary() == summary_of([])


def test_episodes_that_never_called_a_world_tool_are_said_so() -> None:
    rows = [_row(random.Random(1))._replace(world_tool_calls=0) for _ in range(3)]
    tally = SummaryTally()
    tally.add(rows)
    assert tally.summary()["no_world_tool_calls"] is True and summary_of(rows)["no_world_tool_calls"] is True
