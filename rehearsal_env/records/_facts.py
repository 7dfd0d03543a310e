"""What one part file holds (SHA-256, bytes, rows, run ids), read once per version of the file in a process.

Every check of a run's records (:mod:`._manifest`) and every seal (:mod:`._seal`) compares each part's
bytes with the manifest. A long-lived writer such as ``rehearsal serve`` seals its run directory after
every part it adds, so without a memo each seal would read and hash every part written before it, and
a server's records would cost more with every episode it had recorded. The facts of a part are kept
in this process's memory only (nothing on disk can vouch for them) under the file's path, size,
modification time, change time, inode and device: a file changed in any way, even rewritten with its
old size and modification time, has another change time (which no program can set back), so it is
read again. A file that cannot be read is never memoised; one that is not Parquet is, with the reason.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

MAX_MEMO = 100_000
"""Parts whose facts are kept (the least recently used are dropped beyond)."""


@dataclass(frozen=True)
class PartFacts:
    """What one part file holds."""

    sha256: str
    """The SHA-256 of its bytes."""
    size: int
    """Its length in bytes."""
    rows: int | None
    """Rows in its Parquet metadata (None: not readable as Parquet)."""
    run_ids: tuple[str, ...] | None
    """The distinct run ids of its rows (None: no ``run_id`` column, so not our records, or not Parquet)."""
    parquet_error: str | None = None
    """Why it cannot be read as Parquet (None: it can)."""


FileKey = tuple[str, int, int, int, int, int]
"""A file's path, size, modification and change times (ns), inode and device: changes whenever its bytes do."""
_memo: OrderedDict[FileKey, PartFacts] = OrderedDict()
_lock = threading.Lock()


def file_key(path: Path) -> FileKey:
    """The key of ``path`` as it is now: anything read from it may be remembered under it."""
    st = path.stat()
    return (str(path), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


def facts_of(data: bytes) -> PartFacts:
    """The facts of a part's bytes."""
    digest = hashlib.sha256(data).hexdigest()
    try:
        part = pq.ParquetFile(pa.BufferReader(data))  # the footer parsed once (not pq.read_table: a dataset each call)
        run_ids: tuple[str, ...] | None = None
        if "run_id" in part.schema_arrow.names:
            column = part.read(columns=["run_id"]).column("run_id")
            run_ids = tuple(str(i) for i in pc.unique(column).to_pylist())
        return PartFacts(digest, len(data), part.metadata.num_rows, run_ids)
    except (pa.ArrowException, OSError) as exc:
        return PartFacts(digest, len(data), None, None, str(exc))


def remember_written(path: Path, data: bytes) -> PartFacts:
    """The facts of ``data``, just written to ``path`` by this process, remembered for the file as it is now (a
    writer that checks its own part before sealing does not read it back)."""
    facts = facts_of(data)
    key = file_key(path)
    if key[1] == len(data):
        with _lock:
            _memo[key] = facts
            while len(_memo) > MAX_MEMO:
                _memo.popitem(last=False)
    return facts


def part_facts(path: Path) -> PartFacts:
    """The facts of ``path``, read (and memoised) unless this version of the file was read before.

    Raises:
        OSError: the file cannot be read.
    """
    key = file_key(path)
    with _lock:
        known = _memo.get(key)
        if known is not None:
            _memo.move_to_end(key)
            return known
    data = path.read_bytes()
    facts = facts_of(data)
    if file_key(path) == key:  # unchanged while it was read: these facts are this version's
        with _lock:
            _memo[key] = facts
            while len(_memo) > MAX_MEMO:
                _memo.popitem(last=False)
    return facts
