"""``rehearsal import tau2 --source DIR [--domains airline,retail]``: worlds from someone else's benchmark."""

from __future__ import annotations

import argparse

from ..importers.tau2 import DOMAINS, import_tau2


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("import", help="import another benchmark's tasks as worlds (read in place)")
    isub = p.add_subparsers(dest="import_command", required=True, metavar="BENCHMARK")
    t = isub.add_parser("tau2", help="tau2-bench's airline and retail domains as worlds tau2-airline, tau2-retail",
                        description="Pin every source file by SHA-256, derive the scenarios and checks, and record "
                        "the worlds in $REHEARSAL_HOME/imported.json; the data stays in DIR.")
    t.add_argument("--source", required=True, metavar="DIR", help="a tau2-bench checkout (data/tau2/domains/...)")
    t.add_argument("--domains", default=",".join(DOMAINS), help="comma-separated (default: airline,retail)")
    t.set_defaults(handler=handle_tau2)


def handle_tau2(args: argparse.Namespace) -> int:
    domains = [d.strip() for d in args.domains.split(",") if d.strip()]
    for world in import_tau2(args.source, domains):
        print(f"{world.name}: {world.tasks} tau2 tasks -> {world.scenarios} scenarios "
              f"({world.scenarios - world.tasks} fault variants of ours) in {world.seconds:.1f}s; "
              f"source hash {world.manifest_hash[:16]}")
        for f in world.files:
            print(f"  {f.status:<9} {f.name:<26} sha256 {f.sha256[:16]}  {f.note}")
    print(f"recorded in {world.state_file}; next: rehearsal world build {world.name}")
    return 0
