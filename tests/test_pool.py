"""The Ray env pool on a real 2-node local Ray cluster (``ray start --head`` plus ``ray start --address``).

Skips unless the ``ray`` command is there, unless REHEARSAL_REQUIRE_RAY_CLUSTER=1 (then a failure). The
cluster is started by this module and stopped by killing its own processes (never ``ray stop``, which
would stop every Ray on the machine). The pool plays every shop scenario with the verdicts of the serial
runner; then one node is killed while episodes are mid-way and none is lost.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from rehearsal_env.agents import make_agent
from rehearsal_env.pool import EnvPool, PoolFull, SessionLost
from rehearsal_env.records import EpisodeRecord, read_records
from rehearsal_env.runner import EpisodeSpec, RunConfig, plan, run, world_for

RAY = Path(sys.executable).with_name("ray")
HEALTH = {"RAY_health_check_initial_delay_ms": "1000", "RAY_health_check_period_ms": "1000",
          "RAY_health_check_timeout_ms": "2000", "RAY_health_check_failure_threshold": "5", "RAY_AUTH_MODE": "disabled"}
"""A dead node is noticed within seconds (Ray's defaults take ~30 s); no token authentication on loopback, the
mode conftest.py sets for every Ray of the suite (a token left in ~/.ray would otherwise turn it on for
`ray start` alone)."""


def _skip_or_fail(why: str) -> None:
    if os.environ.get("REHEARSAL_REQUIRE_RAY_CLUSTER") == "1":
        pytest.fail(f"REHEARSAL_REQUIRE_RAY_CLUSTER=1 but {why}")
    pytest.skip(why)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """``ray start ... --block`` in its own process group (killed as a group, like a machine going away)."""
    with log.open("wb") as out:
        return subprocess.Popen([str(RAY), "start", *args, "--block", "--disable-usage-stats"], env=env,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


class Cluster:
    """A head node and a second node on 127.0.0.1, each with its own CPUs."""

    def __init__(self) -> None:
        self.temp = Path(tempfile.mkdtemp(prefix="rp", dir="/tmp"))  # short: Ray's socket paths are bounded
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        env = {**os.environ, **HEALTH}
        self.head = _start(["--head", "--node-ip-address=127.0.0.1", f"--port={self.port}", "--num-cpus=1",
                            f"--temp-dir={self.temp}", "--include-dashboard=false"], env, self.temp / "head.log")
        self.second: subprocess.Popen[bytes] | None = None
        self._wait_for_port()
        self.second = _start([f"--address={self.address}", "--node-ip-address=127.0.0.1", "--num-cpus=1"], env,
                             self.temp / "second.log")

    def _wait_for_port(self) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.head.poll() is not None:
                raise RuntimeError(f"ray start --head exited: {(self.temp / 'head.log').read_text()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.3)
        raise RuntimeError("the Ray head did not listen within 60 s")

    def kill_second(self, workers: Sequence[int] = ()) -> None:
        """The second node goes away: its raylet, object store and agents (its process group) and its
        ``workers`` (Ray starts worker processes in sessions of their own), all at once."""
        for pid in workers:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.second is not None:
            _kill(self.second)
            self.second = None

    def stop(self) -> None:
        self.kill_second()
        _kill(self.head)
        shutil.rmtree(self.temp, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    if not RAY.is_file():
        _skip_or_fail(f"no `ray` command beside {sys.executable} (pip install 'rehearsal-env[ray]')")
    import ray

    c = Cluster()
    try:
        ray.init(address=c.address, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
        deadline = time.monotonic() + 60
        while sum(1 for n in ray.nodes() if n["Alive"]) < 2:
            assert time.monotonic() < deadline, "the second Ray node did not join within 60 s"
            time.sleep(0.3)
        yield c
    finally:
        ray.shutdown()
        c.stop()


CONFIG = RunConfig(world="shop", run_id="run_pool_test")


@pytest.fixture(scope="module")
def serial(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, int], EpisodeRecord]:
    out = tmp_path_factory.mktemp("serial")
    run(CONFIG, out)
    return {(r.scenario, r.repeat): r for r in read_records(out)}


async def _episode(pool: EnvPool, spec: EpisodeSpec, index: int, refusals: list[str],
                   gate: asyncio.Event | None = None, reached: list[str] | None = None) -> str:
    """The reference agent plays one episode through the pool as one of four callers, retrying when refused
    (waiting at ``gate`` after its first step)."""
    scenario = pool.run.world.scenario(spec.scenario)
    agent = make_agent("reference", scenario)
    while True:
        try:
            opened = await pool.reset(spec.scenario, caller=f"learner-{index % 4}")
            break
        except PoolFull as full:
            refusals.append(str(full))
            assert full.retry_after_s > 0 and full.caller == f"learner-{index % 4}"
            await asyncio.sleep(full.retry_after_s)
    observation, info = opened.observation, opened.info
    steps, continued = 0, False
    while True:
        try:
            result = await pool.step(opened.session, agent(observation, info))
        except SessionLost:
            return "lost"
        steps += 1
        continued = continued or result.continued
        if result.terminated or result.truncated:
            return "continued" if continued else "ended"
        if steps == 1 and gate is not None and reached is not None:
            reached.append(opened.session)
            await gate.wait()
        observation, info = result.observation, result.info


def _same_verdicts(records: list[EpisodeRecord], serial: dict[tuple[str, int], EpisodeRecord]) -> None:
    assert sorted((r.scenario, r.repeat) for r in records) == sorted(serial)
    for r in records:
        want = serial[(r.scenario, r.repeat)]
        got: tuple[Any, ...] = (r.outcome, r.ending, r.reward, r.seed, [c.passed for c in r.checks],
                                len(r.trace), r.world_version)
        assert got == (want.outcome, want.ending, want.reward, want.seed, [c.passed for c in want.checks],
                       len(want.trace), want.world_version), r.scenario


def test_pool_plays_every_scenario_as_the_serial_runner(cluster: Cluster, tmp_path: Path,
                                                        serial: dict[tuple[str, int], EpisodeRecord]) -> None:
    specs = plan(CONFIG, world_for(CONFIG))
    pool = EnvPool(CONFIG, tmp_path, actors=2, sessions_per_actor=16, max_sessions_per_caller=6)
    refusals: list[str] = []
    try:
        assert len({node for node, _ in pool.where}) == 2, "SPREAD puts one actor on each node"

        async def play() -> list[str]:
            return list(await asyncio.gather(*(_episode(pool, s, i, refusals) for i, s in enumerate(specs))))

        ends = asyncio.run(play())
        assert ends.count("ended") == len(specs)
        assert pool.open_sessions == 0
    finally:
        summary = pool.finish()
    # 90 episodes at once against 32 slots, 6 per caller: refused at once (typed), played after retrying
    assert any("its share is 6" in r for r in refusals)
    assert summary["episodes"] == len(specs)
    _same_verdicts(read_records(tmp_path), serial)  # a sealed, ordinary run directory


def test_the_pool_refuses_past_its_capacity_and_past_a_callers_share(cluster: Cluster, tmp_path: Path) -> None:
    pool = EnvPool(CONFIG, tmp_path, actors=1, sessions_per_actor=2, max_sessions_per_caller=1)
    scenario = plan(CONFIG, world_for(CONFIG))[0].scenario

    async def play() -> None:
        first = await pool.reset(scenario, caller="a")
        with pytest.raises(PoolFull, match="its share is 1") as share:
            await pool.reset(scenario, caller="a")
        assert share.value.caller == "a" and share.value.retry_after_s > 0
        await pool.reset(scenario, caller="b")
        with pytest.raises(PoolFull, match="the pool holds 2 of 2 sessions") as full:
            await pool.reset(scenario, caller="c")
        assert full.value.caller == "c" and pool.open_sessions == 2  # a refusal starts nothing
        await pool.close(first.session)  # a closed session frees its place
        await pool.reset(scenario, caller="c")

    try:
        asyncio.run(play())
    finally:
        summary = pool.finish()
    assert summary["episodes"] == 3  # every opened episode is recorded (closed ones as given up)
    assert {r.ending for r in read_records(tmp_path)} == {"gave_up"}


def test_a_session_with_no_live_actor_left_is_lost_recorded_and_reported(cluster: Cluster, tmp_path: Path) -> None:
    pool = EnvPool(CONFIG, tmp_path, actors=1, sessions_per_actor=4)
    scenario = plan(CONFIG, world_for(CONFIG))[0].scenario

    async def play() -> SessionLost:
        opened = await pool.reset(scenario, caller="a")
        (_, pid), = pool.where
        os.kill(pid, signal.SIGKILL)  # the only actor dies: nowhere to continue the episode
        with pytest.raises(SessionLost) as lost:
            await pool.step(opened.session, '{"tool": "give_up", "args": {"reason": "r"}}')
        assert pool.lost == [opened.session] and pool.open_sessions == 0
        return lost.value

    try:
        lost = asyncio.run(play())
    finally:
        summary = pool.finish()
    assert "recorded not scored (cause worker)" in str(lost)
    (record,) = read_records(tmp_path)
    assert summary["episodes"] == 1 and record.outcome == "not_scored" and record.not_scored_cause == "worker"
    assert (record.scenario, record.reason) == (lost.record.scenario, lost.record.reason)


def test_a_killed_node_loses_no_episode(cluster: Cluster, tmp_path: Path,
                                        serial: dict[tuple[str, int], EpisodeRecord]) -> None:
    import ray

    specs = plan(CONFIG, world_for(CONFIG))
    pool = EnvPool(CONFIG, tmp_path, actors=2, sessions_per_actor=len(specs))
    try:
        gate = asyncio.Event()
        reached: list[str] = []
        refusals: list[str] = []

        async def play() -> list[str]:
            tasks = [asyncio.create_task(_episode(pool, s, i, refusals, gate, reached)) for i, s in enumerate(specs)]
            while len(reached) < len(specs):
                await asyncio.sleep(0.05)
            here = ray.get_runtime_context().get_node_id()  # the driver is on the head
            doomed = [pid for node, pid in pool.where if node != here]
            assert len(doomed) == 1, pool.where
            await asyncio.to_thread(cluster.kill_second, doomed)  # every episode is mid-way now
            gate.set()
            return list(await asyncio.gather(*tasks))

        ends = asyncio.run(play())
    finally:
        summary = pool.finish()
    assert summary["episodes"] == len(specs), "every episode recorded"
    assert ends.count("continued") > 0, (Counter(ends), pool.continued, pool.where)
    assert pool.continued == ends.count("continued")
    records = read_records(tmp_path)
    lost = [r for r in records if r.outcome == "not_scored"]
    assert all(r.not_scored_cause == "worker" for r in lost) and len(lost) == ends.count("lost")
    _same_verdicts([r for r in records if r.outcome != "not_scored"],
                   {k: v for k, v in serial.items() if k not in {(r.scenario, r.repeat) for r in lost}})
