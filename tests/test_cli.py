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
