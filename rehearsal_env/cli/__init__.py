"""The ``rehearsal`` command line: one module per command group.

Each command module exposes ``register(subparsers)``, which adds its parser and
sets ``handler`` (``args -> exit code``).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

from ..backends import DatabaseError
from ..verdict import NotScoredError
from ._names import collision_hint, invoked_as

COMMANDS = {
    "run": "_run", "world": "_world", "eval": "_eval", "health": "_health", "readiness": "_readiness",
    "profile": "_profile", "serve": "_serve", "keys": "_keys", "import": "_import", "improve": "_improve",
    "mcp": "_mcp", "compare": "_compare", "gateway": "_gateway", "replay": "_replay", "models": "_local_models",
}
"""Each command and the module (in this package) that registers it. A command's module is imported only when
that command runs (or for the full list: ``--help``), so a quick command does not pay for the heavy ones'
imports (``rehearsal world list`` loaded SciPy, pandas and the OpenAI SDK before)."""


def _module(name: str) -> ModuleType:
    return importlib.import_module(f"{__name__}.{name}")


def build_parser(only: str | None = None, prog: str = "rehearsal") -> argparse.ArgumentParser:
    """The parser of every command, or of the command ``only`` alone."""
    parser = argparse.ArgumentParser(
        prog=prog, description="Practice worlds for tool-using AI agents: run, inspect, measure.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command, module in COMMANDS.items():
        if only is None or command == only:
            _module(module).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``rehearsal`` and ``rehearsal-env`` console scripts (see :mod:`._names`)."""
    given = list(sys.argv[1:] if argv is None else argv)
    prog = invoked_as()
    if prog == "rehearsal-env" and (hint := collision_hint()):
        print(hint, file=sys.stderr)
    args = build_parser(given[0] if given and given[0] in COMMANDS else None, prog).parse_args(given)
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


__all__ = ["EXTRAS", "build_parser", "collision_hint", "invoked_as", "main", "missing_extra", "one_line"]
