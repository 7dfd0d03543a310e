"""The resolution floor of a learn.py run, read afterwards: one arm's weights replayed on holdout with more repeats.

    python training/holdout_floor.py --out runs/learn-analytics --repeats 5 --reread-holdout

When an arm's holdout repeats all agreed (a model that samples the same reply at a low temperature),
measure.py gives no floor ("unknown, not zero") and asks for 5 repeats or more. This plays the arm's
profile version and GGUF file from ``--out`` (those learn.py registered and wrote) on the same holdout
scenarios ``--repeats`` times, into ``--out/holdout-ARM-repeatsK``, and compares it with the base's holdout
run as learn.py does. It is another reading of holdout by the same weights: like learn.py it refuses
without ``--reread-holdout``, counts the reading in ``--out/holdout-read.json`` and prints how many there were.
No choice may depend on it: it measures the floor of weights already chosen.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

import learn
from preregistration import Registered, record_reading

import rehearsal_env
from rehearsal_env.agents import ProfileStore
from rehearsal_env.measure import compare, format_comparison, load_run


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="a learn.py --out directory whose holdout was read")
    p.add_argument("--arm", default="sft+grpo", choices=learn.ARMS)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--reread-holdout", action="store_true", help="required: this reads holdout again")
    mine = p.parse_args(argv)
    out = Path(mine.out)
    if not mine.reread_holdout:
        raise SystemExit("holdout_floor.py: error: this reads holdout again with the same weights; pass "
                         "--reread-holdout (the reading is counted in holdout-read.json and printed)")
    folder = mine.arm.replace("+", "-")
    marker = out / "holdout-read.json"
    if not marker.exists() or not (out / f"holdout-{folder}" / "run.json").exists():
        raise SystemExit(f"holdout_floor.py: error: expected a learn.py --out whose holdout was read (with "
                         f"{marker.name} and holdout-{folder}/); {out} has not; run learn.py first")
    played = json.loads((out / f"holdout-{folder}" / "run.json").read_text())["config"]  # what learn.py ran
    profile = ProfileStore(out / "profiles").get(f"{played['agent']}@{played['agent_version']}")
    report = out / "report.json"
    config = json.loads(report.read_text()).get("config") if report.exists() else None
    registered = Registered(**config) if config else None  # the reading counts against the run's own config
    reads = record_reading(marker, registered, True)
    args = learn.parse_args(["--world", played["world"], "--out", str(out), "--seed", str(played["seed"]),
                             "--profile", str(played["reward_profile"])])
    world = rehearsal_env.load_world(args.world)
    gguf = out / "models" / f"{learn.WEIGHTS[mine.arm]}.gguf"
    with contextlib.closing(learn.Servers(out, args.threads)) as servers:
        result = learn.evaluate(profile, gguf, f"{mine.arm}-repeats{mine.repeats}", "holdout",
                                list(played["scenarios"]), servers.url(gguf), out, args, world, repeats=mine.repeats)
    cmp = compare(load_run(result["run"])[0], load_run(out / "holdout-base")[0], force=True)
    print(f"HOLDOUT READ {reads} TIMES for {out}: a reading of weights already chosen, for the floor", flush=True)
    print(format_comparison(cmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
