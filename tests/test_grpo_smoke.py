"""training/grpo_trl.py --smoke: two GRPO steps of TRL's own trainer on CPU, with a tiny random Qwen3 and a
tokenizer built locally (nothing downloaded), rollouts through our TRL environment class (the model calls a
tool, the reward comes from get_reward), then a dev run through the runner that measure.py reads.

Opt-in: skips without torch and trl (the ``trl`` extra); fails instead with REHEARSAL_REQUIRE_TRL=1.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rehearsal_env.records import read_records, verify_run_dir

SCRIPT = Path(__file__).parents[1] / "training" / "grpo_trl.py"

missing = [m for m in ("torch", "trl", "transformers", "datasets") if importlib.util.find_spec(m) is None]
if missing:
    if os.environ.get("REHEARSAL_REQUIRE_TRL") == "1":
        raise RuntimeError(f"REHEARSAL_REQUIRE_TRL=1 but {', '.join(missing)} is not installed: "
                           "pip install torch==2.13.0 && pip install -e '.[trl]'")
    pytest.skip(f"{', '.join(missing)} not installed (pip install -e '.[trl]')", allow_module_level=True)


def test_two_grpo_steps_on_cpu_call_a_tool_and_the_dev_run_is_measured(tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run([sys.executable, str(SCRIPT), "--smoke", "--world", "analytics", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "smoke: taught the tiny model to call list_tables" in out
    steps = re.search(r"trained (\d+) step\(s\); mean reward per step: (.*); tool calls per rollout: (.*)", out)
    assert steps is not None, out
    assert int(steps[1]) == 2
    calls = [float(x) for x in steps[3].split(", ")]
    assert len(calls) == 2 and sum(calls) > 0, "TRL's tool loop never called one of our methods"
    records = read_records(tmp_path / "dev")
    assert len(records) == 2 and {r.split for r in records} == {"dev"}
    assert {r.agent for r in records} == {"grpo:smoke"} and {r.agent_version for r in records} == {"step-2"}
    assert "verified rate" in out and "resolution floor" in out  # measure.py read the dev run
    # every rollout's episode was recorded, sealed, where measure.py reads it (the training run's reward curve)
    (training,) = (tmp_path / "training").iterdir()
    assert verify_run_dir(training) == []
    rollouts = read_records(training)
    assert len(rollouts) == 2 * 2 + 2  # 2 steps of 2 rollouts, and the 2 episodes the smoke's teaching opened
    assert {r.agent for r in rollouts} == {"grpo:smoke"} and all(r.is_root for r in rollouts)
    measured = subprocess.run([sys.executable, str(SCRIPT.parents[1] / "measure.py"), str(training)],
                              capture_output=True, text=True, timeout=300, env=env)
    assert measured.returncode == 0 and "verified rate" in measured.stdout, measured.stderr[-2000:]
