"""The SHA-256 of every file of a world folder, streamed and cached, so a big file costs once.

A folder world's version hashes every file of its folder (:func:`folder_hashes`). Files are read in
1 MiB blocks (``hashlib.file_digest``), never whole, and each digest is cached in the state home
(``hash_cache.json``) under the file's resolved path, size, modification time, change time, inode and
device: the change time and inode cannot be set back by hand, so a file rewritten with its old size and
modification time is hashed again. Every file is bounded (:data:`._paths.MAX_FILE_BYTES`), and so is
their number (:data:`._paths.MAX_FILES`); a symbolic link that points out of the folder is refused.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path

from ..._atomic import write_atomic
from ..._home import home
from ._paths import MAX_FILES, check_size, confined_file
from ._source import WorldFolderError

CACHE_FILE = "hash_cache.json"
"""The digest cache's file name in the state home."""
MAX_CACHED = 50_000
"""Entries the cache keeps (the oldest are dropped beyond)."""
_lock = threading.Lock()
_memory: dict[str, str] = {}
_loaded_from: Path | None = None
_dirty = False


def _key(path: Path, st: os.stat_result) -> str:
    return f"{path}\x1f{st.st_size}\x1f{st.st_mtime_ns}\x1f{st.st_ctime_ns}\x1f{st.st_ino}\x1f{st.st_dev}"


def _cache_path() -> Path:
    return home() / CACHE_FILE


def _load() -> None:
    global _loaded_from
    path = _cache_path()
    if _loaded_from == path:
        return
    _memory.clear()
    try:
        body = json.loads(path.read_text())
        if isinstance(body, dict):
            _memory.update({k: v for k, v in body.items() if isinstance(k, str) and isinstance(v, str)})
    except (OSError, ValueError):
        pass  # no cache (or a damaged one): every file is hashed again
    _loaded_from = path


def _save() -> None:
    items = list(_memory.items())[-MAX_CACHED:]
    try:
        path = _cache_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(dict(items)))
    except OSError:
        pass  # a read-only home: the digests are kept for this process only


def file_sha256(path: Path) -> str:
    """The SHA-256 of ``path``, streamed, from the cache when the file has not changed since."""
    st = path.stat()
    key = _key(path, st)
    with _lock:
        _load()
        cached = _memory.get(key)
    if cached is not None:
        return cached
    with open(path, "rb") as fh:
        digest = hashlib.file_digest(fh, "sha256").hexdigest()
    global _dirty
    with _lock:
        _memory[key] = digest
        _dirty = True
    return digest


def folder_hashes(folder: Path) -> dict[str, str]:
    """``{relative path: sha256}`` of every file of a world folder (caches left out): its identity.

    Raises:
        WorldFolderError: a file above the size bound, too many files, or a link out of the folder.
    """
    root = folder.resolve()
    files: list[tuple[str, Path]] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for d in dirnames:
            if (here / d).is_symlink():
                confined_file(root, here / d)  # a link to a folder inside is left to its real path
        for name in sorted(filenames):
            if name.endswith(".pyc"):
                continue
            path = here / name
            real = confined_file(root, path) if path.is_symlink() else path
            if not real.is_file():
                continue
            check_size(real)
            files.append((path.relative_to(root).as_posix(), real))
            if len(files) > MAX_FILES:
                raise WorldFolderError(f"{root}: holds more than {MAX_FILES:,} files; a world folder holds its "
                                       "world, its application and its data. Fix: move the rest elsewhere")
    global _dirty
    out = {rel: file_sha256(real) for rel, real in sorted(files)}
    with _lock:
        if _dirty:
            _save()
            _dirty = False
    return out
