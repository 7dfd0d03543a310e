"""What recording costs a trainer's episode: TRL's environment class with and without a run directory.

Usage::

    flock /tmp/bench.lock .venv/bin/python benchmarks/trainer_recording.py [--episodes 320] [--rounds 5]

Every episode a trainer's adapter plays (TRL, OpenEnv, verifiers) is recorded, sealed, into a run directory
(``integrations/_recording.py``: buffered, a part every 32 episodes or 30 s). Two classes of shop's train split play
the same episodes, the reference calls of ``refund-item-0001`` then ``get_reward``, in alternating rounds:

* **recorded**: the default, ``out=DIR``; the time includes the flushes (parts, summary, seal) as they fall, and the
  final flush;
* **unrecorded**: ``out=None``, the obvious alternative (what the adapters did before they recorded).

Printed: the median per-episode milliseconds of each over ``--rounds`` rounds, the ratio recorded / unrecorded,
and the extra milliseconds per episode.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import rehearsal_env
from rehearsal_env.integrations._recording import flush_all
from rehearsal_env.integrations.trl import environment_class


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--episodes", type=int, default=320, help="episodes per round and kind (default 320)")
    p.add_argument("--rounds", type=int, default=5, help="rounds of each kind, alternating (default 5)")
    args = p.parse_args()
    world = rehearsal_env.load_world("shop")
    calls = [(c.tool, dict(c.args)) for c in world.scenario("refund-item-0001").reference.calls]
    with tempfile.TemporaryDirectory(prefix="rehearsal-bench-trainer-") as tmp:
        kinds: dict[str, Any] = {
            "recorded": environment_class(world, "train", stress=False, out=str(Path(tmp) / "runs")),
            "unrecorded": environment_class(world, "train", stress=False, out=None)}
        envs = {name: cls() for name, cls in kinds.items()}
        times: dict[str, list[float]] = {name: [] for name in kinds}

        def play(name: str) -> float:
            env = envs[name]
            began = time.perf_counter()
            for seed in range(args.episodes):
                env.reset(scenario="refund-item-0001", seed=seed)
                for tool, call_args in calls:
                    getattr(env, tool)(**call_args)
                env.get_reward()
            flush_all()
            return (time.perf_counter() - began) * 1000 / args.episodes

        play("recorded"), play("unrecorded")  # warm both (databases opened, modules imported)
        for _ in range(args.rounds):
            for name in kinds:
                times[name].append(play(name))
        for env in envs.values():
            env._close()
        recorded, unrecorded = (statistics.median(times[k]) for k in ("recorded", "unrecorded"))
        parts = len(list((Path(tmp) / "runs").rglob("part-*.parquet")))
        print(f"{args.episodes} episodes x {args.rounds} rounds of shop refund-item-0001 (reference calls, no stress); "
              f"{parts} parts written")
        print(f"  unrecorded  {unrecorded:7.2f} ms/episode (median)")
        print(f"  recorded    {recorded:7.2f} ms/episode (median)")
        print(f"  recorded / unrecorded = {recorded / unrecorded:.2f}x; +{recorded - unrecorded:.2f} ms per episode")


if __name__ == "__main__":
    main()
