"""Records reach disk as episodes end when episodes are slow (``runner._flush``): a stopped run is measured as far
as it went, and ``--resume`` plays only what no part holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from rehearsal_env.agents import ScriptedAgent
from rehearsal_env.records import EPISODES_DIR, read_records
from rehearsal_env.runner import RunConfig, load_config, run
from rehearsal_env.scenarios import Scenario
from rehearsal_env.worlds import load_world

SCENARIOS = ("refund-item-0001", "cancel-order-0001", "order-count-question-0001")


class Stop(KeyboardInterrupt):
    """The user pressed Ctrl-C."""


class StopAt:
    """The reference agent, stopping the whole run when an episode of ``victim`` starts."""

    def __init__(self, victim: str | None) -> None:
        self.victim = victim

    def __call__(self, scenario: Scenario) -> Any:
        if scenario.id == self.victim:
            raise Stop()
        return ScriptedAgent(scenario.solution("reference"))


def _config() -> RunConfig:
    return RunConfig(world="shop", agent="reference", scenarios=SCENARIOS, batch_size=32)


def test_a_stopped_run_has_the_episodes_that_ended_on_disk_and_resume_plays_the_rest(tmp_path: Path) -> None:
    order = [s.id for s in load_world("shop").scenarios() if s.id in SCENARIOS]
    with pytest.raises(Stop):
        run(_config(), tmp_path, agent_factory=StopAt(order[2]), flush_s=0.0)
    parts = sorted((tmp_path / EPISODES_DIR).glob("part-*.parquet"))
    assert len(parts) == 2  # one batch of 32, stopped at its third episode: the first two are written
    assert sorted(r.scenario for r in read_records(tmp_path)) == sorted(order[:2])  # sealed: measurable

    summary = run(load_config(tmp_path), tmp_path, agent_factory=StopAt(None), resume=True, flush_s=0.0)
    records = read_records(tmp_path)
    assert sorted(r.scenario for r in records) == sorted(SCENARIOS) and summary["episodes"] == 3
    assert summary["verified"] == 3


def test_a_fast_batch_is_still_one_part_in_plan_order(tmp_path: Path) -> None:
    run(_config(), tmp_path)  # the default bound (30 s) is far off
    (part,) = (tmp_path / EPISODES_DIR).glob("part-*.parquet")
    order = [s.id for s in load_world("shop").scenarios() if s.id in SCENARIOS]
    assert pq.read_table(part, columns=["scenario"]).column("scenario").to_pylist() == order
