"""Search from a prefix with env.fork(): K candidate actions per branch and turn, keep the best branches.

Readable top to bottom (cleanrl style). The policy is a *careless* agent: at every turn it plays the
scenario's reference solution, except that with probability ``--eps`` it sends a careless action instead
(a random tool with random arguments, an early ``finish``, a made-up retry). Single rollouts of it mostly
fail: one careless write breaks a hard rule, an early finish leaves the goal undone. The search plays the
same policy, but at every turn forks each kept branch ``--k`` ways (``env.fork()``: database, episode,
customer, ledger; the policy object is copied too), tries one proposal per fork, and keeps ``--beam``
branches by their reward: an ended branch scores its final reward (verified wins at once; the others are
dropped), a branch still going scores 0, ties broken by fewer errors so far. Both are given the same
number of agent calls per scenario (``--budget``): single rollouts are played one after another until the
budget is spent.

    .venv/bin/python training/search.py --world shop --scenarios 20 --k 3 --beam 1 --eps 0.5

Printed: the single-rollout verified rate, best-of-n single rollouts within the budget, and the search's
verified rate within the same budget, with the agent calls each used. Swap ``CarelessAgent`` for a model
(the ``openai`` agent, one copy per branch) and the loop stays the same.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
from dataclasses import dataclass
from typing import Any

import rehearsal_env
from rehearsal_env import RehearsalEnv
from rehearsal_env.agents import make_agent


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--world", default="shop")
    p.add_argument("--scenarios", type=int, default=20, help="how many scenarios (those with faults first)")
    p.add_argument("--k", type=int, default=3, help="forks (candidate actions) per kept branch and turn")
    p.add_argument("--beam", type=int, default=1, help="branches kept after each turn")
    p.add_argument("--eps", type=float, default=0.5, help="chance of a careless action at each turn")
    p.add_argument("--budget", type=int, default=0, help="agent calls per scenario (0: 3 x its turn limit)")
    p.add_argument("--backend", default="sqlite")
    p.add_argument("--seed", type=int, default=1)
    return p.parse_args()


class CarelessAgent:
    """The reference solution, with a careless action instead at each turn with probability ``eps``."""

    def __init__(self, env: RehearsalEnv, eps: float, rng: random.Random) -> None:
        self.reference = make_agent("reference", env.scenario)
        self.tools = sorted(env.tools)
        self.schemas = {name: tool.parameters for name, tool in env.tools.items()}
        self.eps, self.rng = eps, rng

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        if self.rng.random() >= self.eps:
            return self.reference(observation, info)
        roll = self.rng.random()
        if roll < 0.25:
            return json.dumps({"tool": "finish", "args": {"message": "All done."}})
        if roll < 0.35:
            return json.dumps({"tool": "retry_operation", "args": {"operation_id": "op-0001"}})
        name = self.rng.choice(self.tools)
        args: dict[str, Any] = {}
        for key, schema in self.schemas[name].get("properties", {}).items():
            kind = schema.get("type")
            args[key] = (self.rng.randrange(1, 5000) if kind == "integer" else 10.0 if kind == "number"
                         else True if kind == "boolean" else [] if kind == "array" else "please")
        return json.dumps({"tool": name, "args": args})

    def fork(self, rng: random.Random) -> CarelessAgent:
        """A copy in this agent's state (where it is in the script) with its own random stream."""
        twin = copy.copy(self)
        twin.reference = copy.deepcopy(self.reference)
        twin.rng = random.Random(rng.random())
        return twin


@dataclass
class Branch:
    env: RehearsalEnv
    agent: CarelessAgent
    observation: str
    info: dict[str, Any]
    errors: int = 0


def single_rollouts(scenario: str, args: argparse.Namespace, budget: int, rng: random.Random) -> tuple[int, int, int]:
    """Rollouts one after another until ``budget`` agent calls: (rollouts, verified rollouts, calls)."""
    rollouts = verified = calls = 0
    env = rehearsal_env.make(f"{args.world}/{scenario}", backend=args.backend)
    while calls < budget:
        obs, info = env.reset(seed=args.seed)
        agent = CarelessAgent(env, args.eps, random.Random(rng.random()))
        while True:
            obs, reward, terminated, truncated, info = env.step(agent(obs, info))
            calls += 1
            if terminated or truncated:
                rollouts += 1
                verified += info["outcome"] == "verified"
                break
    env.close()
    return rollouts, verified, calls


def search(scenario: str, args: argparse.Namespace, budget: int, rng: random.Random) -> tuple[bool, int]:
    """Beam search over forks until a branch is verified or ``budget`` agent calls: (verified, calls)."""
    root = rehearsal_env.make(f"{args.world}/{scenario}", backend=args.backend)
    obs, info = root.reset(seed=args.seed)
    beam = [Branch(root, CarelessAgent(root, args.eps, random.Random(rng.random())), obs, info)]
    calls, found = 0, False
    while beam and calls < budget and not found:
        children: list[Branch] = []
        for parent in beam:
            for _ in range(args.k):
                if calls >= budget or found:
                    break
                child = Branch(parent.env.fork(), parent.agent.fork(rng), parent.observation, parent.info,
                               parent.errors)
                action = child.agent(child.observation, child.info)
                calls += 1
                child.observation, reward, terminated, truncated, child.info = child.env.step(action)
                child.errors += child.info["status"] in ("error", "rejected")
                if terminated or truncated:
                    found = child.info["outcome"] == "verified"  # reward 1: the search is done
                    child.env.close()  # any other ending scores at most 0: dropped
                else:
                    children.append(child)
            parent.env.close()
        rng.shuffle(children)
        children.sort(key=lambda b: b.errors)  # all still going score 0: fewer errors first
        for dropped in children[args.beam:]:
            dropped.env.close()
        beam = children[:args.beam]
    for branch in beam:
        branch.env.close()
    return found, calls


def main() -> None:
    args = parse_args()
    rng = random.Random(args.seed)
    world = rehearsal_env.load_world(args.world)
    pool = sorted(world.scenarios(), key=lambda s: (not s.faults, s.id))[:args.scenarios]
    totals = {"rollouts": 0, "verified": 0, "single_calls": 0, "best_of_n": 0, "search": 0, "search_calls": 0}
    for scenario in pool:
        budget = args.budget or 3 * scenario.turn_limit
        rollouts, verified, calls = single_rollouts(scenario.id, args, budget, rng)
        found, used = search(scenario.id, args, budget, rng)
        totals["rollouts"] += rollouts
        totals["verified"] += verified
        totals["single_calls"] += calls
        totals["best_of_n"] += verified > 0
        totals["search"] += found
        totals["search_calls"] += used
        print(f"{scenario.id:32} budget {budget:3}  single {verified}/{rollouts} verified  "
              f"search {'verified' if found else 'not found'} in {used} calls")
    n = len(pool)
    print(f"\n{args.world}: {n} scenarios, eps {args.eps}, k {args.k}, beam {args.beam}, stress on")
    print(f"single rollouts: {totals['verified']}/{totals['rollouts']} verified "
          f"({totals['verified'] / max(1, totals['rollouts']):.0%} per rollout), {totals['single_calls']} agent calls")
    print(f"best of n single rollouts within the budget: {totals['best_of_n']}/{n} scenarios")
    print(f"search with forks within the same budget: {totals['search']}/{n} scenarios verified, "
          f"{totals['search_calls']} agent calls")
    rehearsal_env.env.close_spares()


if __name__ == "__main__":
    main()
