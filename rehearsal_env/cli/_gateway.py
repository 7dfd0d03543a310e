"""``rehearsal gateway``: the model gateway between a harness and its model (OpenAI-compatible)."""

from __future__ import annotations

import argparse
import sys

from ..gateway import GatewayConfig, Ledger, gateway_app
from ..serve import ServerThread


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "gateway", help="an OpenAI-compatible endpoint that forwards a harness's model calls and logs them per episode",
        description="Forward POST /episodes/LINK/v1/chat/completions (or /v1/chat/completions with the header "
                    "X-Rehearsal-Link: LINK) to --upstream, streaming, and log each call's usage, latency, logprobs "
                    "and token ids in --ledger DIR/LINK.jsonl. `rehearsal mcp --scenario ... --ledger DIR --link "
                    "LINK` reports those tokens with the episode's steps (measured tokens, no external-mode caveat).")
    p.add_argument("--upstream", required=True, metavar="URL",
                   help="the provider's OpenAI-compatible base URL, e.g. http://127.0.0.1:8080/v1")
    p.add_argument("--ledger", required=True, metavar="DIR", help="where each link's calls are logged")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=8766, help="port (default: 8766; 0: a free one, printed)")
    p.add_argument("--api-key-env", metavar="NAME",
                   help="send the key in $NAME to the provider instead of the harness's own")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per call to the provider (default: 600)")
    p.add_argument("--logprobs", action="store_true",
                   help="ask the provider for logprobs on calls that do not ask for them (for on-policy RL)")
    p.add_argument("--token-ids", action="store_true",
                   help="ask the provider for the prompt's and completion's token ids (vLLM's return_token_ids) on "
                        "calls that do not ask, for trajectories with the engine's tokens (eval export)")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    if not args.upstream.startswith(("http://", "https://")):
        raise ValueError(f"expected --upstream as an http(s) base URL such as http://127.0.0.1:8080/v1, got "
                         f"{args.upstream!r}")
    if args.timeout <= 0:
        raise ValueError(f"expected --timeout > 0, got {args.timeout}")
    config = GatewayConfig(upstream=args.upstream, ledger=Ledger(args.ledger), api_key_env=args.api_key_env,
                           timeout=args.timeout, logprobs=args.logprobs, token_ids=args.token_ids)
    server = ServerThread(gateway_app(config), host=args.host, port=args.port)
    print(f"rehearsal gateway: listening on {server.url} (base URL for episode LINK: {server.url}/episodes/LINK/v1), "
          f"forwarding to {args.upstream}, logging to {args.ledger}/LINK.jsonl", file=sys.stderr, flush=True)
    server.start()
    try:
        server._thread.join()
    except KeyboardInterrupt:
        server.stop()
    return 0
