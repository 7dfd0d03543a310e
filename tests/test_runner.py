"""The runner: serial and Ray runs give the same records; dead workers, cut-short runs and resume.

One local Ray (2 CPUs) serves the whole module. Worker deaths are real: the
agent factory below makes the actor process ``os._exit`` on a chosen scenario
for as many times as its marker file allows.
"""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import pyarrow.parquet as pq
import pytest
from ray import cloudpickle

from rehearsal_env.agents import Policy, make_agent
from rehearsal_env.cli import main
from rehearsal_env.records import EpisodeRecord, part_files, read_part, read_records
from rehearsal_env.runner import (
    RUN_FILE,
    EpisodeWorker,
    Progress,
    RayPool,
    RunConfig,
    load_config,
    plan,
    resolve,
    run,
    run_batch,
    run_on_ray,
    start_run,
    summary_of,
)
from rehearsal_env.scenarios import Scenario
from rehearsal_env.worlds import load_world

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Ray workers cannot import this test module

SPLIT: Literal["dev"] = "dev"
VICTIM = "cancel-order-0005"  # a dev scenario with writes


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    yield
    ray.shutdown()


class _Dying:
    """Plays the reference solution, but first kills its process while the marker allows."""

    def __init__(self, agent: Policy, marker: Path, deaths: int) -> None:
        self.agent, self.marker, self.deaths = agent, marker, deaths

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        died = len(self.marker.read_text().splitlines()) if self.marker.exists() else 0
        if died < self.deaths:
            with open(self.marker, "a") as fh:
                fh.write(f"{os.getpid()}\n")
                fh.flush()
                os.fsync(fh.fileno())
            os._exit(1)
        return self.agent(observation, info)


@dataclass(frozen=True)
class DieOn:
    """An agent factory whose agent kills the worker process on ``scenario``, ``deaths`` times in all."""

    scenario: str
    """The scenario whose episodes kill their worker."""
    marker: str
    """A file with one line per death so far (shared by every worker process on this machine)."""
    deaths: int
    """How many times to die."""

    def __call__(self, scenario: Scenario) -> Policy:
        agent = make_agent("reference", scenario)
        return _Dying(agent, Path(self.marker), self.deaths) if scenario.id == self.scenario else agent


def comparable(records: list[EpisodeRecord]) -> list[dict[str, Any]]:
    """Records as dicts, less the run id, the step latencies (wall time) and the hash of the package's files
    (each process hashes the files once, and the working tree may change between two processes)."""
    rows = []
    for record in records:
        row = asdict(record)
        row.pop("run_id")
        row["provenance"]["build"].pop("binary_sha256")
        for turn in row["trace"]:
            turn.pop("latency_ms")
        rows.append(row)
    return rows


def part_keys(out: Path) -> list[list[tuple[str, int]]]:
    """Each part file's episodes (scenario, repeat), part by part."""
    return [list(zip(t.column("scenario").to_pylist(), t.column("repeat").to_pylist(), strict=True))
            for t in (pq.read_table(p) for p in sorted((out / "episodes.parquet").glob("part-*.parquet")))]


def config(**changes: Any) -> RunConfig:
    return RunConfig(**{"world": "shop", "split": SPLIT, "repeats": 2, "batch_size": 5, **changes})


@pytest.fixture(scope="module")
def serial_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("serial")
    run(config(), out)
    return out


def test_a_worker_reusing_its_envs_records_what_fresh_envs_record() -> None:
    cfg = config()
    specs = plan(cfg, load_world("shop"))
    worker = EpisodeWorker(resolve(cfg))
    try:
        reused = worker.play_batch(specs)
    finally:
        worker.close()
    assert comparable(reused) == comparable(run_batch(cfg, specs))
    assert {r.outcome for r in reused} == {"verified"}


def test_workers_2_and_workers_0_write_identical_records(tmp_path: Path, local_ray: None) -> None:
    common = ["run", "--world", "shop", "--split", SPLIT, "--repeats", "2", "--batch-size", "5", "--quiet"]
    assert main([*common, "--workers", "0", "--out", str(tmp_path / "w0")]) == 0
    assert main([*common, "--workers", "2", "--out", str(tmp_path / "w2")]) == 0
    serial, ray_run = read_records(tmp_path / "w0"), read_records(tmp_path / "w2")
    assert len(serial) == 2 * len(load_world("shop").scenarios(SPLIT)) > 10
    assert comparable(ray_run) == comparable(serial)
    assert part_keys(tmp_path / "w2") == part_keys(tmp_path / "w0")
    summaries = [json.loads((tmp_path / d / "summary.json").read_text()) for d in ("w0", "w2")]
    for s in summaries:
        s["config"].pop("run_id")
    assert summaries[0] == summaries[1]


def test_ray_address_joins_a_running_cluster(tmp_path: Path, local_ray: None, serial_run: Path) -> None:
    import ray

    cli = Path(sys.executable).parent / "rehearsal"
    argv = [str(cli), "run", "--world", "shop", "--split", SPLIT, "--repeats", "2", "--batch-size", "5",
            "--workers", "2", "--ray-address", ray.get_runtime_context().gcs_address, "--out", str(tmp_path)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert comparable(read_records(tmp_path)) == comparable(read_records(serial_run))


def test_more_workers_than_the_cluster_has_cpus_is_refused(
        tmp_path: Path, local_ray: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--world", "shop", "--split", SPLIT, "--workers", "3", "--out", str(tmp_path)]) == 2
    assert "--workers 3 needs 3 CPUs in the Ray cluster, which has 2" in capsys.readouterr().err


def test_a_worker_killed_mid_episode_is_replaced_and_the_episode_retried(
        tmp_path: Path, local_ray: None, serial_run: Path) -> None:
    marker = tmp_path / "deaths"
    run_on_ray(config(), tmp_path / "run", workers=2, agent_factory=DieOn(VICTIM, str(marker), deaths=1))
    assert len(marker.read_text().splitlines()) == 1  # it really died once
    assert comparable(read_records(tmp_path / "run")) == comparable(read_records(serial_run))
    assert part_keys(tmp_path / "run") == part_keys(serial_run)


def test_an_episode_whose_worker_dies_twice_is_not_scored_with_the_reason(
        tmp_path: Path, local_ray: None, serial_run: Path) -> None:
    marker = tmp_path / "deaths"
    summary = run_on_ray(config(repeats=1, retries=0), tmp_path / "run", workers=2,  # retries: test_retries.py
                         agent_factory=DieOn(VICTIM, str(marker), deaths=2))
    assert len(marker.read_text().splitlines()) == 2
    records = read_records(tmp_path / "run")
    lost = [r for r in records if r.outcome == "not_scored"]
    assert [(r.scenario, r.repeat) for r in lost] == [(VICTIM, 0)]
    assert lost[0].reason and "worker process died" in lost[0].reason and lost[0].reward is None
    assert lost[0].not_scored_cause == "worker"
    expected = [r for r in comparable(read_records(serial_run))
                if r["repeat"] == 0 and r["scenario"] != VICTIM]
    assert [r for r in comparable(records) if r["scenario"] != VICTIM] == expected
    assert summary["not_scored"] == 1 and summary["verified"] == len(records) - 1
    assert summary["not_scored_by_cause"] == {"worker": 1}
    assert {k: v for k, v in summary.items() if k != "config"} == summary_of(records)


class _CutShort(Exception):
    pass


def _cut_after(batches: int) -> Any:
    seen: list[int] = []

    def on_batch(records: list[EpisodeRecord]) -> None:
        seen.append(len(records))
        if len(seen) == batches:
            raise _CutShort

    return on_batch


def _parts(out: Path) -> dict[str, tuple[int, int]]:
    """Each part file's inode and modification time: changed if the part was rewritten."""
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns)
            for p in (out / "episodes.parquet").glob("part-*")}


def test_resume_on_ray_completes_a_cut_short_serial_run(
        tmp_path: Path, local_ray: None, serial_run: Path) -> None:
    out = tmp_path / "run"
    with pytest.raises(_CutShort):
        run(config(), out, on_batch=_cut_after(2))
    assert (out / RUN_FILE).exists()
    before = _parts(out)
    first = {(r.scenario, r.repeat) for p in part_files(out) for r in read_part(p)}
    assert len(before) == 2 and len(first) == 10
    stopped = json.loads((out / "summary.json").read_text())  # a stopped run is summarized and sealed as it is
    assert stopped["episodes"] == 10 and {(r.scenario, r.repeat) for r in read_records(out)} == first
    played: list[EpisodeRecord] = []
    summary = run_on_ray(load_config(out), out, workers=2, resume=True, on_batch=played.extend)
    assert {k: v for k, v in _parts(out).items() if k in before} == before  # finished parts untouched
    keys = [(r.scenario, r.repeat) for r in played]
    assert len(keys) == len(set(keys)) and not set(keys) & first  # nothing replayed
    assert comparable(read_records(out)) == comparable(read_records(serial_run))
    assert part_keys(out) == part_keys(serial_run)
    assert summary["episodes"] == summary["verified"] == len(first) + len(keys)


def test_resume_on_the_command_line_completes_a_cut_short_ray_run(
        tmp_path: Path, local_ray: None, serial_run: Path) -> None:
    out = tmp_path / "run"
    with pytest.raises(_CutShort):
        run_on_ray(config(), out, workers=2, on_batch=_cut_after(1))
    before = _parts(out)
    assert len(before) == 1
    assert main(["run", "--resume", str(out), "--quiet"]) == 0
    assert {k: v for k, v in _parts(out).items() if k in before} == before
    assert comparable(read_records(out)) == comparable(read_records(serial_run))
    finished = _parts(out)
    assert main(["run", "--resume", str(out), "--workers", "2"]) == 0  # a finished run: nothing left to play
    assert _parts(out) == finished and len(finished) == -(-len(read_records(out)) // 5)


def test_resume_errors_say_what_to_do(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--resume", str(tmp_path)]) == 2
    assert f"no {RUN_FILE} in {tmp_path}" in capsys.readouterr().err
    run(config(repeats=1, batch_size=50), tmp_path)
    assert main(["run", "--resume", str(tmp_path), "--world", "shop"]) == 2
    assert "leave out --world" in capsys.readouterr().err
    assert main(["run", "--resume", str(tmp_path), "--repeats", "3", "--reward-profile", "rl"]) == 2
    assert "leave out --repeats, --reward-profile" in capsys.readouterr().err
    with pytest.raises(ValueError, match="holds another run's config .*repeats: stored 1, given 3"):
        run(config(repeats=3, batch_size=50, run_id=load_config(tmp_path).run_id), tmp_path, resume=True)


def test_workers_that_cannot_start_end_the_run_with_the_error(local_ray: None) -> None:
    with pytest.raises(RuntimeError, match="Ray workers could not start: .*sqlite backend takes no options"):
        RayPool(config(backend_options={"dsn": "postgresql://nowhere"}), 1)


def test_a_pool_plays_again_after_its_caller_stopped_early(tmp_path: Path, local_ray: None) -> None:
    cfg = config(batch_size=4)
    state = start_run(cfg, tmp_path)
    with RayPool(cfg, 1, inflight=3) as pool:
        for _ in pool.play(state.pending):
            break
        again = [(batch.index, len(played.rows)) for batch, played in pool.play(state.pending)]
    assert sorted(again) == [(b.index, len(b.specs)) for b in state.pending]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_draws_on_a_terminal_only(serial_run: Path) -> None:
    records = read_records(serial_run)
    piped, terminal = io.StringIO(), _Terminal()
    outcomes = [r.outcome for r in records]
    for stream in (piped, terminal):
        bar = Progress(len(records) + 5, done=5, stream=stream)
        bar.update(outcomes)
        bar.close()
    quiet = _Terminal()
    bar = Progress(len(records), stream=quiet, enabled=False)
    bar.update(outcomes)
    bar.close()
    assert piped.getvalue() == "" and quiet.getvalue() == ""
    shown = terminal.getvalue()
    assert f"{len(records) + 5}/{len(records) + 5} episodes" in shown and f"ok {len(records)}" in shown
    assert shown.endswith("\n") and "/s" in shown


def test_ray_workers_on_postgres_record_what_a_serial_sqlite_run_records(tmp_path: Path, local_ray: None,
                                                                         serial_run: Path, postgres_dsn: str) -> None:
    """Each Ray worker gets its own database on the server; verdicts and end states match SQLite's."""
    cfg = config(backend="postgres", backend_options={"dsn": postgres_dsn})
    run_on_ray(cfg, tmp_path, workers=2, progress=False)
    on_postgres = comparable(read_records(tmp_path))
    on_sqlite = comparable(read_records(serial_run))
    for row in (*on_postgres, *on_sqlite):
        row.pop("backend")
        row["provenance"].pop("run_id", None)
    assert on_postgres == on_sqlite


@pytest.mark.parametrize("pinned", [None, "2026-01-15"])
def test_freeze_time_source_has_one_value_in_every_file_of_a_run(tmp_path: Path, pinned: str | None) -> None:
    args = ["run", "--world", "shop", "--scenario", "refund-item-0001", "--out", str(tmp_path), "--quiet"]
    assert main([*args, *(["--freeze-time", pinned] if pinned else [])]) == 0
    sources = {json.loads((tmp_path / "run.json").read_text())["config"]["freeze_time_source"],
               json.loads((tmp_path / "summary.json").read_text())["config"]["freeze_time_source"],
               json.loads((tmp_path / "provenance.json").read_text())["capabilities"]["freeze_time_source"]}
    assert sources == {"--freeze-time" if pinned else "world.data_anchor"}


def test_the_summary_counts_not_scored_episodes_by_cause_and_nowhere_else() -> None:
    from rehearsal_env.runner import SummaryRow, format_table

    def row(outcome: str, cause: str | None = None) -> SummaryRow:
        scored = outcome != "not_scored"
        zero: dict[str, Any] = {name: 0 for name in SummaryRow._fields}
        return SummaryRow(**{**zero, "outcome": outcome, "reward": 1.0 if scored else None,
                             "outcome_reward": 1.0 if scored else None, "false_completion": False,
                             "recovered": False, "not_scored_cause": cause, "tokens": None})

    summary = summary_of([row("verified"), row("not_scored", "database"), row("not_scored", "provider"),
                         row("not_scored", "database")])
    assert (summary["verified"], summary["not_scored"], summary["mean_reward"]) == (1, 3, 1.0)
    assert summary["not_scored_by_cause"] == {"database": 2, "provider": 1}
    table = format_table(summary)
    assert "  database" in table and "  provider" in table
