"""``rehearsal keys``: create, list and revoke the API keys of ``rehearsal serve --keys``."""

from __future__ import annotations

import argparse
import sys

from ..serve import SCOPES, KeyStore, default_keys_path


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("keys", help="API keys for `rehearsal serve --keys` (stored hashed)",
                       description="Create, list and revoke API keys. A key is shown once, when it is created; "
                                   "the keys file keeps only its SHA-256 digest and scope. Scopes: evaluate (play "
                                   "episodes, read their own outcomes) and build-and-evaluate (also scenarios' "
                                   "checks and references, except holdout ones, and other keys' episodes).")
    actions = p.add_subparsers(dest="keys_command", required=True, metavar="ACTION")
    create = actions.add_parser("create", help="create a key and print it (once)")
    create.add_argument("--scope", required=True, choices=SCOPES, help="what the key may do")
    create.add_argument("--name", default="", help="a label for the key")
    create.add_argument("--agent", action="append", default=[], metavar="NAME",
                        help="bind the key to this agent name (repeatable): its episodes must name one of these "
                             "agents, others are refused (403); default: any name")
    listing = actions.add_parser("list", help="list the keys (ids, scopes, labels; never the keys)")
    revoke = actions.add_parser("revoke", help="remove a key by its id")
    revoke.add_argument("key_id", metavar="ID", help="the key's id (see `rehearsal keys list`)")
    for action in (create, listing, revoke):
        action.add_argument("--file", default=None,
                            help=f"the keys file (default: $REHEARSAL_HOME/keys.json, here {default_keys_path()})")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    store = KeyStore(args.file)
    if args.keys_command == "create":
        entry, key = store.create(args.scope, args.name, args.agent)
        print(key)
        print(f"created key {entry.id} ({entry.scope.value}) in {store.path}; it is shown only now, store it",
              file=sys.stderr)
    elif args.keys_command == "list":
        for k in store.keys():
            bound = f"  agents: {', '.join(k.agents)}" if k.agents else ""
            print(f"{k.id}  {k.scope.value:<19} {k.created}  {k.name}{bound}")
    else:
        entry = store.revoke(args.key_id)
        print(f"revoked key {entry.id} ({entry.scope.value})")
    return 0
