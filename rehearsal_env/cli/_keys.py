"""``rehearsal keys``: create, list and revoke the API keys of ``rehearsal serve --keys``; the signing key
that seals runs and the public keys whose seals are trusted (``signing create|show``, ``trust``,
``trusted``, ``untrust``)."""

from __future__ import annotations

import argparse
import sys

from ..records import (
    SigningKeyError,
    create_signing_key,
    load_signing_key,
    public_text,
    signing_key_path,
    trust_key,
    trusted_keys,
    untrust_key,
)
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
    signing = actions.add_parser("signing", help="the signing key runs are sealed with",
                                 description="Every run directory `rehearsal run` and `rehearsal serve` write is "
                                 "sealed (signed) with this key, kept at $REHEARSAL_HOME/signing_key.pem (mode "
                                 "0600); the first run creates it when absent. Give its public key to whoever "
                                 "reads your runs (`rehearsal keys trust` on their side).")
    signing_actions = signing.add_subparsers(dest="signing_command", required=True, metavar="ACTION")
    signing_actions.add_parser("create", help="create the signing key (refused when one exists)")
    signing_actions.add_parser("show", help="print the signing key's public key")
    trust = actions.add_parser("trust", help="trust seals made with a public key (ed25519:...)")
    trust.add_argument("public_key", metavar="PUBLIC_KEY", help="as `rehearsal keys signing show` prints it")
    trust.add_argument("--name", default="", help="a label: who holds the private key")
    actions.add_parser("trusted", help="list the public keys whose seals are trusted")
    untrust = actions.add_parser("untrust", help="stop trusting a public key, by its id")
    untrust.add_argument("key_id", metavar="ID", help="the key's id (see `rehearsal keys trusted`)")
    p.set_defaults(handler=handle)


def _handle_seal_keys(args: argparse.Namespace) -> int:
    if args.keys_command == "signing":
        path = signing_key_path()
        if args.signing_command == "create":
            if load_signing_key() is not None:
                raise SigningKeyError(f"{path} already holds a signing key; runs sealed with it would no longer "
                                      "verify for readers who trust it if it were replaced. Move it away first")
            created, _ = create_signing_key()
            print(public_text(created.public_key()))
            print(f"created the signing key {path} (mode 0600); runs are sealed with it", file=sys.stderr)
            return 0
        existing = load_signing_key()
        if existing is None:
            raise SigningKeyError(f"no signing key at {path}; `rehearsal keys signing create` makes one (the "
                                  "first run makes one too)")
        print(public_text(existing.public_key()))
    elif args.keys_command == "trust":
        added = trust_key(args.public_key, args.name)
        print(f"trusting seals of key {added.id} ({added.text}){' ' + args.name if args.name else ''}")
    elif args.keys_command == "trusted":
        for ident, public in trusted_keys().items():
            print(f"{ident}  {public.text}  {public.name}")
    else:
        removed = untrust_key(args.key_id)
        print(f"no longer trusting key {removed.id} ({removed.text})")
    return 0


def handle(args: argparse.Namespace) -> int:
    if args.keys_command in ("signing", "trust", "trusted", "untrust"):
        return _handle_seal_keys(args)
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
