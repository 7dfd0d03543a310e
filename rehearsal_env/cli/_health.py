"""``rehearsal health``: the provenance blob of a world as served (what a run would stamp)."""

from __future__ import annotations

import argparse
import json

from ..clock import CLI, freeze_time_source, frozen_world
from ..provenance import provenance_of
from ..worlds import load_world
from ._renamed import add_reward_profile


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "health", help="the provenance of a world: everything needed to compare numbers measured on it",
        description="Print the provenance JSON blob a run of WORLD would write into provenance.json and "
                    "stamp on every record: reward contract, dataset hashes, suite, capabilities, build. "
                    "Exit code 1 when capabilities.catalog_match is false (catalog_problems says why).")
    p.add_argument("--world", required=True, help="world name (see `rehearsal world list`)")
    add_reward_profile(p, help="reward profile (benchmark or rl; default: the outcome reward)")
    p.add_argument("--freeze-time", metavar="DATE", help="pin the clock and the seeded day to DATE (YYYY-MM-DD)")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    world = frozen_world(load_world(args.world), args.freeze_time)
    blob = provenance_of(world, args.reward_profile, freeze_time_source(args.freeze_time, CLI)).to_dict()
    print(json.dumps(blob, indent=2, sort_keys=True))
    return 0 if blob["capabilities"]["catalog_match"] else 1
