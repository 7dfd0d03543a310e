"""``rehearsal replay``: a recorded episode up to turn k, then another agent from there (the counterfactual).

The recorded episode is played again on a fresh env of the same world version (its seed, stress and
reward profile) with its own actions, each observation checked against the record; at turn k the episode
is forked (``env.fork()``) and the other agent plays the fork to its end. The new episode's record names
the recorded one (``episode_id``, or ``RUN/SCENARIO/AGENT/REPEAT`` when it had none) and k as its parent;
it is printed as a summary and, with ``--out``, appended to a JSON-lines file.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from .._version import __version__
from ..agents import make_agent
from ..env import RehearsalEnv
from ..identity import world_version
from ..records import EpisodeRecord, read_records, record_episode, to_row
from ..worlds import load_world


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "replay", help="replay a recorded episode up to turn K, then let another agent play on (a counterfactual)",
        description="Play the recorded episode SCENARIO (repeat R) of RUN_DIR again up to turn K, checking every "
                    "observation against the record, then fork it and let AGENT play the fork to its end. The new "
                    "episode is recorded with the recorded one and K as its parent.")
    p.add_argument("run_dir", type=Path, help="a run directory (rehearsal run --out)")
    p.add_argument("--scenario", required=True, help="the recorded episode's scenario id")
    p.add_argument("--repeat", type=int, default=0, help="which repeat of it (default 0)")
    p.add_argument("--from-agent", default=None, help="the recorded agent, when the run has several")
    p.add_argument("--turn", type=int, required=True, help="K: replay turns 1..K, then hand over (0: at once)")
    p.add_argument("--agent", required=True, help="who plays on: reference, null or wrong:<name>")
    p.add_argument("--backend", default=None, help="database backend (default: the record's)")
    p.add_argument("--out", type=Path, default=None, help="append the new episode's record to this JSON-lines file")
    p.set_defaults(handler=handle)


def _recorded(args: argparse.Namespace) -> EpisodeRecord:
    found = [r for r in read_records(args.run_dir) if r.scenario == args.scenario and r.repeat == args.repeat
             and (args.from_agent is None or r.agent == args.from_agent)]
    if not found:
        raise ValueError(f"{args.run_dir} has no episode of scenario {args.scenario!r}, repeat {args.repeat}"
                         f"{'' if args.from_agent is None else f' by agent {args.from_agent!r}'}; "
                         "see its summary.json for what it holds")
    if len(found) > 1:
        raise ValueError(f"{args.run_dir} has {len(found)} such episodes (agents "
                         f"{', '.join(sorted(r.agent for r in found))}); pick one with --from-agent")
    return found[0]


def replay_to(record: EpisodeRecord, turn: int, backend: str) -> tuple[RehearsalEnv, str, dict[str, Any]]:
    """A fresh env of ``record``'s world, scenario and seed, stepped through its first ``turn`` actions
    (each observation checked against the record): (env, last observation, reset info)."""
    if not 0 <= turn < len(record.trace):
        raise ValueError(f"--turn must be 0..{len(record.trace) - 1}: the recorded episode ended at turn "
                         f"{len(record.trace)}, and an ended episode cannot be played on; got {turn}")
    world = load_world(record.world)
    have = world_version(world)
    if have != record.world_version:
        raise ValueError(f"the episode was recorded on world version {record.world_version} of {record.world!r}; "
                         f"this installation has {have}: replay it where that version is installed")
    env = RehearsalEnv(record.scenario, world, backend=backend, stress=record.stress)
    observation, info = env.reset(seed=record.seed)
    env.episode.id = record.episode_id or f"{record.run_id}/{record.scenario}/{record.agent}/{record.repeat}"
    for step in record.trace[:turn]:
        observation, *_ = env.step(step.action)
        if observation != step.observation:
            env.close()
            raise ValueError(f"turn {step.turn} of the replay differs from the record (the recorded action was cut "
                             "short, or the episode was not played by this env's rules); cannot hand over after it")
    return env, observation, info


def handle(args: argparse.Namespace) -> int:
    record = _recorded(args)
    env, observation, info = replay_to(record, args.turn, args.backend or record.backend)
    branch = env.fork()
    env.close()
    agent = make_agent(args.agent, branch.scenario)
    while True:
        observation, reward, terminated, truncated, info = branch.step(agent(observation, info))
        if terminated or truncated:
            break
    new = record_episode(branch.episode, run_id=f"replay-{record.run_id}", agent=args.agent,
                         agent_version=f"builtin-{__version__}", repeat=record.repeat, seed=record.seed,
                         backend=branch.backend, stress=branch.stress, provenance=branch.provenance())
    branch.close()
    print(f"{record.scenario}: recorded by {record.agent} -> {record.outcome} in {record.turns} turns; "
          f"turns 1..{args.turn} replayed, then {args.agent} -> {new.outcome} in {new.turns} turns "
          f"(parent {new.parent_episode} at turn {new.parent_turn})")
    if args.out is not None:
        with args.out.open("a", encoding="utf-8") as out:
            out.write(json.dumps(to_row(new), sort_keys=True, default=str) + "\n")
    return 0
