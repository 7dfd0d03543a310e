"""A runner killed mid-episode goes on from the episode's last turn, with no effect sent twice (issue 23).

The runner checkpoints every in-flight episode after every turn (``RunConfig.checkpoints``). Here the
serial driver (a subprocess, SIGKILLed from within by ``os._exit``) and a Ray worker die at random turns:
before a turn (the agent has answered, the answer is not yet saved) and inside a write whose outside
request was already recorded (the outcome unknown to everyone). After ``--resume`` (serial) or the pool's
retry (Ray), the records equal an uninterrupted run's, no record has a duplicate effect, and the killed
episode's agent was asked no more than once per turn (it went on from its checkpoint, not from scratch).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from ray import cloudpickle

from rehearsal_env.agents import Policy, make_agent
from rehearsal_env.records import EpisodeRecord, read_records
from rehearsal_env.runner import RunConfig, run, run_on_ray
from rehearsal_env.scenarios import Scenario

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Ray workers cannot import this test module

SCENARIOS = ("refund-item-0001", "cancel-order-0005", "refund-item-0004", "change-address-0002")
WRITES = ("refund-item-0001", "refund-item-0004", "cancel-order-0005")
"""Scenarios whose writes reach an outside service (payments or email)."""


def comparable(records: list[EpisodeRecord]) -> list[dict[str, Any]]:
    out = []
    for r in records:
        row = dataclasses.asdict(r)
        row["provenance"].pop("build")
        for turn in row["trace"]:
            turn.pop("latency_ms")
        out.append(row)
    return out


@dataclass
class Killer:
    """An agent factory: the reference agent, every call counted in ``calls``; once (``marker``), the
    process dies at ``turn`` of ``scenario``: before the turn (``before``) or inside its write, right after
    the outside service recorded the request (``write``)."""

    calls: Path
    marker: Path
    scenario: str
    turn: int
    mode: str

    def __call__(self, scenario: Scenario) -> Policy:
        from rehearsal_env import services
        from rehearsal_env.runner import _checkpoints

        killer = self
        if not getattr(services.OutsideService, "_killer", False):
            request = services.OutsideService.request
            answer = _checkpoints.EpisodeCheckpoints.answer

            def dying_request(service: Any, *args: Any, **kw: Any) -> Any:
                out = request(service, *args, **kw)
                if killer.mode == "write" and _armed(killer, "write"):
                    os._exit(9)  # the request is recorded; the transaction and the step never finish
                return out

            def dying_answer(files: Any, turn: int, given: Any) -> None:
                if killer.mode == "before" and files.path.name.startswith(killer.scenario + ".") \
                        and turn == killer.turn and _armed(killer, "before"):
                    os._exit(9)  # the agent answered; the answer is not saved, the turn not taken
                answer(files, turn, given)

            services.OutsideService.request = dying_request  # type: ignore[method-assign,assignment]
            services.OutsideService._killer = True  # type: ignore[attr-defined]
            _checkpoints.EpisodeCheckpoints.answer = dying_answer  # type: ignore[method-assign,assignment]
        agent = make_agent("reference", scenario)
        return Counted(agent, scenario.id, self.calls, self.scenario)


@dataclass
class Counted:
    """A policy that appends one line per call to ``calls`` (and arms the write kill in its scenario)."""

    agent: Any
    scenario: str
    calls: Path
    target: str

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        with open(self.calls, "a") as fh:
            fh.write(self.scenario + "\n")
        os.environ["REHEARSAL_TEST_SCENARIO"] = self.scenario
        return str(self.agent(observation, info))


def _armed(killer: Killer, mode: str) -> bool:
    """Whether to die now (once per marker), in the killer's scenario."""
    if os.environ.get("REHEARSAL_TEST_SCENARIO") != killer.scenario or killer.marker.exists():
        return False
    killer.marker.write_text(mode)
    return True


def _config(out: Path) -> RunConfig:
    return RunConfig(world="shop", scenarios=SCENARIOS, run_id="run_midway", batch_size=2,
                     checkpoints=str(out / "checkpoints"))


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    out = tmp_path_factory.mktemp("whole")
    run(_config(out), out)
    assert not (out / "checkpoints").exists()
    return comparable(read_records(out))


DRIVER = """
import pickle, sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from rehearsal_env.runner import run
config, factory, resume = pickle.loads(Path({job!r}).read_bytes())
run(config, Path(config.checkpoints).parent, agent_factory=factory, resume=resume)
"""


def _drive(tmp: Path, config: RunConfig, factory: Killer, *, resume: bool) -> int:
    job = tmp / "job.pickle"
    job.write_bytes(cloudpickle.dumps((config, factory, resume)))
    script = DRIVER.format(tests=str(Path(__file__).parent), job=str(job))
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600).returncode


def _turns_of(records: list[dict[str, Any]], scenario: str) -> int:
    return next(int(r["turns"]) for r in records if r["scenario"] == scenario)


@pytest.mark.parametrize("mode", ["before", "write"])
def test_a_killed_serial_driver_resumes_mid_episode_with_identical_records(
        mode: str, tmp_path: Path, uninterrupted: list[dict[str, Any]]) -> None:
    rng = random.Random(mode)
    scenario = rng.choice(WRITES if mode == "write" else SCENARIOS)
    turn = rng.randrange(2, _turns_of(uninterrupted, scenario) + 1)
    out = tmp_path / "run"
    killer = Killer(tmp_path / "calls", tmp_path / "marker", scenario, turn, mode)
    config = _config(out)
    assert _drive(tmp_path, config, killer, resume=False) == 9, "the driver was to die mid-episode"
    assert (tmp_path / "marker").read_text() == mode
    assert any((out / "checkpoints").glob(f"{scenario}.*.log"))
    assert _drive(tmp_path, config, killer, resume=True) == 0
    got = comparable(read_records(out))
    assert got == uninterrupted
    assert all(r["duplicate_effects"] == 0 for r in got)
    calls = (tmp_path / "calls").read_text().splitlines().count(scenario)
    extra = 1 if mode == "before" else 0  # the answer lost with the process is asked again; a saved one is not
    assert calls == _turns_of(uninterrupted, scenario) + extra, "the episode went on from its checkpoint"
    assert not (out / "checkpoints").exists()


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    yield
    ray.shutdown()


def test_a_killed_ray_worker_mid_write_is_continued_by_its_replacement(
        tmp_path: Path, local_ray: None, uninterrupted: list[dict[str, Any]]) -> None:
    out = tmp_path / "run"
    killer = Killer(tmp_path / "calls", tmp_path / "marker", "refund-item-0004", 0, "write")
    run_on_ray(_config(out), out, workers=1, agent_factory=killer, recovery_s=2.0)
    assert (tmp_path / "marker").read_text() == "write"
    got = comparable(read_records(out))
    assert got == uninterrupted
    assert all(r["duplicate_effects"] == 0 and r["not_scored_cause"] is None for r in got)
    calls = (tmp_path / "calls").read_text().splitlines().count("refund-item-0004")
    assert calls == _turns_of(uninterrupted, "refund-item-0004")
    print(json.dumps({"killed": "refund-item-0004", "agent_calls": calls}))


def test_a_log_whose_turns_do_not_replay_is_played_again_from_the_start(tmp_path: Path) -> None:
    """A chain of turn records that a restore refuses (here: a validly chained record whose observation digest is
    not what the turn gives, as a world that is not deterministic would make) never stops the run: the episode is
    played again from its reset."""
    import pickle

    from rehearsal_env.backends import open_database
    from rehearsal_env.env import CheckpointChain
    from rehearsal_env.env._checkpoint import DELTA_MAGIC, delta_record, read_header
    from rehearsal_env.runner import EpisodeSpec, resolve
    from rehearsal_env.runner._checkpoints import EpisodeCheckpoints, play_resumable

    run_ = resolve(RunConfig(world="shop", agent="reference", scenarios=("refund-item-0001",), stress=False))
    spec = EpisodeSpec("refund-item-0001", 0, 0)
    env = run_.env(open_database(run_.world), spec.scenario)
    agent = run_.agent(env.scenario)
    observation, info = env.reset(seed=0)
    chain = CheckpointChain(env, replay=True)
    _, full = chain.take()
    observation, _, _, _, info = env.step(agent(observation, info))
    _, record = chain.take()
    body = json.loads(record[len(DELTA_MAGIC) + 4:-32])
    body["observation"] = "0" * len(body["observation"])
    forged, _ = delta_record(bytes.fromhex(read_header(full)["digest"]), json.dumps(body).encode())
    files = EpisodeCheckpoints(tmp_path, spec)
    files._append(b"S", pickle.dumps({"env": full + forged, "agent": cloudpickle.dumps(agent),
                                       "observation": observation, "info": {k: v for k, v in info.items()}}))
    files.close()
    done = play_resumable(run_, run_.env(open_database(run_.world), spec.scenario), spec, tmp_path)
    assert done.outcome == "verified" and len(done.trace) == len(env.scenario.reference.calls)
    env.close()
