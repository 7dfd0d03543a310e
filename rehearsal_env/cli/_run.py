"""``rehearsal run``: play a built-in agent over a world's scenarios and summarize."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..backends import BACKENDS
from ..clock import CLI
from ..runner import RunConfig, RunStopped, format_table, load_config, run, run_on_ray
from ..worlds import backend_for, load_world
from ._models import add_model_options, with_model_options
from ._renamed import add_reward_profile


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("run", help="run an agent over a world's scenarios",
                       description="Run episodes, print a summary table, write DIR/summary.json and records.")
    p.add_argument("--world", help="world name (see `rehearsal world list`); required unless --resume")
    p.add_argument("--agent", default="reference",
                   help="reference, null, wrong:<name>, openai:MODEL, or a registered agent profile NAME[@vN] "
                        "(`rehearsal profile list`; default: reference)")
    p.add_argument("--split", choices=("train", "dev", "holdout"), help="only this split (default: all)")
    p.add_argument("--scenario", action="append", default=[], help="only this scenario id (repeatable)")
    p.add_argument("--repeats", type=int, default=1, help="episodes per scenario (default: 1)")
    p.add_argument("--seed", type=int, default=0, help="base reset seed (default: 0)")
    p.add_argument("--retries", type=int, default=2, metavar="N",
                   help="play an episode not scored for a failed part (database, provider, sandbox, worker) again up "
                        "to N times, each attempt recorded (0 to 10; default: 2)")
    p.add_argument("--backend", choices=BACKENDS, default=None,
                   help="database backend (default: what the world's tools need: sqlite, or docker for a world "
                        "whose tools call its application)")
    p.add_argument("--dsn", help="PostgreSQL server to use (default: $REHEARSAL_POSTGRES_DSN, else a private one)")
    p.add_argument("--no-stress", action="store_true", help="switch the stress layer off")
    add_reward_profile(p, help="reward profile (benchmark or rl; default: the outcome reward)")
    p.add_argument("--freeze-time", metavar="DATE",
                   help="pin what the env calls now, and the day the data is seeded for, to DATE (YYYY-MM-DD; "
                        "default: the world's own data_anchor)")
    p.add_argument("--agent-version", help="the agent's version stamped on every record "
                                           "(default: builtin-<package version> for a built-in agent)")
    p.add_argument("--out", default=None,
                   help="run directory (default: runs/<run id>); a run already there is replaced")
    p.add_argument("--workers", type=int, default=0,
                   help="Ray workers, each with its own database (default: 0, serial in this process)")
    p.add_argument("--ray-address", help="join this Ray cluster, HOST:PORT (default: start a local Ray for "
                                         "--workers); a cluster started by `ray start` with token auth needs "
                                         "RAY_AUTH_MODE=token in this environment too")
    p.add_argument("--batch-size", type=int, default=32,
                   help="episodes per worker call and part file (default: 32)")
    p.add_argument("--resume", metavar="DIR",
                   help="continue the run in DIR (stored plan and config), playing only unrecorded episodes")
    p.add_argument("--quiet", action="store_true", help="no progress bar (it shows on a terminal only)")
    add_model_options(p)
    p.set_defaults(handler=handle, shaping_defaults={name: p.get_default(name) for name in RUN_SHAPING})


def _backend_options(backend: str, dsn: str | None) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if backend == "postgres":
        dsn = dsn or os.environ.get("REHEARSAL_POSTGRES_DSN")
        if dsn:
            options["dsn"] = dsn
    elif dsn:
        raise ValueError("--dsn only applies to --backend postgres")
    return options


def _stamp(args: argparse.Namespace) -> dict[str, Any]:
    """What the run stamps on every record besides its config: who pinned the clock, the agent's version."""
    return {"freeze_time": args.freeze_time, "freeze_time_source": CLI, "agent_version": args.agent_version}


RUN_SHAPING = ("agent", "split", "scenario", "repeats", "seed", "backend", "no_stress", "reward_profile", "freeze_time",
               "agent_version", "batch_size", "customer")
"""Options that decide what a run is; a resumed run keeps the ones stored with it."""


def handle(args: argparse.Namespace) -> int:
    if args.repeats < 1:
        raise ValueError(f"--repeats must be at least 1, got {args.repeats}")
    if args.workers < 0 or args.batch_size < 1:
        raise ValueError(f"expected --workers >= 0 and --batch-size >= 1, "
                         f"got {args.workers} and {args.batch_size}")
    if args.resume:
        given = [f"--{n.replace('_', '-')}" for n, default in
                 {"out": None, "world": None, **args.shaping_defaults}.items() if getattr(args, n) != default]
        if given:
            raise ValueError("--resume DIR continues the run stored in DIR with its own world, plan and options; "
                             f"leave out {', '.join(given)}")
        out = Path(args.resume)
        config = load_config(out)
        config = replace(config, backend_options=_backend_options(config.backend, args.dsn))
        config = with_model_options(config, args, resume=True)
    else:
        if not args.world:
            raise ValueError("expected --world WORLD (see `rehearsal world list`), or --resume DIR")
        backend = args.backend or backend_for(load_world(args.world))
        config = RunConfig(world=args.world, agent=args.agent, split=args.split,
                           scenarios=tuple(args.scenario), repeats=args.repeats, seed=args.seed,
                           backend=backend, backend_options=_backend_options(backend, args.dsn),
                           stress=not args.no_stress, reward_profile=args.reward_profile, batch_size=args.batch_size,
                           retries=args.retries, **_stamp(args))
        config = with_model_options(config, args)
        out = Path(args.out or Path("runs") / config.run_id)
    resume, progress = bool(args.resume), not args.quiet
    if args.workers == 0 and args.ray_address:
        raise ValueError("--ray-address needs --workers N (N >= 1); without it the run is serial")
    try:
        if args.workers == 0:
            summary = run(config, out, resume=resume, progress=progress)
        else:
            summary = run_on_ray(config, out, workers=args.workers, address=args.ray_address, resume=resume,
                                 progress=progress)
    except (RunStopped, ConnectionError) as exc:
        print(f"rehearsal: error: {exc}", file=sys.stderr)
        return 1
    print(f"run {config.run_id}: world={config.world} agent={config.agent} split={config.split or 'all'} "
          f"repeats={config.repeats} backend={config.backend}")
    print(format_table(summary))
    print(f"\nwrote {out / 'summary.json'} and {out / 'episodes.parquet'}/")
    return 0
