"""``rehearsal mcp``: an episode, or the product's own tools, as an MCP server (stdio or streamable HTTP)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import anyio

from ..backends import BACKENDS
from ..episodes import LOCAL, KeyStore, Principal, Scope, check_bind, default_keys_path
from ..gateway import Ledger, check_link
from ..serve import ServerThread
from ..worlds import load_world

KEY_ENV = "REHEARSAL_API_KEY"
"""The environment variable read for ``--key`` when it is not given."""


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "mcp", help="an episode (--scenario) or the product's own tools as an MCP server, for any harness",
        description="Serve over MCP (the official SDK; stdio by default, or streamable HTTP at /mcp). With "
                    "--scenario WORLD/SCENARIO: one episode per MCP session, the role's tools with the world's "
                    "JSON schemas, one env step per tools/call, recorded like a served episode under "
                    "OUT/<world>-<profile>/. Without it: the product's tools (worlds, scenarios, runs, summary, "
                    "measure, readiness, rescore). Never prints to stdout except the protocol.")
    p.add_argument("--scenario", metavar="WORLD/SCENARIO", help="serve this scenario as an episode")
    p.add_argument("--transport", choices=("stdio", "http"), default="stdio", help="default: stdio")
    p.add_argument("--host", default="127.0.0.1", help="HTTP address (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="HTTP port (default: 8765; 0: a free one, printed)")
    p.add_argument("--key", help=f"stdio only: an API key (`rehearsal keys create`; default: ${KEY_ENV}), the "
                                 f"episodes' owner and scope; without one, the local build-and-evaluate principal")
    p.add_argument("--keys", default=None, metavar="FILE",
                   help=f"the keys file. Over HTTP every request must carry one of its keys (Authorization: Bearer); "
                        f"without --keys, HTTP serves loopback clients only, as the local principal. Over stdio it "
                        f"is where --key is looked up (default: {default_keys_path()})")
    p.add_argument("--seed", type=int, default=0, help="reset seed (default: 0)")
    p.add_argument("--reward-profile", metavar="NAME",
                   help="reward profile (benchmark or rl; default: the outcome reward)")
    p.add_argument("--agent", default="mcp-harness", help="the agent's name on the records (default: mcp-harness)")
    p.add_argument("--agent-version", default="unversioned", help="the agent's version on the records")
    p.add_argument("--out", default="runs/mcp", help="where episodes are recorded (default: runs/mcp)")
    p.add_argument("--backend", choices=BACKENDS, default="sqlite", help="database backend (default: sqlite)")
    p.add_argument("--dsn", help="PostgreSQL server (default: $REHEARSAL_POSTGRES_DSN, else a private one)")
    p.add_argument("--no-stress", action="store_true", help="switch the stress layer off")
    p.add_argument("--idle-timeout", type=float, default=300.0,
                   help="seconds without a call before a running episode is settled as given up (default: 300)")
    p.add_argument("--ledger", metavar="DIR", help="the model gateway's ledger (`rehearsal gateway --ledger DIR`): "
                                                   "each step reports the tokens of the model calls made since")
    p.add_argument("--link", help="the gateway link of the stdio episode (default: a fresh random link, shown in "
                                  "its opening); over HTTP a session sends it in the X-Rehearsal-Link header or ?link=")
    p.add_argument("--runs-root", default="runs", help="the product tools' runs folder (default: runs)")
    p.set_defaults(handler=handle)


def _principal(args: argparse.Namespace) -> Principal:
    """Who plays over stdio (the process that started this one): ``--key``'s key, else the local principal."""
    token = args.key or os.environ.get(KEY_ENV)
    if not token:
        return Principal(LOCAL, Scope.BUILD_AND_EVALUATE)
    store = KeyStore(args.keys or default_keys_path())
    if not store.path.exists():
        raise FileNotFoundError(f"expected a keys file at {store.path} for --key; create one with "
                                f"`rehearsal keys create --scope evaluate --file {store.path}`")
    entry = store.authenticate(token.strip())
    if entry is None:
        raise ValueError(f"the key is not known to {store.path} (revoked, or from another keys file)")
    return Principal(entry.id, entry.scope, entry.agents)


def handle(args: argparse.Namespace) -> int:
    try:  # deferred: the mcp SDK is an optional extra, and every other command runs without it
        from .. import harness
    except ImportError as exc:  # the harness names the SDK version found and the range wanted, or what is missing
        raise ValueError(f"rehearsal mcp cannot start: {exc}") from None
    keys: KeyStore | None = None
    if args.transport == "http":
        if args.key:
            raise ValueError("--key is for stdio; over HTTP every client sends its own key (Authorization: Bearer) and "
                             "the server checks it against --keys FILE")
        if args.keys is not None:
            keys = KeyStore(args.keys)
            if not keys.path.exists():
                raise FileNotFoundError(f"expected a keys file at {keys.path}; create keys with "
                                        f"`rehearsal keys create --scope evaluate --file {keys.path}`")
        check_bind(args.host, keys)
        who = Principal(LOCAL, Scope.BUILD_AND_EVALUATE)  # each HTTP request's own principal replaces it
    else:
        who = _principal(args)
    runtime: Any = None
    if args.scenario:
        runtime = harness.episode_runtime(_episode_config(args, who, harness), _storage(args, harness))
        server = runtime.server
    else:
        server = harness.product_server(args.runs_root, who)
    try:
        if args.transport == "stdio":
            anyio.run(harness.serve_stdio, server)
        else:
            app = harness.http_app(server, host=args.host, session_idle_timeout=max(60.0, 2 * args.idle_timeout),
                                   keys=keys)
            thread = ServerThread(app, host=args.host, port=args.port)  # type: ignore[arg-type]
            print(f"rehearsal mcp: listening on {thread.url}{harness.MCP_PATH}", file=sys.stderr, flush=True)
            thread.start()
            try:
                thread._thread.join()
            except KeyboardInterrupt:
                thread.stop()
    except KeyboardInterrupt:
        pass
    finally:
        if runtime is not None:
            runtime.close()
    return 0


def _episode_config(args: argparse.Namespace, who: Principal, harness: Any) -> Any:
    world_name, slash, scenario_id = args.scenario.partition("/")
    if not slash or not world_name or not scenario_id:
        raise ValueError(f"expected --scenario WORLD/SCENARIO (e.g. shop/refund-item-0004), got {args.scenario!r}")
    if args.idle_timeout <= 0:
        raise ValueError(f"expected --idle-timeout > 0, got {args.idle_timeout}")
    world = load_world(world_name)
    spec = harness.EpisodeSpec(world=world, scenario=world.scenario(scenario_id), seed=args.seed,
                               reward_profile=args.reward_profile, agent=args.agent, agent_version=args.agent_version)
    ledger = Ledger(args.ledger) if args.ledger else None
    if args.link is not None:
        check_link(args.link)
    return harness.EpisodeServerConfig(spec=spec, who=who, idle_timeout=args.idle_timeout, ledger=ledger,
                                       link=args.link)


def _storage(args: argparse.Namespace, harness: Any) -> Any:
    options: dict[str, Any] = {}
    if args.backend == "postgres":
        dsn = args.dsn or os.environ.get("REHEARSAL_POSTGRES_DSN")
        if dsn:
            options["dsn"] = dsn
    elif args.dsn:
        raise ValueError("--dsn only applies to --backend postgres")
    return harness.Storage(out=Path(args.out), backend=args.backend, backend_options=options,
                           stress=not args.no_stress)
