"""A world folder's code runs outside the evaluator's process, confined, and what it returns is data.

``[data] generator = "data.py"`` is untrusted code: a team adds worlds it did not write. It never runs
in a process that holds a secret (the signing key, API keys, ``keys.json`` of the state home). Each
call of :class:`SeedGenerator` starts a fresh Python process (``subprocess``, not a fork of the
evaluator) on :mod:`._child`, with:

- a minimal environment (``PATH``, ``LANG``, and ``HOME``/``TMPDIR`` set to a scratch folder of its own):
  none of the evaluator's variables (no ``REHEARSAL_*``, no API keys), Python's ``-I`` (no
  ``PYTHON*`` variables, no user site) and ``-B``;
- no inherited file descriptor but stdin (``/dev/null``), stdout and stderr (files of the evaluator's
  own temporary folder, opened before the child starts), a new session, the scratch folder as its
  working directory;
- the child's own confinement, applied before the generator is read (:mod:`._child`): resource limits,
  no capabilities, ``PR_SET_NO_NEW_PRIVS``, Landlock (reading only the world folder, the Python
  installation and shared libraries; writing only its scratch folder; no ``/proc``, no state home, no
  ``~``, no ``/tmp``, no execution, no TCP) and a seccomp filter (no socket, no new process, no
  ``ptrace``).

Its answer is checked like any other input: bounded in bytes (:data:`MAX_OUTPUT_BYTES`), rows
(:data:`MAX_SEED_ROWS`) and time (:data:`GENERATOR_TIMEOUT_S`); every table must be one of the world's,
every row as long as the table is wide, every value of its column's type, and no required column empty.

Where the machine cannot confine (no Landlock: not Linux, a kernel older than 5.13, or a container
whose seccomp profile blocks it; or an architecture the seccomp filter is not written for), world
code is refused with one line saying what is missing, unless the user sets
``REHEARSAL_TRUST_WORLD_CODE=1`` (then the missing layer alone is left out, and a warning says so), or
runs on a machine that has it.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from ..._home import home
from ...schema import Table
from ._source import WorldFolderError

CHILD = Path(__file__).with_name("_child.py")
"""The script the confined child runs (standard library only)."""
TRUST_WORLD_CODE_ENV = "REHEARSAL_TRUST_WORLD_CODE"
"""Set to ``1`` to run world code on a machine that cannot confine it (the missing layer left out)."""
GENERATOR_TIMEOUT_S = 120.0
"""Wall-clock seconds a generator may run (its CPU time is bounded to the same)."""
MAX_OUTPUT_BYTES = 128 * 2**20
"""The largest answer a generator may give (and the largest file it may write), 128 MiB."""
MAX_SEED_ROWS = 2_000_000
"""The most rows a generator may return, all tables together."""
MEMORY_BYTES = 4 * 2**30
"""The generator's address space (4 GiB)."""
MAX_OPEN_FILES = 256
"""The most files the generator may hold open at once."""
MAX_SHOWN_CHARS = 2000
"""The most characters of the generator's own error text an error shows."""
CHILD_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
"""The whole environment untrusted code starts with (a world's generator here, an application the compiler runs),
besides its own ``HOME``/``TMPDIR``: never this process's, which may hold keys."""
_KIND = {"int": (int,), "real": (int, float), "text": (str,)}
_KIND_WORDS = {"int": "an integer", "real": "a number", "text": "text"}


def trusted() -> bool:
    """Whether the user opted in to run world code where it cannot be confined (:data:`TRUST_WORLD_CODE_ENV`)."""
    return os.environ.get(TRUST_WORLD_CODE_ENV, "").strip().lower() in ("1", "true", "yes")


def _forbidden() -> list[str]:
    """The state homes the child must be unable to read (the one in use and the default one): a sanity check on
    top of Landlock, which refuses everything it does not allow; here, no allowed folder may hold them."""
    homes = set()
    for where in (home, lambda: Path.home() / ".rehearsal"):
        try:
            homes.add(where().expanduser().resolve())
        except (RuntimeError, KeyError):  # no HOME and no passwd entry: there is no default home to guard
            continue
    return sorted(str(p) for p in homes)


@dataclass(frozen=True)
class ChildAnswer:
    """What the confined child said, and what it cost."""

    body: Mapping[str, Any]
    """The JSON object it answered (``rows`` and ``left_out``, or ``error`` and ``message``)."""
    stderr: str
    """The tail of what it (and the world's code) wrote to stderr."""
    seconds: float
    """Wall-clock seconds from start to exit."""


def run_world_code(file: Path, folder: Path, function: str, seed: int, anchor: date, *,
                   where: str, confine: bool = True) -> ChildAnswer:
    """Run ``function(seed, anchor)`` of ``file`` (inside ``folder``) in the confined child.

    ``confine=False`` is for tests only: it leaves out Landlock and seccomp, as the opt-in does on a
    machine without them (the environment stays minimal), so a test can show its probe does find
    the key when nothing stops it.

    Raises:
        WorldFolderError: the child timed out, died, answered too much or not JSON.
    """
    if not sys.executable:
        raise WorldFolderError(f"{where}: world code runs in a fresh Python process, and this one does not know its "
                               "interpreter (sys.executable is empty). Fix: run rehearsal from a python executable")
    own = Path(tempfile.mkdtemp(prefix="rehearsal-world-code-"))
    scratch = own / "scratch"
    scratch.mkdir()
    request = {"file": str(file), "folder": str(folder), "function": function, "seed": seed,
               "anchor": anchor.isoformat(), "scratch": str(scratch), "forbidden": _forbidden(),
               "trust": trusted() or not confine, "skip": not confine,
               "memory_bytes": MEMORY_BYTES, "cpu_s": math.ceil(GENERATOR_TIMEOUT_S),
               "file_bytes": MAX_OUTPUT_BYTES, "files": MAX_OPEN_FILES}
    env = {**CHILD_ENV, "HOME": str(scratch), "TMPDIR": str(scratch)}
    try:
        with open(own / "out", "w+b") as out, open(own / "err", "w+b") as err:
            start = time.perf_counter()
            proc = subprocess.Popen([sys.executable, "-I", "-B", str(CHILD), json.dumps(request)], env=env,
                                    cwd=scratch, stdin=subprocess.DEVNULL, stdout=out, stderr=err, close_fds=True,
                                    start_new_session=True)
            try:
                code = proc.wait(timeout=GENERATOR_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                raise WorldFolderError(f"{where}: {file.name} ran longer than {GENERATOR_TIMEOUT_S:.0f} s and was "
                                       "stopped. Fix: make it return sooner (or generate less)") from None
            finally:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
            seconds = time.perf_counter() - start
            size = out.seek(0, os.SEEK_END)
            if size > MAX_OUTPUT_BYTES:
                raise WorldFolderError(f"{where}: {file.name} answered {size:,} bytes; a generator answers at most "
                                       f"{MAX_OUTPUT_BYTES:,}. Fix: generate fewer or smaller rows")
            out.seek(0)
            raw = out.read()
            err.seek(max(0, err.seek(0, os.SEEK_END) - MAX_SHOWN_CHARS))
            stderr = err.read().decode(errors="replace")
    finally:
        shutil.rmtree(own, ignore_errors=True)
    try:
        body = json.loads(raw)
    except ValueError:
        body = None
    if not isinstance(body, dict) or ("rows" not in body and "error" not in body):
        cause = (f"was killed by signal {signal.Signals(-code).name}" if code < 0 else f"exited with status {code}")
        hint = (" (past its limits: a file or answer over "
                f"{MAX_OUTPUT_BYTES:,} bytes, {MEMORY_BYTES:,} bytes of memory or {GENERATOR_TIMEOUT_S:.0f} s of CPU)"
                if code < 0 else "")
        raise WorldFolderError(f"{where}: {file.name} gave no answer: the process {cause}{hint}; its last output: "
                               f"{stderr.strip()[-MAX_SHOWN_CHARS:] or '(none)'}. Fix: run rows(seed, anchor) of "
                               f"{file.name} by hand and keep it within the limits")
    return ChildAnswer(body, stderr, seconds)


def checked_rows(body: Mapping[str, Any], tables: Sequence[Table], where: str,
                 name: str) -> dict[str, tuple[tuple[Any, ...], ...]]:
    """The rows of a generator's answer, checked against the world's tables.

    Raises:
        WorldFolderError: an unknown table, a row of the wrong width, a value of the wrong type, a missing
            required value, or more than :data:`MAX_SEED_ROWS` rows.
    """
    given = body.get("rows")
    if not isinstance(given, dict):
        raise WorldFolderError(f"{where}: {name} answered no rows. Fix: return {{table name: [tuple, ...]}}")
    by_name = {t.name: t for t in tables}
    total = 0
    out: dict[str, tuple[tuple[Any, ...], ...]] = {}
    for table_name, rows in given.items():
        table = by_name.get(table_name)
        if table is None:
            raise WorldFolderError(f"{where}: {name} returned rows for table {str(table_name)[:60]!r}, which the world "
                                   f"does not declare. Fix: use one of {', '.join(sorted(by_name)) or '(none)'}")
        if not isinstance(rows, list):
            raise WorldFolderError(f"{where}: {name}: table {table_name!r} is not a list of rows. Fix: return a list "
                                   "of tuples")
        total += len(rows)
        if total > MAX_SEED_ROWS:
            raise WorldFolderError(f"{where}: {name} returned more than {MAX_SEED_ROWS:,} rows; a world's seed data "
                                   "holds at most that many. Fix: generate fewer rows")
        checked = []
        for i, row in enumerate(rows):
            if not isinstance(row, list) or len(row) != len(table.columns):
                width = len(row) if isinstance(row, list) else "no"
                raise WorldFolderError(f"{where}: {name}: table {table_name!r}, row {i} has {width} values; expected "
                                       f"{len(table.columns)} ({', '.join(table.column_names)}). Fix: give one value "
                                       "per column, in the table's order")
            for column, value in zip(table.columns, row, strict=True):
                _check_value(value, column.type, column.nullable, f"{where}: {name}: table {table_name!r}, row {i}, "
                             f"column {column.name!r}")
            checked.append(tuple(row))
        out[table_name] = tuple(checked)
    return out


def _check_value(value: Any, kind: str, nullable: bool, what: str) -> None:
    if value is None:
        if not nullable:
            raise WorldFolderError(f"{what} is None; the column is not nullable. Fix: give it a value, or declare "
                                   "it nullable = true")
        return
    allowed = _KIND.get(kind, (int, float, str))
    if isinstance(value, bool) and kind != "int" or not isinstance(value, allowed):
        raise WorldFolderError(f"{what} holds {type(value).__name__} {str(value)[:40]!r}; expected "
                               f"{_KIND_WORDS.get(kind, kind)} (a {kind} column). Fix: return a value of the "
                               "column's type")


@dataclass(frozen=True, eq=False)
class SeedGenerator:
    """A world folder's ``[data] generator``: called as ``(seed, anchor) -> {table: rows}``, it runs the file's
    ``rows(seed, anchor)`` in a confined child process (see the module docstring) and checks its answer.

    Compared and hashed by identity, as the module function it replaces was: each load of a folder is a new
    generator, so the world's row cache never serves the rows of a file edited since."""

    file: Path
    """The generator (a ``.py`` file inside the world folder, already confined to it by path)."""
    folder: Path
    """The world folder (the one place besides Python that the child may read)."""
    tables: tuple[Table, ...]
    """The world's tables: the answer is checked against them."""
    where: str
    """``world.toml:line`` of the ``generator`` key, for errors."""

    def __call__(self, seed: int, anchor: date) -> dict[str, tuple[tuple[Any, ...], ...]]:
        answer = run_world_code(self.file, self.folder, "rows", seed, anchor, where=self.where)
        body = answer.body
        if "error" in body:
            kind = body.get("error")
            message = str(body.get("message", ""))[-MAX_SHOWN_CHARS:].strip()
            if kind == "unconfined":
                raise WorldFolderError(
                    f"{self.where}: {self.file.name} was not run: world code runs only confined, and here {message}. "
                    f"Fix: run on Linux >= 5.13 with Landlock, or set {TRUST_WORLD_CODE_ENV}=1 if you trust this "
                    "folder's code to run without that confinement")
            if kind == "missing":
                raise WorldFolderError(f"{self.where}: {self.file} defines no rows(seed, anchor). Fix: define "
                                       "rows(seed: int, anchor: datetime.date) -> {table: [tuple, ...]}")
            raise WorldFolderError(f"{self.where}: {self.file.name}: rows(seed, anchor) failed: {message}. Fix: run it "
                                   "by hand and return {table name: [tuple of None/int/float/str, ...]}")
        for layer in body.get("left_out") or ():
            warnings.warn(f"{self.file} ran without one layer of its confinement ({TRUST_WORLD_CODE_ENV} is set): "
                          f"{layer}", RuntimeWarning, stacklevel=2)
        return checked_rows(body, self.tables, self.where, self.file.name)


__all__ = ["SeedGenerator", "checked_rows", "run_world_code", "trusted"]
