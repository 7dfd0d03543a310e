"""training/preregistration.py: a committed config fixes every setting of learn.py before holdout is read.

Pure Python (no torch): the config's loading and refusals, whether git holds it unchanged, the holdout readings
counted per config, and the categories a whole-category holdout split uses.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "training"))
try:
    from preregistration import apply_config, category, record_reading
finally:
    sys.path.pop(0)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="learn.py")
    p.add_argument("--world", default="shop")
    p.add_argument("--grpo-steps", type=int, default=10)
    p.add_argument("--holdout-categories", default="")
    p.add_argument("--out", default="runs/learn")
    p.add_argument("--no-holdout", action="store_true")
    p.add_argument("--reread-holdout", action="store_true")
    p.add_argument("--config", default="")
    return p


def _load(argv: list[str]) -> tuple[argparse.Namespace, object]:
    p = _parser()
    args = p.parse_args(argv)
    return args, apply_config(p, args, argv)


def _git(folder: Path, *command: str) -> None:
    subprocess.run(["git", *command], cwd=folder, check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@example.com", "PATH": "/usr/bin:/bin"})


def test_a_committed_config_fixes_every_setting(tmp_path: Path) -> None:
    _git(tmp_path, "init", "-q")
    config = tmp_path / "learn.toml"
    config.write_text('world = "analytics"\ngrpo_steps = 40\nholdout_categories = ["orders-count"]\n')
    args, registered = _load(["--config", str(config), "--out", str(tmp_path / "out")])
    assert (args.world, args.grpo_steps, args.holdout_categories) == ("analytics", 40, "orders-count")
    assert registered is not None and not registered.committed  # not in git yet: no pre-registered reading
    _git(tmp_path, "add", "learn.toml")
    _git(tmp_path, "commit", "-q", "-m", "pre-register")
    _, registered = _load(["--config", str(config)])
    assert registered.committed and len(registered.sha256) == 64
    config.write_text('world = "analytics"\ngrpo_steps = 41\n')  # changed after the commit: not what was registered
    _, changed = _load(["--config", str(config)])
    assert not changed.committed and changed.sha256 != registered.sha256


def test_a_config_refuses_other_settings_and_unknown_options(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "learn.toml"
    config.write_text("grpo_steps = 40\n")
    with pytest.raises(SystemExit):
        _load(["--config", str(config), "--grpo-steps", "80"])
    assert "fixes every setting; remove ['--grpo-steps']" in capsys.readouterr().err
    config.write_text("grpo_step = 40\n")
    with pytest.raises(SystemExit):
        _load(["--config", str(config)])
    assert "unknown option(s) ['grpo_step']" in capsys.readouterr().err
    config.write_text("grpo_steps = [\n")
    with pytest.raises(SystemExit):
        _load(["--config", str(config)])
    assert "expected a readable TOML file" in capsys.readouterr().err


def test_holdout_readings_are_counted_per_config(tmp_path: Path) -> None:
    config = tmp_path / "learn.toml"
    config.write_text("grpo_steps = 40\n")
    _, registered = _load(["--config", str(config)])
    marker = tmp_path / "holdout-read.json"
    assert record_reading(marker, registered, False) == 1
    assert record_reading(marker, None, False) == 1  # an ad hoc reading is counted apart
    assert record_reading(marker, registered, True) == 2
    state = json.loads(marker.read_text())
    assert state["reads"] == 3 and state["by_config"] == {registered.sha256: 2, "ad hoc": 1}


def test_a_scenarios_category_is_its_template() -> None:
    assert category("refund-item-0006") == "refund-item"
    assert category("orders-count-0001") == "orders-count"
    assert category("lonely") == "lonely"
