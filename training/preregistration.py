"""Pre-registration for ``learn.py``: every setting fixed in a committed config file before holdout is read.

A config is a TOML file of ``learn.py`` options (``grpo_steps = 40``, ``holdout_categories = ["refund-item"]``, ...;
the option names with ``_`` for ``-``). ``learn.py --config FILE`` takes every setting from it and refuses any other
setting on its command line (only ``--out``, ``--no-holdout`` and ``--reread-holdout`` say where and whether to
read). Holdout is read for a config only when the file is committed and unchanged (``git``), so the settings that
produced a holdout figure are in the history before the figure exists; the report carries the file's SHA-256.
``holdout-read.json`` counts the readings per config hash: a second reading of one config (``--reread-holdout``) is
marked in every figure that uses it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FREE = ("out", "no_holdout", "reread_holdout", "config")
"""Options a pre-registered run still takes from its command line: where to write and whether to read holdout."""


@dataclass(frozen=True)
class Registered:
    """The config a run was pre-registered with."""

    path: str
    """The config file as given."""
    sha256: str
    """The SHA-256 of its bytes: what the report and ``holdout-read.json`` name."""
    committed: bool
    """Whether git holds the file unchanged (holdout is read only then)."""


def apply_config(parser: argparse.ArgumentParser, args: argparse.Namespace, argv: list[str]) -> Registered | None:
    """Fill ``args`` from ``args.config`` (None without one).

    Raises:
        SystemExit: an unreadable config, an option it names that ``learn.py`` lacks, or another setting given on
            the command line beside it (one line each, saying how to fix it).
    """
    if not args.config:
        return None
    path = Path(args.config)
    try:
        raw = path.read_bytes()
        settings = tomllib.loads(raw.decode())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        parser.error(f"--config {path}: expected a readable TOML file of learn.py options, got {exc}")
    known = {a.dest for a in parser._actions} - {"help", *FREE}
    unknown = sorted(set(settings) - known)
    if unknown:
        parser.error(f"--config {path}: unknown option(s) {unknown}; known: {sorted(known)}")
    given = sorted({a.dest for a in parser._actions for flag in a.option_strings
                    if any(x == flag or x.startswith(flag + "=") for x in argv)} - set(FREE))
    if given:
        parser.error(f"--config {path} fixes every setting; remove {['--' + g.replace('_', '-') for g in given]} "
                     "from the command line or put them in the config (and commit it)")
    for key, value in settings.items():
        setattr(args, key, ",".join(value) if isinstance(value, list) else value)
    return Registered(str(path), hashlib.sha256(raw).hexdigest(), _committed(path))


def _committed(path: Path) -> bool:
    """Whether git tracks ``path`` with no change in the work tree or the index."""
    try:
        tracked = subprocess.run(["git", "ls-files", "--error-unmatch", path.name], cwd=path.parent,
                                 capture_output=True, check=False).returncode == 0
        clean = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", path.name], cwd=path.parent,
                               capture_output=True, check=False).returncode == 0
    except OSError:  # no git: nothing is committed
        return False
    return tracked and clean


def record_reading(marker: Path, registered: Registered | None, reread: bool) -> int:
    """Count one holdout reading in ``marker`` (per config hash, ``"ad hoc"`` without one); the readings of this
    config so far, this one included."""
    state: dict[str, Any] = json.loads(marker.read_text()) if marker.exists() else {}
    by_config: dict[str, int] = dict(state.get("by_config") or {})
    key = registered.sha256 if registered is not None else "ad hoc"
    by_config[key] = by_config.get(key, 0) + 1
    reads = int(state.get("reads", 0)) + 1
    marker.write_text(json.dumps({"reads": reads, "reread_flag": reread, "by_config": by_config}, sort_keys=True)
                      + "\n")
    return by_config[key]


def category(scenario_id: str) -> str:
    """A scenario's category: its template, the id less its number (``refund-item-0006``: ``refund-item``)."""
    head, _, tail = scenario_id.rpartition("-")
    return head if head and tail.isdigit() else scenario_id
