"""The ``rehearsal`` command line: one module per command group.

Each command module exposes ``register(subparsers)``, which adds its parser and
sets ``handler`` (``args -> exit code``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import _compare, _eval, _health, _import, _improve, _keys, _mcp, _profile, _readiness, _run, _serve, _world

COMMANDS = (_run, _world, _eval, _health, _readiness, _profile, _serve, _keys, _import, _improve, _mcp, _compare)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rehearsal", description="Practice worlds for tool-using AI agents: run, inspect, measure.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMANDS:
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``rehearsal`` console script."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except BrokenPipeError:  # the reader (e.g. `| head`) stopped reading: not an error
        sys.stderr.close()
        return 0
    except (KeyError, ValueError, FileNotFoundError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        print(f"rehearsal: error: {message}", file=sys.stderr)
        return 2


__all__ = ["build_parser", "main"]
