"""REINFORCE over scripted behaviours on rehearsal-env, readable top to bottom (cleanrl style).

The smallest honest RL loop on the envs: the "policy" chooses, for each
scenario, one of the behaviours the scenario ships (its reference solution and
its named careless solutions, ``wrong:*``), as a softmax over one logit per
(category, behaviour name). It is trained with REINFORCE and a running baseline
on the **train** split only, and evaluated on **holdout**, which it never sees.
The reward is the env's reward: the outcome reward, or a reward profile
(``--profile rl``) where safety is a gate.

    python training/reinforce_behaviours.py --world shop --iterations 30

Swap ``choose`` for a language model's policy and the loop stays the same:
reset, act until the episode ends, read the reward, update.
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import numpy as np

import rehearsal_env
from rehearsal_env.agents import ScriptedAgent
from rehearsal_env.runner import run_episode


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--world", default="shop")
    p.add_argument("--iterations", type=int, default=30, help="passes over the train split")
    p.add_argument("--lr", type=float, default=0.5, help="learning rate of the logits")
    p.add_argument("--profile", default=None, help="reward profile (default: the outcome reward)")
    p.add_argument("--seed", type=int, default=1)
    return p.parse_args()


def main() -> None:
    args = parse_args()
    rng = np.random.default_rng(args.seed)
    world = rehearsal_env.load_world(args.world)
    train, holdout = world.scenarios("train"), world.scenarios("holdout")
    envs = {s.id: rehearsal_env.RehearsalEnv(s, world, profile=args.profile) for s in (*train, *holdout)}
    logits: dict[tuple[str, str], float] = defaultdict(float)  # (category, behaviour) -> logit

    def behaviours(scenario: rehearsal_env.Scenario) -> list[str]:
        return [scenario.reference.name, *(w.name for w in scenario.wrong)]

    def probabilities(scenario: rehearsal_env.Scenario) -> np.ndarray:
        z = np.array([logits[(scenario.category, b)] for b in behaviours(scenario)])
        e = np.exp(z - z.max())
        return e / e.sum()

    def choose(scenario: rehearsal_env.Scenario) -> int:
        p = probabilities(scenario)
        return int(rng.choice(len(p), p=p))

    def play(scenario: rehearsal_env.Scenario, index: int, seed: int) -> tuple[float, str]:
        name = behaviours(scenario)[index]
        result = run_episode(envs[scenario.id], ScriptedAgent(scenario.solution(name)), seed=seed)
        return result.reward, result.verdict.outcome.value

    def evaluate(scenarios: tuple[rehearsal_env.Scenario, ...]) -> float:
        """The policy's expected verified rate: each behaviour played once, weighted by its probability."""
        expected = 0.0
        for s in scenarios:
            for j, p in enumerate(probabilities(s)):
                expected += p * (play(s, j, seed=0)[1] == "verified")
        return expected / len(scenarios)

    print(f"world={world.name} train={len(train)} holdout={len(holdout)} profile={args.profile or 'outcome'}")
    print(f"before training: expected holdout verified rate {evaluate(holdout):.0%}")
    baseline = 0.0
    for iteration in range(1, args.iterations + 1):
        rewards = []
        for scenario in train:
            index = choose(scenario)
            reward, _ = play(scenario, index, seed=iteration)
            rewards.append(reward)
            advantage = reward - baseline
            p = probabilities(scenario)
            for j, name in enumerate(behaviours(scenario)):  # d log softmax / d logit_j = 1[j=i] - p_j
                logits[(scenario.category, name)] += args.lr * advantage * ((j == index) - p[j])
        baseline = 0.9 * baseline + 0.1 * float(np.mean(rewards))
        if iteration % 5 == 0 or iteration == 1:
            print(f"iteration {iteration:3d}: mean train reward {np.mean(rewards):+.3f}")
    print(f"after training:  expected holdout verified rate {evaluate(holdout):.0%}")
    for env in envs.values():
        env.close()


if __name__ == "__main__":
    main()
