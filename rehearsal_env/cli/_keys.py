"""``rehearsal keys``: create, list and revoke the API keys of ``rehearsal serve --keys``; the signing key
that seals runs and the public keys whose seals are trusted (``signing create|show|rotate|list``, ``trust``,
``trusted``, ``untrust``, ``distrust``)."""

from __future__ import annotations

import argparse
import shlex
import sys
from datetime import UTC, datetime

from ..records import (
    DISTRUSTED_ENTIRELY,
    SigningKeyError,
    create_signing_key,
    distrust_key,
    home_keys,
    load_signing_key,
    parse_time,
    public_text,
    rotate_signing_key,
    show_time,
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
                                 "reads your runs (`rehearsal keys trust` on their side); `rotate` replaces it when it "
                                 "may have leaked, `list` shows every key this home knows and whether it is trusted.")
    signing_actions = signing.add_subparsers(dest="signing_command", required=True, metavar="ACTION")
    signing_actions.add_parser("create", help="create the signing key (refused when one exists)")
    signing_actions.add_parser("show", help="print the signing key's public key")
    rotate = signing_actions.add_parser(
        "rotate", help="replace the signing key with a new one; keep the old public key, distrusted as told",
        description="Make a new signing key (mode 0600) and seal with it from now on. The old private key is "
                    "deleted; its public key stays in $REHEARSAL_HOME/trusted_keys.json, distrusted per "
                    "--distrust-old: `now` (default: runs it sealed before the rotation still verify, later ones "
                    "do not), a DATE (ISO date or date-time, UTC unless it names its offset), `all` (none of its "
                    "runs verify: the safe choice when the key surely leaked, since whoever holds it can backdate "
                    "a seal's time) or `never` (it stays trusted). Prints the new public key; readers elsewhere "
                    "need `rehearsal keys trust` of it and `rehearsal keys distrust` of the old one.")
    rotate.add_argument("--distrust-old", default="now", metavar="{now,all,never,DATE}",
                        help="from when the old key's seals are refused (default: now)")
    rotate.add_argument("--reason", default="", metavar="TEXT",
                        help="one line every reader is told when it refuses a seal of the old key")
    signing_actions.add_parser("list", help="every key this home knows: id, created, trusted or distrusted since "
                                            "when and why")
    trust = actions.add_parser("trust", help="trust seals made with a public key (ed25519:...)")
    trust.add_argument("public_key", metavar="PUBLIC_KEY", help="as `rehearsal keys signing show` prints it")
    trust.add_argument("--name", default="", help="a label: who holds the private key")
    actions.add_parser("trusted", help="list the public keys whose seals are trusted")
    untrust = actions.add_parser("untrust", help="stop trusting a public key, by its id")
    untrust.add_argument("key_id", metavar="ID", help="the key's id (see `rehearsal keys trusted`)")
    distrust = actions.add_parser(
        "distrust", help="refuse a trusted key's seals from a time (or all of them), with a reason",
        description="Mark a key of $REHEARSAL_HOME/trusted_keys.json distrusted: its seals made at or after "
                    "--since are refused by every reader here (`eval verify`, `readiness`, `measure.py`, ...) with "
                    "the reason, `all` refuses every one of them. A date trusts the sealing time the seal records, "
                    "which whoever holds the key can backdate: use `all` for a key that surely leaked.")
    distrust.add_argument("key_id", metavar="ID", help="the key's id (see `rehearsal keys signing list`)")
    distrust.add_argument("--since", default="now", metavar="{now,all,never,DATE}",
                          help="now (default), all (every seal), never (trusted again), or an ISO date or "
                               "date-time (UTC unless it names its offset)")
    distrust.add_argument("--reason", default="", metavar="TEXT", help="one line every reader is told")
    p.set_defaults(handler=handle)


def _since(value: str, option: str) -> datetime | str | None:
    """``now`` (kept as is: the caller takes its own time), ``all``, ``never`` or an ISO date(-time)."""
    word = value.strip().lower()
    if word == "now":
        return "now"
    if word == "all":
        return DISTRUSTED_ENTIRELY
    if word == "never":
        return None
    try:
        return parse_time(value, option)
    except SigningKeyError:
        raise SigningKeyError(f"{option}: expected now, all, never, or an ISO date (2025-06-01) or date-time "
                              f"(2025-06-01T12:00:00+00:00, UTC unless it names its offset); got {value[:60]!r}"
                              ) from None


def _reader_hint(ident: str, since: datetime | None, reason: str) -> str:
    """The `rehearsal keys distrust` line a reader elsewhere runs to distrust a key as this home does."""
    when = "never" if since is None else "all" if since <= DISTRUSTED_ENTIRELY else since.isoformat()
    return f"rehearsal keys distrust {ident} --since {when}" + (f" --reason {shlex.quote(reason)}" if reason else "")


def _rotate(args: argparse.Namespace) -> int:
    retired, new = rotate_signing_key(_since(args.distrust_old, "--distrust-old"), " ".join(args.reason.split()))
    text = public_text(new.public_key())
    print(text)
    print(f"rotated the signing key {signing_key_path()} (mode 0600): runs are sealed with the new key from now "
          f"on; the old key {retired.id} is kept in the trusted keys, {retired.state}", file=sys.stderr)
    print(f"readers elsewhere: `rehearsal keys trust {text}` and "
          f"`{_reader_hint(retired.id, retired.distrusted_from, retired.reason)}`", file=sys.stderr)
    return 0


def _list_keys() -> int:
    keys = home_keys()
    if not keys:
        print(f"no keys: no signing key at {signing_key_path()} and no trusted keys; "
              "`rehearsal keys signing create` makes one", file=sys.stderr)
    signing = load_signing_key()
    current = public_text(signing.public_key()) if signing is not None else None
    for key in keys:
        role = "signing" if key.text == current else "-"
        print(f"{key.id}  {show_time(key.created):<32}  {role:<7}  {key.state}  {key.name}".rstrip())
    return 0


def _handle_seal_keys(args: argparse.Namespace) -> int:
    if args.keys_command == "signing":
        path = signing_key_path()
        if args.signing_command == "rotate":
            return _rotate(args)
        if args.signing_command == "list":
            return _list_keys()
        if args.signing_command == "create":
            if load_signing_key() is not None:
                raise SigningKeyError(f"{path} already holds a signing key; runs sealed with it would no longer "
                                      "verify for readers who trust it if it were replaced. `rehearsal keys "
                                      "signing rotate` replaces it and keeps its public key trusted as you say")
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
            print(f"{ident}  {public.text}  {public.state}  {public.name}".rstrip())
    elif args.keys_command == "distrust":
        since = _since(args.since, "--since")
        when = datetime.now(UTC) if isinstance(since, str) else since  # "now" is the only text _since returns
        marked = distrust_key(args.key_id, when, " ".join(args.reason.split()))
        print(f"key {marked.id} is {marked.state}")
    else:
        removed = untrust_key(args.key_id)
        print(f"no longer trusting key {removed.id} ({removed.text})")
    return 0


def handle(args: argparse.Namespace) -> int:
    if args.keys_command in ("signing", "trust", "trusted", "untrust", "distrust"):
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
