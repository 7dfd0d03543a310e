"""learn.py's two GRPO arms from the same SFT weights, and GRPO's reward curve read back from the sealed records.

* ``outcome``: TRL's ``GRPOTrainer`` with the environment's ``get_reward`` alone (the profile's end reward).
* ``turns``: the same number of steps, seed and settings from the same SFT weights, under ``rl_turns`` (per-turn
  rewards from the goal checks): ``get_reward`` (the same end reward: the turns' rewards sum to it) plus
  :func:`~rehearsal_env.integrations.trl.turn_progress`, the progress the per-turn rewards paid before the end,
  weighted ``--progress-weight``. TRL 1.16 gives one advantage per rollout (no per-turn or per-token advantage), so
  this is the form in which per-turn rewards can change its gradient (see ``integrations/trl/_rewards.py``).

Every rollout is recorded, sealed, under ``OUT/grpo-<arm>-episodes/`` with the agent version ``step-N`` of the GRPO
step that generated it, so the reward curve per step is ``measure.py`` on that run directory (one checkpoint per
step: ``--agent learn-WORLD-grpo-ARM@step-N``); :func:`reward_curve` reads it the same way (``load_run``).
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path
from typing import Any

from datasets import Dataset
from transformers import TrainerCallback
from trl import GRPOConfig, GRPOTrainer

import rehearsal_env
from rehearsal_env.agents import given_for
from rehearsal_env.integrations.trl import dataset_rows, environment_class, render_as_served, turn_progress
from rehearsal_env.measure import load_run, summarize

ARMS = {"outcome": "sft+grpo", "turns": "sft+grpo-turns"}
"""GRPO arm -> learn.py's arm name."""
TURNS_PROFILE = "rl_turns"
"""The shaped profile of the per-turn arm (the per-turn rewards' sum is the ``rl`` end reward)."""


class StepVersions(TrainerCallback):  # type: ignore[misc]
    """Names each rollout's record by the GRPO step that generates it (agent version ``step-N``, N from 1)."""

    def __init__(self) -> None:
        self.trainer: GRPOTrainer | None = None

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        envs: list[Any] = (self.trainer.environments if self.trainer is not None else None) or []
        for env in envs:
            env.session.agent_version = f"step-{state.global_step + 1}"


def run_grpo(arm: str, model: Any, tokenizer: Any, world: rehearsal_env.World, train: list[str],
             args: argparse.Namespace, out: Path) -> tuple[Any, dict[str, Any]]:
    """Train ``model`` (the SFT weights) with GRPO as ``arm`` (``outcome`` or ``turns``); returns the model and what
    happened: seconds, TRL's log per step, where the rollouts were recorded and as whom."""
    t0 = time.monotonic()
    rows = [r for r in dataset_rows(world, "train") if r["scenario"] in set(train)]
    for row in rows:  # the served agent's system prompt
        row["prompt"][0]["content"] = given_for("", world, world.scenario(row["scenario"]))["system"][1]
    turns = arm == "turns"
    episodes = out / f"grpo-{arm}-episodes"
    agent = f"learn-{world.name}-grpo-{arm}"
    environment = environment_class(world, split="train", profile=TURNS_PROFILE if turns else args.profile,
                                    out=str(episodes), agent=agent, agent_version="step-1")
    turn_limit = max(s.turn_limit for s in world.scenarios("train"))
    versions = StepVersions()
    trainer = GRPOTrainer(
        model=model, processing_class=tokenizer, train_dataset=Dataset.from_list(rows),
        environment_factory=environment, reward_funcs=[turn_progress] if turns else None, callbacks=[versions],
        args=GRPOConfig(output_dir=str(out / f"grpo-{arm}"), max_steps=args.grpo_steps, learning_rate=args.grpo_lr,
                        num_generations=args.num_generations, per_device_train_batch_size=args.num_generations,
                        max_completion_length=args.max_completion_length, logging_steps=1, save_strategy="no",
                        report_to="none", use_cpu=args.device == "cpu", bf16=args.device == "cuda", seed=args.seed,
                        max_tool_calling_iterations=turn_limit, temperature=args.grpo_temperature,
                        reward_weights=[args.progress_weight] if turns else None))
    render_as_served(trainer)  # the tools as the served agent sends them (TRL's own rendering differs)
    versions.trainer = trainer
    trainer.train()
    envs: list[Any] = trainer.environments or []
    for env in envs:
        env._close()  # the last rollouts' records are written now, not at exit
    logs = [h for h in trainer.state.log_history if "reward" in h]
    seconds = time.monotonic() - t0
    print(f"GRPO {arm}: {trainer.state.global_step} steps in {seconds:.0f} s; mean reward per step: "
          + ", ".join(f"{h['reward']:.3f}" for h in logs) + "; tool calls per rollout: "
          + ", ".join(f"{h.get('tools/call_frequency', 0):.2f}" for h in logs), flush=True)
    return trainer.model, {"seconds": seconds, "steps": trainer.state.global_step, "logs": logs,
                           "episodes": str(episodes / f"{world.name}-{environment.profile}"), "agent": agent}


def reward_curve(run_dir: str, agent: str) -> list[dict[str, Any]]:
    """Per GRPO step, from the sealed records (as ``measure.py RUN_DIR --agent AGENT@step-N`` reads them): the
    rollouts, their mean reward with its 95% interval, and how their rewards were distributed."""
    points = []
    for checkpoint in load_run(run_dir):
        name, _, version = checkpoint.agent.partition("@")
        if name != agent or not version.startswith("step-"):
            continue
        s = summarize(checkpoint)
        rewards = [float(x) for v in checkpoint.per_scenario("reward").values() for x in v]
        points.append({"step": int(version.removeprefix("step-")), "rollouts": s.n_scored + s.n_not_scored,
                       "mean_reward": s.mean_reward.value, "low": s.mean_reward.low, "high": s.mean_reward.high,
                       "verified": s.verified.value,
                       "distribution": dict(sorted(Counter(round(r, 3) for r in rewards).items()))})
    return sorted(points, key=lambda p: p["step"])


def curve_lines(arm: str, curve: list[dict[str, Any]], logs: list[dict[str, Any]]) -> list[str]:
    """The report's lines for one GRPO arm's reward curve (records) and TRL's share of groups without spread."""
    lines = [f"GRPO {arm} ({ARMS[arm]}): reward per step from the sealed records (mean [95% CI], rollouts, "
             "distribution of the rollouts' rewards)"]
    for p in curve:
        lines.append(f"  step {p['step']}: {p['mean_reward']:.3f} [{p['low']:.3f}, {p['high']:.3f}], "
                     f"{p['rollouts']} rollouts, {p['distribution']}")
    flat = [h.get("frac_reward_zero_std") for h in logs if h.get("frac_reward_zero_std") is not None]
    if flat:
        lines.append(f"  groups whose rollouts all got the same reward (advantage 0, nothing learned from them), "
                     f"per step: {', '.join(f'{x:.2f}' for x in flat)}")
    return lines


def n_episodes_check(curve: list[dict[str, Any]], steps: int, per_step: int) -> str | None:
    """Why the records do not hold every rollout (None: they do)."""
    got = {p["step"]: p["rollouts"] for p in curve}
    missing = [s for s in range(1, steps + 1) if got.get(s, 0) < per_step]
    return None if not missing else f"records miss rollouts of step(s) {missing} (expected {per_step} each)"
