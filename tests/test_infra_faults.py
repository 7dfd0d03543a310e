"""Infrastructure faults end cleanly: a dead database, two runs in one directory, damaged records, Ray.

The PostgreSQL server is a real private one per test (killed with SIGKILL mid-run, as a crash would);
Ray is a real local cluster; damaged parts are real files with real bytes cut or flipped.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pgserver import private_server
from ray import cloudpickle

from rehearsal_env.agents import Policy, make_agent
from rehearsal_env.cli import main
from rehearsal_env.measure import RunError, load_run
from rehearsal_env.readiness import readiness_of
from rehearsal_env.records import (
    EPISODES_DIR,
    EpisodeRecord,
    MixedRuns,
    RecordsDamaged,
    read_records,
    read_table,
    verify_run_dir,
    write_part,
)
from rehearsal_env.rescore import rescore_run
from rehearsal_env.runner import RunConfig, RunLocked, RunStopped, load_config, run, run_lock, run_on_ray
from rehearsal_env.scenarios import Scenario

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Ray workers cannot import this test module

SCENARIOS = ("refund-item-0001", "cancel-order-0005", "refund-item-0004", "change-address-0002",
             "refund-item-0005", "cancel-order-0001")


def comparable(records: list[EpisodeRecord]) -> list[dict[str, Any]]:
    """Records without what differs between two plays of the same episode (wall times, the run id, and the
    build's hash, which changes whenever the package's files do between the processes compared)."""
    out = []
    for r in records:
        row = dataclasses.asdict(r)
        row.pop("run_id")
        row["provenance"].pop("build")
        for turn in row["trace"]:
            turn.pop("latency_ms")
        row.pop("model_latency_ms", None)
        out.append(row)
    return out


@pytest.fixture()
def server() -> Iterator[Any]:
    """A private PostgreSQL server of this test alone (it gets killed); skips without PostgreSQL."""
    with private_server("rehearsal-pgkill-") as pg:
        yield pg


def postmaster(pg: Any) -> int:
    return int((pg.data_dir / "postmaster.pid").read_text().split("\n")[0])


@dataclass(frozen=True)
class KillOn:
    """Plays the reference solution; on ``scenario``'s first action SIGKILLs the postmaster ``pid`` (once)."""

    scenario: str
    pid: int
    marker: Path

    def __call__(self, scenario: Scenario) -> Policy:
        agent = make_agent("reference", scenario)

        def act(observation: str, info: dict[str, Any]) -> str:
            if scenario.id == self.scenario and not self.marker.exists():
                self.marker.write_text("killed\n")
                os.kill(self.pid, signal.SIGKILL)
                time.sleep(0.2)  # the server's backends notice their postmaster is gone
            return agent(observation, info)
        return act


def config(dsn: str, **kw: Any) -> RunConfig:
    return RunConfig(world="shop", scenarios=SCENARIOS, backend="postgres", backend_options={"dsn": dsn},
                     run_id="run_pgkill", batch_size=2, **kw)


@pytest.mark.parametrize("workers", [0, 2])
def test_a_killed_postgres_server_ends_the_run_cleanly_and_resume_completes_it(
        server: Any, tmp_path: Path, workers: int) -> None:
    cfg = config(server.dsn)
    kill = KillOn("refund-item-0004", postmaster(server), tmp_path / "killed")
    run(cfg, tmp_path / "whole")  # the uninterrupted run, first (the server is still up)
    out = tmp_path / "run"
    with pytest.raises(RunStopped, match=r"the run stopped after \d+ of 6 episodes.*--resume") as stopped:
        if workers:
            run_on_ray(cfg, out, workers=workers, agent_factory=kill, recovery_s=2.0)
        else:
            run(cfg, out, agent_factory=kill, recovery_s=2.0)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["episodes"] == stopped.value.summary["episodes"] < 6
    recorded = read_records(out)
    lost = [r for r in recorded if r.outcome == "not_scored"]
    assert lost and all(r.not_scored_cause == "database" for r in lost)
    assert summary["not_scored_by_cause"] == {"database": len(lost)}
    if not workers:  # serial: the episode the server died under is recorded, not scored, cause database
        assert [r.scenario for r in lost] == ["refund-item-0004"]
    server.start()  # the server is back, on a new socket: the resumed run gets the new DSN
    # Resumed in a fresh process, as a user would; the killed agent is the reference agent once its marker
    # is spent. (In this process the killed server's leftover env databases would clash by name.)
    done = subprocess.run([str(Path(sys.executable).parent / "rehearsal"), "run", "--resume", str(out), "--dsn",
                           server.dsn, "--quiet"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert comparable(read_records(out)) == comparable(read_records(tmp_path / "whole"))
    assert json.loads((out / "summary.json").read_text())["not_scored"] == 0
    assert verify_run_dir(out) == []


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import tinyworld

    from rehearsal_env.worlds import register_world

    register_world("tiny", tinyworld.build_world)
    out = tmp_path_factory.mktemp("tiny")
    run(RunConfig(world="tiny", repeats=2, batch_size=2, agent_version="v1"), out)
    return out


def test_a_second_run_into_a_held_directory_is_refused_at_once_naming_the_holder(
        tiny_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "held"
    with run_lock(out, "run_holder"):
        with pytest.raises(RunLocked, match=rf"{out} is in use by run run_holder \(pid {os.getpid()} on "):
            run(RunConfig(world="tiny"), out)
        assert main(["run", "--world", "tiny", "--out", str(out), "--quiet"]) == 2
        assert "is in use by run run_holder" in capsys.readouterr().err
        assert not (out / "run.json").exists()  # the refused run touched nothing
    run(RunConfig(world="tiny"), out)  # released: the next run goes ahead


def test_every_reader_refuses_a_directory_mixing_runs(tiny_run: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    mixed = tmp_path / "mixed"
    shutil.copytree(tiny_run, mixed)
    other = [dataclasses.replace(r, run_id="run_other") for r in read_records(tiny_run)[:2]]
    write_part(mixed, other, 7)  # what two runs writing into one --out left behind before the lock
    for reader in (read_records, read_table, lambda d: rescore_run(d, "rl", tmp_path / "rescored"),
                   lambda d: readiness_of(read_records(d))):
        with pytest.raises(MixedRuns, match=r"holds records of 2 runs: run_\w+ \(part-.*run_other \(part-00007"):
            reader(mixed)
    assert main(["readiness", str(mixed)]) == 0  # it judges what it reads, and says why it cannot trust it
    out = capsys.readouterr().out
    assert out.startswith("Needs work") and "cannot be trusted" in out and "mixes runs" in out
    assert main(["eval", "verify", str(mixed)]) == 1 and "run_other" in capsys.readouterr().out
    with pytest.raises(RunError, match=r"holds records of 2 runs: run_\w+ \(part-.*run_other"):
        load_run(mixed)  # measure.py


def test_damaged_parts_are_named_with_the_remedy_and_resume_rewrites_them(
        tiny_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "damaged"
    shutil.copytree(tiny_run, out)
    parts = sorted((out / EPISODES_DIR).glob("part-*.parquet"))
    truncated, flipped = parts[0], parts[1]
    truncated.write_bytes(truncated.read_bytes()[:100])
    data = bytearray(flipped.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one byte in the middle: Parquet may still read it, the manifest does not
    flipped.write_bytes(bytes(data))
    with pytest.raises(RecordsDamaged, match=rf"{truncated}: has 100 bytes, the manifest says \d+ .*--resume"):
        read_records(out)
    assert main(["eval", "verify", str(out)]) == 1
    report = capsys.readouterr().out
    assert f"{truncated}: has 100 bytes" in report and f"{flipped}: does not match its SHA-256" in report
    assert main(["eval", "rescore", str(out), "--profile", "rl"]) == 2
    assert "--resume" in capsys.readouterr().err
    with pytest.raises(RunError, match=rf"{truncated}: has 100 bytes.*--resume"):
        load_run(out)  # measure.py
    run(load_config(out), out, resume=True)
    assert main(["eval", "verify", str(out)]) == 0
    assert comparable(read_records(out)) == comparable(read_records(tiny_run))


def test_resume_replays_episodes_not_scored_for_a_failed_part_only(tiny_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "replay"
    shutil.copytree(tiny_run, out)
    records = read_records(out)
    part = sorted((out / EPISODES_DIR).glob("part-*.parquet"))[0]
    failed = [dataclasses.replace(r, outcome="not_scored", not_scored_cause="database", reason="the server died",
                                  outcome_reward=None, reward=None) for r in records[:2]]
    write_part(out, failed, int(part.stem.split("-")[1]))
    run(load_config(out), out, resume=True)
    assert comparable(read_records(out)) == comparable(read_records(tiny_run))


# -- Ray ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    yield
    ray.shutdown()


@dataclass
class DiesAtStart:
    """An agent factory: its worker dies mid-episode once; each replacement then dies while it starts
    (unpickling this factory) ``starts`` times before one comes up."""

    marker: Path
    starts: int

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        died = self.marker.read_text().count("start\n") if self.marker.exists() else 0
        if self.marker.exists() and "episode\n" in self.marker.read_text() and died < self.starts:
            with open(self.marker, "a") as fh:
                fh.write("start\n")
            os._exit(3)

    def __call__(self, scenario: Scenario) -> Policy:
        agent = make_agent("reference", scenario)

        def act(observation: str, info: dict[str, Any]) -> str:
            if scenario.id == "refund-item-0004" and not self.marker.exists():
                self.marker.write_text("episode\n")
                os._exit(1)
            return agent(observation, info)
        return act


def test_a_replacement_worker_that_dies_while_starting_is_started_again(tmp_path: Path, local_ray: None) -> None:
    marker = tmp_path / "marker"
    cfg = RunConfig(world="shop", scenarios=SCENARIOS[:4], batch_size=2)
    summary = run_on_ray(cfg, tmp_path / "ray", workers=1, agent_factory=DiesAtStart(marker, starts=2))
    assert marker.read_text() == "episode\nstart\nstart\n"  # died mid-episode, then twice while starting
    assert summary["verified"] == summary["episodes"] == 4
    run(cfg, tmp_path / "serial")
    assert comparable(read_records(tmp_path / "ray")) == comparable(read_records(tmp_path / "serial"))


def test_a_wrong_ray_address_fails_fast_with_a_message(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a loopback port of ours that nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = subprocess.run([str(Path(sys.executable).parent / "rehearsal"), "run", "--world", "shop", "--scenario",
                           "refund-item-0001", "--workers", "1", "--ray-address", f"127.0.0.1:{port}", "--out",
                           str(tmp_path / "run"), "--quiet"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr  # its own one-line error, not the subprocess timeout of a hang
    assert f"no Ray cluster answers at --ray-address 127.0.0.1:{port}" in done.stderr
    assert "ray start --head" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.add(child)
            todo.append(child)
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_no_ray_process_outlives_a_killed_driver(tmp_path: Path) -> None:
    driver = subprocess.Popen([str(Path(sys.executable).parent / "rehearsal"), "run", "--world", "shop", "--repeats",
                               "50", "--workers", "2", "--batch-size", "1", "--out", str(tmp_path / "run"), "--quiet"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not list((tmp_path / "run" / EPISODES_DIR).glob("part-*.parquet")):
            assert driver.poll() is None and time.monotonic() < deadline, "the run never wrote a part"
            time.sleep(0.2)
        ours = _descendants(driver.pid)
        assert ours, "the driver started no Ray process"
        driver.kill()
        driver.wait()
        deadline = time.monotonic() + 10
        while any(_alive(p) for p in ours) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = sorted(p for p in ours if _alive(p))
        assert not left, [Path(f"/proc/{p}/cmdline").read_bytes()[:80] for p in left]
    finally:
        if driver.poll() is None:
            driver.kill()
