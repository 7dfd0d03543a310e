"""``rehearsal world list|show``: describe worlds, their tools and scenarios."""

from __future__ import annotations

import argparse
import json

from ..worlds import load_world, world_names


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("world", help="list and describe worlds")
    wsub = p.add_subparsers(dest="world_command", required=True, metavar="WORLD_COMMAND")
    ls = wsub.add_parser("list", help="the registered worlds")
    ls.set_defaults(handler=handle_list)
    show = wsub.add_parser("show", help="a world's tools, roles, policies and scenarios")
    show.add_argument("name")
    show.add_argument("--json", action="store_true", help="print JSON")
    show.set_defaults(handler=handle_show)


def handle_list(args: argparse.Namespace) -> int:
    for name in world_names():
        world = load_world(name)
        print(f"{name:<12} {len(world.scenarios()):>4} scenarios  {world.description}")
    return 0


def handle_show(args: argparse.Namespace) -> int:
    world = load_world(args.name)
    info = world.describe()
    if args.json:
        info["scenario_list"] = [{"id": s.id, "split": s.split, "category": s.category, "role": s.role,
                                  "request": s.request} for s in world.scenarios()]
        print(json.dumps(info, indent=2))
        return 0
    print(f"world {world.name} (data anchor {info['data_anchor']})\n  {world.description}\n")
    print("tables:")
    for table, rows in info["tables"].items():
        print(f"  {table:<18} {rows:>6} rows")
    print("\ntools:")
    for t in world.tools:
        print(f"  {t.name:<24} {t.kind:<5}  {t.description}")
    print("\nroles:")
    for role in world.roles:
        print(f"  {role.name:<16} {', '.join(role.tools)}")
    print("\npolicies:")
    for policy in world.policies:
        print(f"  - {policy.text}")
    print(f"\nscenarios: {info['scenarios']}")
    for s in world.scenarios():
        print(f"  {s.id:<28} {s.split:<8} {s.category:<13} {s.request[:70]}")
    return 0
