"""What per-turn rewards cost a step: the ``rl_turns`` profile (goal checks after every turn) against ``rl``.

Usage::

    flock /tmp/bench.lock .venv/bin/python benchmarks/shaping.py [--world shop] [--rounds 20] [--backend postgres]

Before and after a change in one run: run this script with ``PYTHONPATH`` set to each tree in turn (the script uses
the public interface alone), e.g. ``PYTHONPATH=/work/before`` then ``PYTHONPATH=.``, interleaved.

``rl_turns`` runs the scenario's goal checks (read-only SQL) after every turn to pay the change in the share that
passes; ``rl``, the obvious alternative, runs them at the end only. Both play every train scenario of the world with
the reference solution (no stress), in alternating rounds. Printed: the median per-step milliseconds of each, the
ratio and the extra share of a step (the goal: at most 5%). Steps are timed in this process's CPU time
(``time.process_time``), which the machine's other work does not inflate as it does wall time.
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
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--backend", default="sqlite", choices=("sqlite", "postgres"))
    args = p.parse_args()
    world = rehearsal_env.load_world(args.world)
    scenarios = world.scenarios("train")
    envs = {profile: {s.id: rehearsal_env.RehearsalEnv(s, world, backend=args.backend, stress=False,
                                                                  reward_profile=profile)
                      for s in scenarios} for profile in ("rl", "rl_turns")}

    def play(profile: str, s: rehearsal_env.Scenario) -> float:
        """CPU seconds the steps of one reference episode took."""
        env = envs[profile][s.id]
        env.reset(seed=0)
        spent = 0.0
        for call in s.reference.calls:
            action = json.dumps({"tool": call.tool, "args": dict(call.args)})
            began = time.process_time()  # CPU time: on a shared machine, wall time would time the neighbours
            env.step(action)
            spent += time.process_time() - began
        return spent

    steps = sum(len(s.reference.calls) for s in scenarios)
    ratios: list[float] = []
    times: dict[str, list[float]] = {"rl": [], "rl_turns": []}
    for round_ in range(args.rounds + 1):  # round 0 warms up
        spent = {"rl": 0.0, "rl_turns": 0.0}
        for i, s in enumerate(scenarios):  # each episode back to back under both profiles, the order alternating
            for profile in (("rl", "rl_turns") if (i + round_) % 2 else ("rl_turns", "rl")):
                spent[profile] += play(profile, s)
        if round_:
            for profile in times:
                times[profile].append(spent[profile] * 1000 / steps)
            ratios.append(spent["rl_turns"] / spent["rl"])
    rl, turns, ratio = statistics.median(times["rl"]), statistics.median(times["rl_turns"]), statistics.median(ratios)
    goals = sum(len(s.goal_checks) for s in scenarios) / len(scenarios)
    print(f"{args.world} ({args.backend}; {rehearsal_env.__file__}): {len(scenarios)} train scenarios, reference "
          f"solutions, {steps} steps, {goals:.1f} goal checks each on average")
    print(f"  rl        {rl:7.3f} CPU ms/step (median of {args.rounds} rounds)")
    print(f"  rl_turns  {turns:7.3f} CPU ms/step")
    print(f"  rl_turns / rl = {ratio:.3f}x (median of the rounds' ratios, episodes paired); per-turn checks add "
          f"{100 * (ratio - 1):.1f}% to a step (goal: at most 5%)")
    for by_id in envs.values():
        for env in by_id.values():
            env.close()


if __name__ == "__main__":
    main()
