"""``rehearsal readiness RUN_DIR...``: "Ready to pilot" or "Needs work" per agent and world version."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from ..readiness import MAX_NOT_SCORED_SHARE, assess_runs, format_readiness
from ..records import trusted_keys


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("readiness", help="is an agent version ready to pilot on a world version?",
                       description="Read the episode records of one or more runs and say, per agent version "
                       "and world version, 'Ready to pilot' or 'Needs work' with the reasons.")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories (with episodes.parquet/)")
    p.add_argument("--improved", action="store_true",
                   help="the agent version came from an improvement step: count holdout episodes only")
    p.add_argument("--versions", metavar="DIR",
                   help="published world versions (default: $REHEARSAL_WORLD_VERSIONS, else "
                   "$REHEARSAL_HOME/world_versions)")
    p.add_argument("--max-not-scored", type=float, default=MAX_NOT_SCORED_SHARE, metavar="SHARE",
                   help="largest share of the counted episodes that may be not scored before the verdict is "
                   f"'Needs work' (default {MAX_NOT_SCORED_SHARE})")
    p.add_argument("--trust", action="append", default=[], metavar="PUBLIC_KEY",
                   help="also accept seals made with this public key (ed25519:...; repeatable); a run whose "
                   "seal is missing, broken or by an untrusted key makes its verdict 'Needs work'")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    verdicts = assess_runs(args.run_dirs, trusted=trusted_keys(args.trust), improved=args.improved,
                           versions_root=args.versions, max_not_scored_share=args.max_not_scored)
    if args.json:
        print(json.dumps([{**asdict(v), "label": v.label, "not_scored_share": v.not_scored_share}
                          for v in verdicts], indent=2))
    else:
        print("\n\n".join(format_readiness(v) for v in verdicts))
    return 0
