"""The ``rehearsal`` command line, through its entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rehearsal_env.cli import main

SUMMARY_KEYS = {"episodes", "verified", "not_achieved", "rule_violated", "not_scored", "mean_reward",
                "false_completions", "duplicate_effects", "recovered", "unnecessary_interruptions",
                "rejected_attempts", "faults_injected"}


def test_run_reference_on_dev_verifies_every_episode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    assert main(["run", "--world", "shop", "--agent", "reference", "--split", "dev", "--repeats", "2",
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "verified" in printed and "mean reward" in printed
    summary = json.loads((out / "summary.json").read_text())
    assert SUMMARY_KEYS <= set(summary)
    assert summary["episodes"] == summary["verified"] > 0 and summary["mean_reward"] == 1.0
    table = pq.read_table(out / "episodes.parquet")
    assert table.num_rows == summary["episodes"]
    assert set(table.column("outcome").to_pylist()) == {"verified"}


def test_run_null_agent_verifies_nothing(tmp_path: Path) -> None:
    assert main(["run", "--world", "shop", "--agent", "null", "--split", "holdout", "--out", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["verified"] == 0 and summary["false_completions"] > 0


def test_world_list_and_show(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["world", "list"]) == 0
    assert "shop" in capsys.readouterr().out
    assert main(["world", "show", "shop"]) == 0
    shown = capsys.readouterr().out
    assert "issue_refund" in shown and "support_agent" in shown and "refund-item-0001" in shown
    assert main(["world", "show", "shop", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert len(info["tools"]) >= 12 and sum(info["scenarios"].values()) >= 40


@pytest.mark.parametrize(("argv", "says"), [
    (["run", "--world", "nope"], "no world 'nope'"),
    (["run", "--world", "shop", "--agent", "clever"], "unknown agent 'clever'"),
    (["run", "--world", "shop", "--scenario", "missing-0001"], "no scenarios of world 'shop' match"),
    (["world", "show", "shp"], "Did you mean 'shop'"),
])
def test_errors_are_one_clear_line(argv: list[str], says: str, capsys: pytest.CaptureFixture[str],
                                   tmp_path: Path) -> None:
    if argv[0] == "run":
        argv = [*argv, "--out", str(tmp_path)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("rehearsal: error: ") and says in err


@pytest.mark.parametrize(("argv", "env", "says"), [
    (["--world", "reviews", "--backend", "docker"], {"DOCKER_HOST": "unix:///nonexistent/docker.sock"},
     "start dockerd"),
    (["--world", "shop", "--backend", "postgres"], {"REHEARSAL_POSTGRES_BIN": "/nonexistent/bin",
                                                    "REHEARSAL_POSTGRES_DSN": ""}, "REHEARSAL_POSTGRES_BIN"),
    (["--world", "shop", "--agent", "openai:any-model", "--base-url", "http://127.0.0.1:9/v1"], {},
     "no model server answers"),
], ids=["docker", "postgres", "model-server"])
def test_a_missing_part_is_one_error_line_and_leaves_no_run_directory(
        argv: list[str], env: dict[str, str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    out = tmp_path / "run"
    assert main(["run", *argv, "--out", str(out), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("rehearsal: error: ") and err.count("\n") == 1 and says in err, err
    assert not out.exists()


def test_the_old_profile_flag_still_works_with_a_warning_and_a_new_run_clears_stale_output(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["run", "--world", "shop", "--scenario", "refund-item-0001", "--out", str(tmp_path), "--quiet"]
    assert main([*args, "--profile", "rl"]) == 0
    err = capsys.readouterr().err
    assert "--profile is now --reward-profile" in err
    assert json.loads((tmp_path / "summary.json").read_text())["config"]["reward_profile"] == "rl"
    assert main(["eval", "rescore", str(tmp_path), "--reward-profile", "benchmark"]) == 0
    assert (tmp_path / "rescore-benchmark" / "episodes.parquet").is_dir()
    assert main([*args, "--reward-profile", "benchmark"]) == 0  # a new run in the same directory
    assert "warning" not in capsys.readouterr().err
    assert not (tmp_path / "rescore-benchmark").exists()
    assert json.loads((tmp_path / "provenance.json").read_text())["reward_profile"] == "benchmark"
