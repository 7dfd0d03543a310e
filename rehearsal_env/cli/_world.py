"""``rehearsal world list|show|build|recheck|withdraw``: describe worlds; publish and recheck versions.

What only publishing needs (``..versions``, the model options' SDK) is imported by the command that uses it,
so ``world list`` and ``world show`` stay quick (see ``._world_list``)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..worlds import WorldFolderError, add_world_folder, application_of, load_world
from . import _compile
from ._models import add_live_options
from ._world_list import handle_list

VERSIONS_HELP = "published versions folder (default: $REHEARSAL_WORLD_VERSIONS, else $REHEARSAL_HOME/world_versions)"


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("world", help="list and describe worlds")
    wsub = p.add_subparsers(dest="world_command", required=True, metavar="WORLD_COMMAND")
    ls = wsub.add_parser("list", help="the registered worlds")
    ls.set_defaults(handler=handle_list)
    add = wsub.add_parser("add", help="add a world from a folder (world.toml + scenarios/*.toml)",
                          description="Validate a world folder (tables, seed data, tools, roles, every scenario) "
                          "and record it in $REHEARSAL_HOME/worlds.json under its name; a path also works "
                          "wherever a world name goes.")
    add.add_argument("folder", help="the folder holding world.toml")
    add.set_defaults(handler=handle_add)
    show = wsub.add_parser("show", help="a world's tools, roles, policies and scenarios")
    show.add_argument("name")
    show.add_argument("--json", action="store_true", help="print JSON")
    show.add_argument("--html", metavar="FILE", help="write the published version's world page as HTML")
    show.add_argument("--markdown", metavar="FILE", help="write the world page as Markdown ('-': print it)")
    show.add_argument("--versions", metavar="DIR", help=VERSIONS_HELP)
    show.set_defaults(handler=handle_show)
    build = wsub.add_parser("build", help="validate every scenario and publish an immutable world version",
                            description="Validate every scenario (null fails, reference passes, wrong fail, "
                            "replay same, facts reachable), measure reset and isolation, publish wv_<hash>.")
    build.add_argument("name")
    build.add_argument("--out", metavar="DIR", help=VERSIONS_HELP)
    add_live_options(build)
    build.set_defaults(handler=handle_build)
    re = wsub.add_parser("recheck", help="replay a published version; withdraw scenarios found unfair")
    re.add_argument("name")
    re.add_argument("--out", metavar="DIR", help=VERSIONS_HELP)
    add_live_options(re)
    re.set_defaults(handler=handle_recheck)
    wd = wsub.add_parser("withdraw", help="withdraw one scenario of the published version, with a reason")
    wd.add_argument("name")
    wd.add_argument("scenario")
    wd.add_argument("--reason", required=True, help="why a careful agent cannot pass it")
    wd.add_argument("--out", metavar="DIR", help=VERSIONS_HELP)
    wd.set_defaults(handler=handle_withdraw)
    _compile.register(wsub)


def handle_add(args: argparse.Namespace) -> int:
    try:
        world = add_world_folder(args.folder)
    except WorldFolderError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    counts = world.describe()["scenarios"]
    app = application_of(world)
    runs = f"its application ({app.folder}) runs in the sandbox: --backend docker" if app else "runs in process"
    print(f"added world {world.name} from {Path(args.folder).resolve()}: {len(world.tools)} tools, "
          f"{len(world.roles)} roles, {sum(counts.values())} scenarios "
          f"({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))}); {runs}")
    return 0


def handle_show(args: argparse.Namespace) -> int:
    world = load_world(args.name)
    if args.html or args.markdown:
        return _write_page(args)
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


def _write_page(args: argparse.Namespace) -> int:
    from ..versions import load_manifest, render_html, render_markdown, summary_line
    manifest = load_manifest(args.name, root=args.versions)
    for target, render in ((args.markdown, render_markdown), (args.html, render_html)):
        if not target:
            continue
        text = render(manifest)
        if target == "-":
            sys.stdout.write(text)
        else:
            Path(target).write_text(text)
            print(f"wrote {target}: world {args.name} {manifest.version.id}, {summary_line(manifest)}")
    return 0


def handle_build(args: argparse.Namespace) -> int:
    from ..versions import build_and_publish
    from ._models import attempt_live, live_agent
    world = load_world(args.name)
    live = live_agent(args)  # checked before the build: a bad profile fails fast
    result = build_and_publish(world, args.out)
    version = result.version
    verb = "published" if result.published else "already published (identical; nothing written)"
    print(f"world {world.name} {version.id}: {verb} at {result.path}")
    print(f"  {len(version.validation)} scenarios validated, {len(version.scenarios)} in the version, "
          f"{len(version.kept_out)} kept out ({result.seconds:.1f}s)")
    for kept in version.kept_out:
        print(f"  kept out {kept.scenario}: {'; '.join(kept.reasons)}")
    for fact in version.isolation:
        holds = "n/a" if fact.holds is None else "yes" if fact.holds else "NO"
        print(f"  {fact.name:<8} {holds:<4} {fact.detail}")
    if live:
        attempt_live(live, world, args.out)
    return 0


def handle_recheck(args: argparse.Namespace) -> int:
    from ..versions import recheck, summary_line
    from ._models import attempt_live, live_agent
    world = load_world(args.name)
    live = live_agent(args)
    result = recheck(world, args.out)
    manifest = result.manifest
    print(f"world {world.name} {manifest.version.id}: rechecked {len(result.rechecked)} scenarios, "
          f"withdrew {len(result.withdrawn)} ({result.seconds:.1f}s); {summary_line(manifest)}")
    for w in result.withdrawn:
        print(f"  withdrawn {w.scenario}: {w.reason}")
    if live:
        attempt_live(live, world, args.out)
    return 0


def handle_withdraw(args: argparse.Namespace) -> int:
    from ..versions import summary_line, withdraw_by_hand
    manifest = withdraw_by_hand(load_world(args.name), args.scenario, args.reason, args.out)
    print(f"world {args.name} {manifest.version.id}: withdrew {args.scenario}; {summary_line(manifest)}")
    return 0
