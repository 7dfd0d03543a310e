"""Phase 1, *inspect*, for an application whose migrations are code: the schema read from a database it made.

An application such as a Django project ships its migrations as code, not SQL. The description says how
it makes its own schema on an empty SQLite database (``{database}`` in the command)::

    [schema.from_app]
    command = ["{python}", "{app}/manage.py", "migrate"]
    env = { APP_DB = "sqlite:{database}" }
    exclude = { django_session = "keyed by a text session key; sessions are not the world's state" }

The compile runs that command (on a scratch database, bounded in time), reads every table back with
SQLite's own catalogue (``PRAGMA table_info``), and writes them as the world loader's migrations: one
``CREATE TABLE`` per table, its first column the integer primary key, each column in the world's three
types by SQLite's type affinity (``bool`` and ``integer`` are int; ``varchar``, ``datetime``, ``date``
are text, as the application stored them there; ``decimal``, ``real`` are real). Foreign keys and
indexes are not carried (the application keeps its own integrity; the world's checks read by key).
A table named by an SQL reserved word or with such a column (``order``) is refused too. A
table that does not start with an integer primary key must be listed under ``exclude`` with its reason:
it is kept out of the world, and the compile says so; SQLite's own ``sqlite_*`` tables are never read.
"""

from __future__ import annotations

import re
import sqlite3
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ._errors import CompileError

PHASE = "inspect"
TIMEOUT_S = 300
"""How long the application's schema command may run."""
MAX_TABLES = 300
"""Tables a schema may hold."""
MAX_DATABASE_BYTES = 64 * 2**20
"""The largest scratch database read back."""
_IDENT = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
RESERVED = frozenset(
    "all analyse analyze and any array as asc asymmetric both case cast check collate column constraint create "
    "current_catalog current_date current_role current_time current_timestamp current_user default deferrable desc "
    "distinct do else end except false fetch for foreign from grant group having in initially intersect into "
    "lateral leading limit localtime localtimestamp not null offset on only or order placing primary references "
    "returning select session_user some symmetric table then to trailing true union unique user using variadic "
    "when where window with".split())
"""PostgreSQL's reserved words: the world's backends write names unquoted, so a table or column may not be one."""


def affinity(declared: str) -> str:
    """The world's column type of a SQLite declared type, by SQLite's affinity rules (``bool`` is an integer)."""
    upper = declared.upper()
    if "INT" in upper or upper.startswith("BOOL"):
        return "int"
    if any(word in upper for word in ("CHAR", "CLOB", "TEXT")) or not upper:
        return "text"
    if any(word in upper for word in ("REAL", "FLOA", "DOUB", "DECIMAL", "NUMERIC")):
        return "real"
    return "text"  # date, datetime, time, and anything else SQLite keeps as it was written


def read_schema(database: Path, exclude: Mapping[str, str]) -> tuple[str, list[str], dict[str, str]]:
    """``(migration SQL, tables kept, {table kept out: reason})`` of a SQLite database (see the module docstring)."""
    conn = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE "
                                            "'sqlite_%' ORDER BY rowid")]
        if len(names) > MAX_TABLES:
            raise CompileError(PHASE, f"expected at most {MAX_TABLES} tables from the application's schema command; "
                               f"it made {len(names)}. Fix: exclude what the world need not carry")
        parts = ["-- The application's tables as its own migrations made them (read back from SQLite by the\n"
                 "-- compile's inspect phase), in the world's three types.\n"]
        kept: list[str] = []
        kept_out: dict[str, str] = {}
        unkeyed: list[str] = []
        for name in names:
            if name in exclude:
                kept_out[name] = exclude[name]
                continue
            columns = list(conn.execute(f'PRAGMA table_info("{name}")'))
            bad = [c[1] for c in columns if not _IDENT.match(str(c[1])) or c[1] in RESERVED]
            if not _IDENT.match(name) or name in RESERVED or bad:
                raise CompileError(PHASE, f"expected lowercase table and column names (letters, digits, _), none an "
                                   f"SQL reserved word (the world's backends do not quote names); table {name[:64]!r} "
                                   f"has {bad[:3] or 'its own name'}. Fix: list it under [schema.from_app] exclude "
                                   "with its reason")
            first = columns[0] if columns else None
            if first is None or first[5] != 1 or affinity(str(first[2])) != "int" or \
                    sum(1 for c in columns if c[5]) != 1:
                unkeyed.append(name)
                continue
            lines = [f"  {first[1]} INTEGER PRIMARY KEY"]
            for c in columns[1:]:
                kind = {"int": "INTEGER", "text": "TEXT", "real": "REAL"}[affinity(str(c[2]))]
                lines.append(f"  {c[1]} {kind}{' NOT NULL' if c[3] else ''}")
            parts.append(f"\nCREATE TABLE {name} (\n" + ",\n".join(lines) + "\n);\n")
            kept.append(name)
        missing = sorted(set(exclude) - set(names))
    finally:
        conn.close()
    if unkeyed:
        raise CompileError(PHASE, f"expected every table of the application's schema to start with an integer primary "
                           f"key; {', '.join(unkeyed[:8])} do not. Fix: list each under [schema.from_app] exclude "
                           "with the reason the world need not carry it")
    if missing:
        raise CompileError(PHASE, f"expected [schema.from_app] exclude to name tables the application makes; "
                           f"{', '.join(missing[:8])} are not among them. Fix: correct the names")
    if not kept:
        raise CompileError(PHASE, "expected the application's schema command to make at least one table; it made "
                           "none. Fix: check its command and environment")
    return "".join(parts), kept, kept_out


def run_schema_command(command: Sequence[str], env: Mapping[str, str], values: Mapping[str, str],
                       exclude: Mapping[str, str]) -> tuple[str, list[str], dict[str, str]]:
    """Run the application's schema command on a scratch SQLite database and read the schema back."""
    from ._runtime import app_environment, fill

    with tempfile.TemporaryDirectory(prefix="rehearsal-schema-") as scratch:
        database = Path(scratch) / "schema.sqlite3"
        filled = {**values, "database": str(database)}
        argv = [fill(c, filled) for c in command]
        child_env = app_environment({k: fill(v, filled) for k, v in env.items()},
                                    Path(scratch))
        try:
            done = subprocess.run(argv, env=child_env, cwd=scratch, stdin=subprocess.DEVNULL, capture_output=True,
                                  timeout=TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise CompileError(PHASE, f"expected the application's schema command {argv[:3]} to finish within "
                               f"{TIMEOUT_S} s; it did not ({type(exc).__name__}). Fix: correct [schema.from_app] "
                               "command") from None
        if done.returncode != 0:
            tail = " | ".join((done.stderr or done.stdout).decode(errors="replace").strip().splitlines()[-2:])[-300:]
            raise CompileError(PHASE, f"expected the application's schema command {argv[:3]} to succeed; it exited "
                               f"with status {done.returncode} ({tail or 'no output'}). Fix: correct [schema.from_app]")
        if not database.is_file() or database.stat().st_size > MAX_DATABASE_BYTES:
            raise CompileError(PHASE, f"expected the schema command to make a SQLite database of at most "
                               f"{MAX_DATABASE_BYTES:,} bytes at {{database}}; found "
                               f"{database.stat().st_size if database.is_file() else 'none'}. Fix: pass "
                               "{database} to the application as its database")
        return read_schema(database, exclude)


def from_app_spec(raw: Any) -> dict[str, Any] | None:
    """``[schema.from_app]`` of the description, checked (JSON-able), or None."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("command"), list) or not raw["command"] or \
            not isinstance(raw.get("env", {}), dict) or not isinstance(raw.get("exclude", {}), dict) or \
            not all(isinstance(v, str) and v.strip() for v in raw.get("exclude", {}).values()):
        raise CompileError(PHASE, "expected [schema.from_app] with a command list, an env table and exclude = "
                           "{ table = \"reason\" }; the description's does not read so. Fix: correct it")
    return {"command": [str(c) for c in raw["command"]], "env": {str(k): str(v) for k, v in raw["env"].items()}
            if "env" in raw else {}, "exclude": {str(k): str(v) for k, v in raw.get("exclude", {}).items()}}
