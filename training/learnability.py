"""Which train scenarios GRPO can learn from, decided on train alone before GRPO starts (learn.py's
``grpo_scenarios = "learnable"``).

GRPO's advantage is a rollout's reward less its group's mean, so a group whose rollouts all got the same reward
teaches nothing. In the pre-registered table of docs/learning.md every group was flat: all 64 rollouts were
rewarded 0, partly on categories the SFT weights never verify. The filter keeps the scenarios where the SFT weights
sometimes succeed and sometimes not: before GRPO, the SFT weights, served, play every train scenario
``learnable_samples`` times at GRPO's own temperature, and a scenario whose samples' rewards differ is kept (the
prompt filtering of DAPO's dynamic sampling, done once before training, since TRL's trainer cannot resample a group).
Only train scenarios are played; dev and holdout are not read. The probe is an ordinary evaluation run (records,
summary, provenance) under ``OUT/train-sft-probe``.
"""

from __future__ import annotations

from dataclasses import dataclass

from rehearsal_env.measure import load_run


@dataclass(frozen=True)
class Learnable:
    """What the probe found: the scenarios GRPO trains on, and each probed scenario's rewards."""

    kept: tuple[str, ...]
    """The train scenarios whose samples' rewards differ (GRPO's dataset), in the world's order."""
    rewards: dict[str, tuple[float, ...]]
    """Each probed scenario -> its samples' rewards (not-scored samples left out)."""
    probe_run: str
    """The probe's run directory."""

    def line(self, samples: int, temperature: float) -> str:
        """The report's line: what was kept, out of how many, and why."""
        constant = sorted({r[0] for r in self.rewards.values() if r and len(set(r)) == 1})
        return (f"GRPO's scenarios (learnability filter on train, {samples} samples each at {temperature}): "
                f"{len(self.kept)} of {len(self.rewards)} train scenarios had samples that differed in reward: "
                f"{', '.join(self.kept) or 'none, so GRPO trained on every train scenario'}; the others' samples all "
                f"got one reward ({', '.join(f'{v:g}' for v in constant) or '-'}); probe run {self.probe_run}")


def learnable(probe_run: str, train: list[str]) -> Learnable:
    """The scenarios of ``train`` whose samples in ``probe_run`` (one agent, each scenario played several times)
    differ in reward.

    Raises:
        ValueError: the run holds not one agent's episodes.
    """
    runs = load_run(probe_run)
    if len(runs) != 1:
        raise ValueError(f"expected one agent's episodes in the probe run {probe_run}, got {len(runs)}")
    per = {s: tuple(float(x) for x in v) for s, v in runs[0].per_scenario("reward").items()}
    rewards = {s: per.get(s, ()) for s in train}
    kept = tuple(s for s in train if len(set(rewards[s])) > 1)
    return Learnable(kept, rewards, probe_run)
