"""The ``rehearsal`` command line: one module per command group.

Each command module exposes ``register(subparsers)``, which adds its parser and
sets ``handler`` (``args -> exit code``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ..backends import DatabaseError
from ..verdict import NotScoredError
from . import (
    _compare,
    _eval,
    _gateway,
    _health,
    _import,
    _improve,
    _keys,
    _mcp,
    _profile,
    _readiness,
    _replay,
    _run,
    _serve,
    _world,
)

COMMANDS = (
    _run, _world, _eval, _health, _readiness, _profile, _serve, _keys, _import,
    _improve, _mcp, _compare, _gateway, _replay,
)


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
        print(f"rehearsal: error: {one_line(message)}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:  # an optional part's package is not installed
        print(f"rehearsal: error: {missing_extra(exc)}", file=sys.stderr)
        return 1
    except (DatabaseError, NotScoredError, ConnectionError) as exc:  # a part the command needs is not there
        print(f"rehearsal: error: {one_line(str(exc)) or type(exc).__name__}", file=sys.stderr)
        return 1


EXTRAS = {"openenv": "openenv", "verifiers": "verifiers", "trl": "trl", "transformers": "trl", "datasets": "trl",
          "llama_cpp": "live", "docker": "sandbox"}
"""The optional parts' top-level modules, and the extra that installs each."""


def missing_extra(exc: ModuleNotFoundError) -> str:
    """What is missing and how to install it, in one line."""
    top = (exc.name or "").split(".")[0]
    extra = EXTRAS.get(top)
    if extra is None:
        return f"the Python package {top or exc.name!r} is not installed ({exc}); reinstall with `pip install -e .`"
    return f"this needs the {extra!r} extra ({top} is not installed): pip install -e '.[{extra}]'"


def one_line(message: str) -> str:
    """A message on one line: its lines joined (a CLI error is one line)."""
    return " ".join(line.strip() for line in str(message).splitlines() if line.strip())


__all__ = ["EXTRAS", "build_parser", "main", "missing_extra", "one_line"]
