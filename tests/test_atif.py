"""``rehearsal eval export --format atif``: every record of a run of each world as an ATIF trajectory, validated
with the ``atif`` package's models, and read back to the same record.

Needs the ``atif`` extra; skips without it unless ``REHEARSAL_REQUIRE_ATIF=1``. The reviews world needs the
Docker sandbox (skips without it unless ``REHEARSAL_REQUIRE_DOCKER=1``).
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

from rehearsal_env.cli import main
from rehearsal_env.records import read_records
from rehearsal_env.runner import RunConfig, run
from rehearsal_env.worlds import backend_for, load_world, world_names

if importlib.util.find_spec("atif") is None:
    if os.environ.get("REHEARSAL_REQUIRE_ATIF") == "1":
        pytest.fail("REHEARSAL_REQUIRE_ATIF=1 but the atif extra is not installed: pip install -e '.[atif]'",
                    pytrace=False)
    pytest.skip("the atif extra is not installed (pip install -e '.[atif]')", allow_module_level=True)

from atif import Trajectory  # noqa: E402

from rehearsal_env.trajectories import SCHEMA_VERSION, WITHHELD, to_record, to_trajectory  # noqa: E402


def _docker_or_skip() -> None:
    from rehearsal_env.sandbox import base_image_built, docker_available

    why = docker_available()
    if why is None and not base_image_built():
        why = "the sandbox base image is not built (python -m rehearsal_env.sandbox)"
    if why is not None:
        if os.environ.get("REHEARSAL_REQUIRE_DOCKER") == "1":
            pytest.fail(f"REHEARSAL_REQUIRE_DOCKER=1 but {why}")
        pytest.skip(why)


@pytest.mark.parametrize("world_name", world_names())
def test_every_record_of_a_run_exports_validates_and_round_trips(world_name: str, tmp_path: Path) -> None:
    world = load_world(world_name)
    backend = backend_for(world)
    if backend == "docker":
        _docker_or_skip()
    chosen = tuple(s.id for s in world.scenarios("dev")[:4] + world.scenarios("holdout")[:2])
    for agent in ("reference", "null"):
        run(RunConfig(world=world_name, agent=agent, scenarios=chosen, backend=backend), tmp_path / agent)
    for agent in ("reference", "null"):
        run_dir = tmp_path / agent
        records = read_records(run_dir)
        assert main(["eval", "export", str(run_dir), "--format", "atif"]) == 0
        files = sorted((run_dir / "atif").glob("*.json"))
        assert len(files) == len(records) == len(chosen)
        for record, path in zip(records, files, strict=True):
            document = json.loads(path.read_text())
            trajectory = Trajectory.model_validate(document)  # the atif package's own models
            assert trajectory.schema_version == SCHEMA_VERSION
            assert [s.source for s in trajectory.steps] == ["user"] + ["agent"] * len(record.trace)
            assert trajectory.steps[0].message == world.scenario(record.scenario).request
            assert trajectory.extra["rehearsal"]["verdict"]["outcome"] == record.outcome  # type: ignore[index]
            back = to_record(document)
            if record.split == "holdout":  # its checks leave without their SQL and wanted value
                assert all(c.sql is None and c.want == WITHHELD for c in back.checks)
                assert back.checks != record.checks and back.trace == record.trace
                assert to_record(json.loads(json.dumps(
                    to_trajectory(record, holdout_checks=True).to_json_dict()))) == record
            else:
                assert back == record


def test_a_trajectory_not_written_by_us_is_refused() -> None:
    foreign = {"schema_version": SCHEMA_VERSION, "agent": {"name": "x", "version": "1"},
               "steps": [{"step_id": 1, "source": "user", "message": "hi"}]}
    with pytest.raises(ValueError, match="extra.rehearsal.record"):
        to_record(foreign)


def test_export_without_a_run_is_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "export", str(tmp_path / "nothing"), "--format", "atif"]) != 0
    err = capsys.readouterr().err.strip()
    assert err.startswith("rehearsal: error:") and "\n" not in err
