"""A session's own copy of a world's SQLite snapshot, copied on write by page (by the kernel).

A session that writes needs its own database in the snapshot's state. Copying the
serialized snapshot (``Connection.deserialize``: 1.5 MiB for the shop world) costs
the whole database in memory and a copy of every byte, although an episode changes a
few pages. Here the snapshot's bytes are held once per process in an anonymous
memory file (``memfd``), and a session's copy is a *private* mapping of that file
handed to SQLite as the database's memory (``sqlite3_deserialize`` with a buffer
SQLite does not own and may not resize): every page the session only reads stays
the shared file's page; the first write to a 4 KiB page gives the session its own
page (the kernel's copy on write). The database's bytes, b-trees and behaviour are
those of a deserialized copy: only where its bytes live differs.

The mapping reserves :data:`MAX_DATABASE_BYTES` (SQLite's own limit on an in-memory
database, the same as a deserialized copy's) and commits only what is written.

Python's ``sqlite3`` has no call that passes SQLite a buffer it does not own, so
:func:`attach_pages` calls ``sqlite3_deserialize`` of the very library the ``sqlite3``
module runs on, with the connection's handle. That needs CPython on Linux (the
handle's place in the connection object, ``memfd_create``); :func:`available` says
whether a probe (run once, at the first session's first write, never at import) worked (the environment variable
``REHEARSAL_SQLITE_PAGE_COPY=0`` turns it off): otherwise sessions copy the snapshot
as before.
"""

from __future__ import annotations

import ctypes
import functools
import mmap
import os
import platform
import sqlite3
import sys

__all__ = ["MAX_DATABASE_BYTES", "PageCopy", "SnapshotFile", "attach_pages", "available"]

MAX_DATABASE_BYTES = 1 << 30
"""The most bytes a session's database may grow to (SQLite's default limit on an in-memory database)."""
_MAP_NORESERVE = getattr(mmap, "MAP_NORESERVE", 0x4000)
"""Reserve no swap for the mapping: only the pages a session writes are committed."""


class SnapshotFile:
    """A snapshot's bytes once in an anonymous memory file, sized for a session's growth."""

    def __init__(self, snapshot: bytes) -> None:
        self.size = len(snapshot)
        """The snapshot's length in bytes (the database's size when a copy starts)."""
        self.capacity = max(MAX_DATABASE_BYTES, self.size)
        """The length of every mapping (the file beyond the snapshot is a hole: zeros that cost nothing)."""
        self.fd = os.memfd_create("rehearsal-snapshot", os.MFD_CLOEXEC)  # type: ignore[attr-defined,unused-ignore]
        try:
            view = memoryview(snapshot)
            while view:
                view = view[os.write(self.fd, view):]
            os.ftruncate(self.fd, self.capacity)
        except BaseException:
            os.close(self.fd)
            raise

    def __del__(self) -> None:
        fd = getattr(self, "fd", None)
        if fd is not None:
            os.close(fd)


class PageCopy:
    """One session's private mapping of a :class:`SnapshotFile`, in use as a connection's ``main`` database (a
    resource, not a record). :meth:`detach` (or the copy's finalizer) gives the connection an empty database before
    unmapping, so SQLite never holds pages that are gone."""

    def __init__(self, conn: sqlite3.Connection, source: SnapshotFile) -> None:
        self.conn = conn
        """The connection whose ``main`` database the mapping is (kept alive while the copy is)."""
        self.source = source
        """The file mapped (kept alive while the copy is)."""
        self.mapping: mmap.mmap | None = mmap.mmap(source.fd, source.capacity, flags=mmap.MAP_PRIVATE | _MAP_NORESERVE,
                                                   prot=mmap.PROT_READ | mmap.PROT_WRITE)
        """The private mapping (None once unmapped)."""
        self.address = ctypes.addressof(ctypes.c_char.from_buffer(self.mapping))
        """Where the mapping starts (what SQLite holds as the database's memory)."""

    def detach(self) -> None:
        """Give the connection an empty ``main`` database (it stays open for the session's next copy; one SQLite
        cannot detach is closed), then unmap the pages (the written ones are freed)."""
        mapping, self.mapping = self.mapping, None
        if mapping is None:
            return
        handle = _handle(self.conn)  # 0 once the connection is closed: SQLite holds nothing then
        if handle and ((lib := _library()) is None or lib.sqlite3_deserialize(handle, b"main", None, 0, 0, 0) != 0):
            self.conn.close()
        mapping.close()

    def __del__(self) -> None:
        self.detach()


@functools.cache
def _library() -> ctypes.CDLL | None:
    """``sqlite3_deserialize`` of the library the ``sqlite3`` module is linked with, or None where unusable."""
    if (sys.implementation.name != "cpython" or platform.system() != "Linux" or ctypes.sizeof(ctypes.c_void_p) != 8
            or not hasattr(os, "memfd_create") or os.environ.get("REHEARSAL_SQLITE_PAGE_COPY", "1") == "0"):
        return None
    try:
        import _sqlite3

        lib = ctypes.CDLL(_sqlite3.__file__)  # its symbols and its dependencies': the very same library
        deserialize = lib.sqlite3_deserialize
        version = lib.sqlite3_libversion
    except (ImportError, OSError, AttributeError):
        return None
    version.restype = ctypes.c_char_p
    if version() != sqlite3.sqlite_version.encode():
        return None
    deserialize.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                            ctypes.c_uint]
    deserialize.restype = ctypes.c_int
    return lib


def _handle(conn: sqlite3.Connection) -> int:
    """The ``sqlite3 *`` of a connection: CPython's connection object holds it right after its object header."""
    return int(ctypes.c_void_p.from_address(id(conn) + object.__basicsize__).value or 0)




def attach_pages(conn: sqlite3.Connection, source: SnapshotFile) -> PageCopy:
    """Make ``conn``'s ``main`` database a private, copy-on-write mapping of ``source`` (what ``deserialize`` of
    the snapshot would give, without copying it).

    Raises:
        OSError: the mapping could not be made (address space, a strict overcommit policy).
        sqlite3.OperationalError: SQLite refused the buffer.
    """
    lib = _library()
    if lib is None:
        raise sqlite3.OperationalError("copy on write by page is not available in this process")
    copy = PageCopy(conn, source)
    rc = lib.sqlite3_deserialize(_handle(conn), b"main", copy.address, source.size, source.capacity, 0)
    if rc != 0:
        mapping, copy.mapping = copy.mapping, None
        if mapping is not None:
            mapping.close()  # SQLite took nothing
        raise sqlite3.OperationalError(f"sqlite3_deserialize refused the mapped snapshot (error code {rc})")
    conn.execute(f"PRAGMA mmap_size = {source.capacity}")  # pages read in place, never copied into the cache
    return copy


@functools.cache
def available() -> bool:
    """Whether sessions' copies are made by page in this process (else each deserializes the whole snapshot):
    a mapped copy of a probe database reads and writes as a deserialized one does. Run once, on first use (not at
    import: importing the package loads no native library)."""
    if _library() is None:
        return False
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        copy = attach_pages(conn, SnapshotFile(_probe_snapshot()))
        conn.execute("INSERT INTO probe VALUES (2)")
        ok = conn.execute("SELECT sum(x) FROM probe").fetchone() == (3,)
        copy.detach()
        return ok
    except (OSError, sqlite3.Error, ValueError):
        return False
    finally:
        conn.close()


def _probe_snapshot() -> bytes:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE probe (x INTEGER)")
    conn.execute("INSERT INTO probe VALUES (1)")
    conn.commit()
    data = conn.serialize()
    conn.close()
    return data

