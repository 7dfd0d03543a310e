"""``rehearsal run``: play a built-in agent over a world's scenarios and summarize."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from ..backends import BACKENDS
from ..clock import CLI
from ..runner import RunConfig, format_table, run


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("run", help="run an agent over a world's scenarios",
                       description="Run episodes, print a summary table, write DIR/summary.json and records.")
    p.add_argument("--world", required=True, help="world name (see `rehearsal world list`)")
    p.add_argument("--agent", default="reference", help="reference, null or wrong:<name> (default: reference)")
    p.add_argument("--split", choices=("train", "dev", "holdout"), help="only this split (default: all)")
    p.add_argument("--scenario", action="append", default=[], help="only this scenario id (repeatable)")
    p.add_argument("--repeats", type=int, default=1, help="episodes per scenario (default: 1)")
    p.add_argument("--seed", type=int, default=0, help="base reset seed (default: 0)")
    p.add_argument("--backend", choices=BACKENDS, default="sqlite", help="database backend (default: sqlite)")
    p.add_argument("--dsn", help="PostgreSQL server to use (default: $REHEARSAL_POSTGRES_DSN, else a private one)")
    p.add_argument("--no-stress", action="store_true", help="switch the stress layer off")
    p.add_argument("--profile", help="reward profile (benchmark or rl; default: the outcome reward)")
    p.add_argument("--freeze-time", metavar="DATE",
                   help="pin what the env calls now, and the day the data is seeded for, to DATE (YYYY-MM-DD; "
                        "default: the world's own data_anchor)")
    p.add_argument("--agent-version", help="the agent's version stamped on every record "
                                           "(default: builtin-<package version> for a built-in agent)")
    p.add_argument("--out", default=None, help="run directory (default: runs/<run id>)")
    p.set_defaults(handler=handle)


def _stamp(args: argparse.Namespace) -> dict[str, Any]:
    """What the run stamps on every record besides its config: who pinned the clock, the agent's version."""
    return {"freeze_time": args.freeze_time, "freeze_time_source": CLI, "agent_version": args.agent_version}


def handle(args: argparse.Namespace) -> int:
    if args.repeats < 1:
        raise ValueError(f"--repeats must be at least 1, got {args.repeats}")
    options = {}
    if args.backend == "postgres":
        dsn = args.dsn or os.environ.get("REHEARSAL_POSTGRES_DSN")
        if dsn:
            options["dsn"] = dsn
    elif args.dsn:
        raise ValueError("--dsn only applies to --backend postgres")
    config = RunConfig(world=args.world, agent=args.agent, split=args.split, scenarios=tuple(args.scenario),
                       repeats=args.repeats, seed=args.seed, backend=args.backend, backend_options=options,
                       stress=not args.no_stress, profile=args.profile, **_stamp(args))
    out = Path(args.out or Path("runs") / config.run_id)
    summary = run(config, out)
    print(f"run {config.run_id}: world={config.world} agent={config.agent} split={config.split or 'all'} "
          f"repeats={config.repeats} backend={config.backend}")
    print(format_table(summary))
    print(f"\nwrote {out / 'summary.json'} and {out / 'episodes.parquet'}/")
    return 0
