"""What per-turn rewards cost a step: the ``rl_turns`` profile (goal checks after every turn) against ``rl``.

Usage::

    flock /tmp/bench.lock .venv/bin/python benchmarks/shaping.py [--world shop] [--rounds 5]

``rl_turns`` runs the scenario's goal checks (read-only SQL) after every turn to pay the change in the share that
passes; ``rl``, the obvious alternative, runs them at the end only. Both play every train scenario of the world with
the reference solution (no stress), in alternating rounds. Printed: the median per-step milliseconds of each, the
ratio and the extra share of a step (the goal: at most 5%).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import rehearsal_env


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--world", default="shop")
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    world = rehearsal_env.load_world(args.world)
    scenarios = world.scenarios("train")
    envs = {profile: {s.id: rehearsal_env.RehearsalEnv(s, world, stress=False, reward_profile=profile)
                      for s in scenarios} for profile in ("rl", "rl_turns")}

    def play(profile: str) -> float:
        steps, spent = 0, 0.0
        for s in scenarios:
            env = envs[profile][s.id]
            env.reset(seed=0)
            for call in s.reference.calls:
                action = json.dumps({"tool": call.tool, "args": dict(call.args)})
                began = time.perf_counter()
                env.step(action)
                spent += time.perf_counter() - began
                steps += 1
        return spent * 1000 / steps

    play("rl"), play("rl_turns")  # warm
    times: dict[str, list[float]] = {"rl": [], "rl_turns": []}
    for _ in range(args.rounds):
        for profile in times:
            times[profile].append(play(profile))
    rl, turns = statistics.median(times["rl"]), statistics.median(times["rl_turns"])
    goals = sum(len(s.goal_checks) for s in scenarios) / len(scenarios)
    print(f"{args.world}: {len(scenarios)} train scenarios, reference solutions, {goals:.1f} goal checks each "
          "on average")
    print(f"  rl        {rl:7.3f} ms/step (median of {args.rounds})")
    print(f"  rl_turns  {turns:7.3f} ms/step")
    print(f"  rl_turns / rl = {turns / rl:.2f}x; per-turn checks add {100 * (turns - rl) / rl:.1f}% to a step "
          f"(goal: at most 5%)")


if __name__ == "__main__":
    main()
