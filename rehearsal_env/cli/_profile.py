"""``rehearsal profile add FILE | list | show NAME[@vN]``: agent profiles and their versions."""

from __future__ import annotations

import argparse

from ..agents import BUILTIN_AGENTS, ProfileStore, builtin_profile, load_profile_file


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("profile", help="agent profiles: register, list, show",
                       description="Agent profiles (instructions + model + sampling), versioned by content. "
                                   "Stored under $REHEARSAL_AGENT_PROFILES, else $REHEARSAL_HOME/agent_profiles.")
    commands = p.add_subparsers(dest="profile_command", required=True, metavar="SUBCOMMAND")
    add = commands.add_parser("add", help="register a profile file; a changed profile becomes the next version")
    add.add_argument("file", help="a TOML profile (name, agent, model, instructions, [sampling])")
    add.set_defaults(handler=_add)
    ls = commands.add_parser("list", help="every registered profile and its latest version, and the built-ins")
    ls.set_defaults(handler=_list)
    show = commands.add_parser("show", help="a profile's TOML (NAME: the latest version; NAME@vN: that one)")
    show.add_argument("ref", metavar="NAME[@vN]")
    show.set_defaults(handler=_show)


def _add(args: argparse.Namespace) -> int:
    store = ProfileStore()
    stored, created = store.register(load_profile_file(args.file))
    if created:
        print(f"registered {stored.ref} in {store.root}")
    else:
        print(f"unchanged: {args.file} is {stored.ref} already")
    return 0


def _list(args: argparse.Namespace) -> int:
    store = ProfileStore()
    print(f"{'profile':<32} {'latest':<8} {'agent':<10} model")
    for name in store.names():
        versions = store.versions(name)
        latest = versions[-1]
        print(f"{name:<32} {latest.label:<8} {latest.agent:<10} {latest.model or '-'}")
    for agent in BUILTIN_AGENTS:
        profile = builtin_profile(agent)
        print(f"{agent:<32} {'builtin':<8} {profile.agent:<10} -")
    return 0


def _show(args: argparse.Namespace) -> int:
    print(ProfileStore().get(args.ref).to_toml(), end="")
    return 0
