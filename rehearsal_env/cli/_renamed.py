"""Options renamed so that each word means one thing: the old spelling keeps working for one release.

``--profile`` meant a *reward profile* in ``run``, ``health`` and ``eval rescore`` and an *agent
profile* in ``improve``; they are now ``--reward-profile`` and ``--agent-profile``. The old
option still sets the same value, and says once on stderr what to write instead.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any


class _Renamed(argparse.Action):
    """Stores the value under the new option's name and warns on stderr."""

    def __init__(self, option_strings: Sequence[str], dest: str, *, new: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.new = new

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(f"rehearsal: warning: {option_string} is now {self.new} (the old name stops working in the next "
              f"release); write {self.new} {values}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_renamed(p: argparse.ArgumentParser, old: str, new: str, *, metavar: str | None = None) -> None:
    """Accept ``old`` as a hidden, deprecated spelling of the already added option ``new``."""
    dest = new.removeprefix("--").replace("-", "_")
    p.add_argument(old, dest=dest, action=_Renamed, new=new, metavar=metavar, help=argparse.SUPPRESS)


def add_reward_profile(p: argparse.ArgumentParser, *, help: str) -> None:
    """``--reward-profile NAME`` (and the deprecated ``--profile NAME``)."""
    p.add_argument("--reward-profile", metavar="NAME", help=help)
    add_renamed(p, "--profile", "--reward-profile", metavar="NAME")
