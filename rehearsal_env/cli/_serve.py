"""``rehearsal serve``: the worlds over HTTP (FastAPI + uvicorn)."""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys
from pathlib import Path

from ..backends import BACKENDS
from ..serve import KEEP_ALIVE_S, MAX_BODY_BYTES, ServeConfig, default_keys_path, run_server


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "serve", help="serve the worlds over HTTP for agents you run (any language) and remote trainers",
        description="Serve episodes over HTTP: GET /health, GET /v1/worlds, POST /v1/episodes, POST "
                    "/v1/episodes/ID/step, GET and DELETE /v1/episodes/ID (OpenAPI docs at /docs). Every "
                    "served episode is recorded into a run directory OUT/<world>-<profile>/ that measure.py, "
                    "`rehearsal eval rescore` and `rehearsal readiness` read like a `rehearsal run`.")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default: 8000; 0: a free one, printed)")
    p.add_argument("--workers", type=int, default=1,
                   help="server processes (default: 1). An episode lives in the process that started it; a "
                        "request for it that reaches another process is forwarded there, so one address serves "
                        "every episode")
    p.add_argument("--instance", metavar="NAME",
                   help="this server's name among several behind one reverse proxy: the prefix of its episode ids "
                        "(ep_NAME.), which the proxy routes on (see docs/serve-scale.md)")
    p.add_argument("--world", action="append", default=[], help="serve only this world (repeatable; default: all)")
    p.add_argument("--backend", choices=BACKENDS, default="sqlite", help="database backend (default: sqlite)")
    p.add_argument("--dsn", help="PostgreSQL server to use (default: $REHEARSAL_POSTGRES_DSN, else a private one)")
    p.add_argument("--max-sessions", type=int, default=1000, help="live sessions per process (default: 1000)")
    p.add_argument("--max-sessions-per-key", type=int, default=None, metavar="N",
                   help="live sessions one API key may hold (default: a quarter of --max-sessions)")
    p.add_argument("--idle-timeout", type=float, default=300.0,
                   help="seconds without a step (reads do not count) before a session is ended as given up "
                        "(default: 300)")
    p.add_argument("--out", default="runs/serve", help="where episodes are recorded (default: runs/serve)")
    p.add_argument("--keys", nargs="?", const=str(default_keys_path()), default=None, metavar="FILE",
                   help=f"require API keys from FILE (default FILE: {default_keys_path()}); without --keys "
                        f"only clients on 127.0.0.1 are accepted")
    p.add_argument("--no-stress", action="store_true", help="switch the stress layer off")
    p.add_argument("--threads", type=int, default=8, help="worker threads per process for database work (default: 8)")
    p.add_argument("--threads-per-key", type=int, default=None, metavar="N",
                   help="worker threads one API key's requests may hold at once (default: a quarter of --threads)")
    p.add_argument("--max-body-bytes", type=int, default=MAX_BODY_BYTES, metavar="N",
                   help=f"largest request body; a longer one is refused (413) unread (default: {MAX_BODY_BYTES}, "
                        f"the longest action the action space allows)")
    p.add_argument("--keep-alive", type=float, default=KEEP_ALIVE_S,
                   help=f"seconds an idle connection stays open (default: {KEEP_ALIVE_S})")
    p.add_argument("--log-level", default="warning", help="uvicorn's log level (default: warning)")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    if args.max_sessions < 1 or args.idle_timeout <= 0 or args.threads < 1:
        raise ValueError(f"expected --max-sessions >= 1, --idle-timeout > 0 and --threads >= 1; got "
                         f"{args.max_sessions}, {args.idle_timeout} and {args.threads}")
    options = {}
    if args.backend == "postgres":
        dsn = args.dsn or os.environ.get("REHEARSAL_POSTGRES_DSN")
        if dsn:
            options["dsn"] = dsn
    elif args.dsn:
        raise ValueError("--dsn only applies to --backend postgres")
    if args.keys is not None and not Path(args.keys).exists():
        raise FileNotFoundError(f"expected a keys file at {args.keys}; create a key first with "
                                f"`rehearsal keys create --scope evaluate --file {args.keys}`")
    config = ServeConfig(worlds=tuple(args.world), backend=args.backend, backend_options=options,
                         max_sessions=args.max_sessions, idle_timeout=args.idle_timeout, out=args.out,
                         keys=args.keys, stress=not args.no_stress, threads=args.threads,
                         max_sessions_per_key=args.max_sessions_per_key, threads_per_key=args.threads_per_key,
                         max_body_bytes=args.max_body_bytes, instance=args.instance)

    def listening(url: str) -> None:
        named = f"instance {args.instance}, " if args.instance else ""
        print(f"rehearsal serve: listening on {url} ({named}{args.workers} process(es), backend {args.backend}, "
              f"{args.max_sessions} sessions per process, idle timeout {args.idle_timeout:g} s); recording "
              f"episodes under {Path(args.out).resolve()}/<world>-<profile>/; API docs at {url}/docs", flush=True)
        if args.keys is None:
            print("rehearsal serve: no --keys: accepting clients on 127.0.0.1 only, each with full "
                  "(build-and-evaluate) access; holdout checks are never served", flush=True)
            if not _loopback(args.host):
                print(f"rehearsal serve: listening on {args.host}, but without --keys every client not on "
                      f"127.0.0.1 is refused (403)", file=sys.stderr, flush=True)
        else:
            print(f"rehearsal serve: API keys required (Authorization: Bearer KEY), from {args.keys}", flush=True)

    try:
        run_server(config, host=args.host, port=args.port, workers=args.workers, log_level=args.log_level,
                   keep_alive=args.keep_alive, on_listen=listening)
    except KeyboardInterrupt:
        pass
    return 0


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"
