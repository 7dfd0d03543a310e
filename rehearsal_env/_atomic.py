"""Writing a file so that a reader sees the old file or the whole new one, never a part, even after a crash.

:func:`write_atomic` writes a temporary file in the same folder (a unique name, so two writers never
share one), flushes and fsyncs it, renames it over the target, then fsyncs the folder so the rename
itself is on disk. Every file the package rewrites in place (manifests, run files, key stores,
profiles, registries) goes through it.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def fsync_dir(folder: Path) -> None:
    """Make a rename or a new file in ``folder`` durable (a file system that cannot fsync a folder is left be)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomic(path: str | Path, data: bytes | str, *, mode: int | None = None) -> None:
    """Replace ``path`` with ``data`` (text is written as UTF-8) atomically and durably.

    ``mode``: the new file's permission bits (e.g. ``0o600`` for secrets), set before it appears under
    its name; default: the temporary file's (``0o600``) widened to what the umask allows for a new file.
    """
    target = Path(path)
    payload = data.encode() if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is None:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(target.parent)
