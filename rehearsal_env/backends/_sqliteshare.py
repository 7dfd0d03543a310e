"""One world's SQLite snapshot held once per process, read by every database that has not written yet.

A :class:`SharedSnapshot` puts a world's seeded snapshot into a *named* in-memory
database (SQLite's ``memdb`` VFS; a name that starts with ``/`` is shared by every
connection of the process that opens it). Nothing ever writes to it after it is
filled. Each thread reads it through its own :class:`Reader`: a connection opened
read-only (``mode=ro``) under an authorizer that allows reading alone, so

- readers never wait for each other (each thread has its own connection, statement
  state and deadline; SQLite's shared in-memory file takes only shared locks), and
  one session's long query never delays another session's step;
- a statement that would do more than read (a write, a ``PRAGMA``, an ``ATTACH``) is
  refused before it runs: :meth:`Reader.run` raises :class:`NeedsPrivate`, and the
  backend runs it on the session's private copy instead (:mod:`.sqlite`);
- per-connection bounds hold as on a private copy: temporary tables and sorters spill
  to files (``temp_store = FILE``), the progress handler stops a statement past its
  deadline, and :func:`._sqliteread.reading` sets the agent's limits per statement.

A reader connection lives as long as its thread and its snapshot; a snapshot lives
while a database or the process's snapshot cache holds it.
"""

from __future__ import annotations

import itertools
import math
import sqlite3
import threading
import time
from collections.abc import Sequence
from typing import Any

from ._database import Row
from ._sqlitepages import SnapshotFile
from ._sqlitepages import available as pages_available
from ._sqliteread import PROGRESS_STEPS, Guard, Ticker, authorize_read_only

_NAMES = itertools.count()
_PRIVATE_ONLY = frozenset({sqlite3.SQLITE_AUTH, sqlite3.SQLITE_READONLY})
"""Error codes of a statement that the shared snapshot refused because it would do more than read."""


class NeedsPrivate(Exception):
    """The statement would do more than read: run it on the session's private copy."""


class Reader:
    """One thread's read-only connection to a :class:`SharedSnapshot`."""

    def __init__(self, name: str) -> None:
        self.conn = sqlite3.connect(f"file:{name}?vfs=memdb&mode=ro", uri=True, isolation_level=None,
                                    check_same_thread=False)
        self.conn.execute("PRAGMA temp_store = FILE")  # sorters and temporary tables spill past cache_size
        self.conn.execute("PRAGMA query_only = ON")  # once: toggling a flag pragma expires every statement
        self.deadline = math.inf
        self.ticker: Ticker = (self._past_deadline, PROGRESS_STEPS)
        self.conn.set_progress_handler(*self.ticker)
        self.guard = Guard(authorize_read_only)
        """The connection's authorizer: reading only, switched in place by a check (:class:`._sqliteread.Guard`)."""
        self.conn.set_authorizer(self.guard)

    def _past_deadline(self) -> int:
        return int(time.monotonic() > self.deadline)

    def run(self, sql: str, params: Sequence[Any], timeout_s: float) -> list[Row]:
        """All rows of a reading statement, stopped after ``timeout_s``.

        Raises:
            NeedsPrivate: the statement would do more than read (nothing ran).
            sqlite3.Error: the statement failed as it would on a private copy of the snapshot.
        """
        self.deadline = time.monotonic() + timeout_s
        try:
            return self.conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            if getattr(exc, "sqlite_errorcode", None) in _PRIVATE_ONLY:
                raise NeedsPrivate(str(exc)) from exc
            raise
        finally:
            self.deadline = math.inf


class SharedSnapshot:
    """A world's snapshot, once in memory for the whole process, with one :class:`Reader` per thread."""

    def __init__(self, snapshot: bytes) -> None:
        self.snapshot = snapshot
        """The serialized snapshot (what a private copy is deserialized from)."""
        self.name = f"/rehearsal-snapshot-{next(_NAMES)}-{id(self):x}"
        """The shared in-memory database's name (process-wide in SQLite's ``memdb`` VFS)."""
        self._owner = sqlite3.connect(f"file:{self.name}?vfs=memdb", uri=True, isolation_level=None,
                                      check_same_thread=False)  # keeps the shared database alive
        source = sqlite3.connect(":memory:", isolation_level=None)
        try:
            source.deserialize(snapshot)
            source.backup(self._owner)  # page by page: the same b-trees, so the same rows in the same order
        finally:
            source.close()
        self._local = threading.local()
        self._file: SnapshotFile | None = None
        self._file_lock = threading.Lock()

    def pages(self) -> SnapshotFile | None:
        """The snapshot as a memory file that sessions' copies map page by page (made at the first write of any
        session; None where copy on write by page is not available: see :mod:`._sqlitepages`)."""
        if self._file is None and pages_available():
            with self._file_lock:
                if self._file is None:
                    self._file = SnapshotFile(self.snapshot)
        return self._file

    def reader(self) -> Reader:
        """This thread's reader (opened on first use)."""
        reader: Reader | None = getattr(self._local, "reader", None)
        if reader is None:
            reader = self._local.reader = Reader(self.name)
        return reader
