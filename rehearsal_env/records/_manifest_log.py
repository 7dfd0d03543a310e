"""The manifest on disk: an append-only JSON-lines file, read incrementally by a long-lived writer.

``episodes.parquet/_manifest.jsonl`` starts with ``{"version": 2}``; each later line either enters a part
(``{"part": NAME, "sha256": ..., "bytes": ..., "rows": ...}``, a later entry of the same name replacing the
earlier one) or drops one (``{"forget": NAME}``). Writing a part appends one line and fsyncs it, so a flush
costs the same whether the directory holds 10 parts or 10,000 (the version 1 manifest, ``_manifest.json``,
was one JSON object rewritten whole at every part). A line without its newline is an append a crash cut
short: readers skip it and the next append cuts it off first, so the part it named is "not in the manifest"
(the run stopped while writing it), as with version 1.

Directories written by older releases hold ``_manifest.json`` (version 1); they read unchanged, and the
first part written into one (``rehearsal run --resume``) moves its entries into ``_manifest.jsonl`` and
removes the old file, so a directory never holds two manifests that could disagree.

:func:`manifest_state` is the manifest as a reader sees it, read whole; :func:`manifest_state_since` is the
same for a writer that read the file before (``rehearsal serve`` seals after every part): it reads only the
bytes appended since, keeping the SHA-256 of the bytes read so far. A file that shrank or was replaced
(another inode) is read whole again.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._atomic import fsync_dir, write_atomic

MANIFEST = "_manifest.jsonl"
"""The manifest's file name inside ``episodes.parquet/`` (version 2, append-only)."""
LEGACY_MANIFEST = "_manifest.json"
"""The version 1 manifest's file name (directories written by older releases)."""
MANIFEST_VERSION = 2
LEGACY_VERSION = 1
_HEADER = (json.dumps({"version": MANIFEST_VERSION}) + "\n").encode()


class ManifestUnreadable(ValueError):
    """The manifest exists but is not a manifest: the message says what was expected and what was found."""


@dataclass
class ManifestState:
    """A manifest as read: its parts and, for version 2, the SHA-256 and length of the whole lines read."""

    parts: dict[str, dict[str, Any]]
    """``{part name: {"sha256", "bytes", "rows"}}``."""
    version: int
    """2 (``_manifest.jsonl``) or 1 (``_manifest.json``)."""
    sha256: str | None = None
    """SHA-256 of the first :attr:`length` bytes of ``_manifest.jsonl`` (None for version 1)."""
    length: int = 0
    """Bytes of ``_manifest.jsonl`` read (whole lines only)."""
    changed: set[str] = field(default_factory=set)
    """Parts entered or dropped by the bytes read in this call (every part on a whole read)."""


@dataclass
class _Cursor:
    inode: tuple[int, int]
    length: int
    hasher: Any
    parts: dict[str, dict[str, Any]]


_cursors: dict[str, _Cursor] = {}
_cursors_lock = threading.Lock()


def _apply(lines: bytes, parts: dict[str, dict[str, Any]], first: bool) -> set[str]:
    changed: set[str] = set()
    for n, line in enumerate(lines.splitlines()):
        try:
            entry = json.loads(line)
        except ValueError as exc:
            raise ManifestUnreadable(f"line {n + 1} is not JSON ({exc})") from None
        if first and n == 0:
            if entry != {"version": MANIFEST_VERSION}:
                raise ManifestUnreadable(f"expected the first line {_HEADER.decode().strip()}, found {line[:80]!r}")
            continue
        if isinstance(entry, dict) and isinstance(entry.get("part"), str):
            name = entry.pop("part")
            parts[name] = entry
            changed.add(name)
        elif isinstance(entry, dict) and isinstance(entry.get("forget"), str):
            parts.pop(entry["forget"], None)
            changed.add(entry["forget"])
        else:
            raise ManifestUnreadable(f"expected a part entry or a forget line, found {line[:80]!r}")
    return changed


def _whole_lines(data: bytes) -> bytes:
    return data[:data.rfind(b"\n") + 1]


def parts_of(data: bytes) -> dict[str, dict[str, Any]]:
    """The parts that ``_manifest.jsonl`` bytes list (whole lines only).

    Raises:
        ManifestUnreadable: the bytes are not a manifest.
    """
    parts: dict[str, dict[str, Any]] = {}
    _apply(_whole_lines(data), parts, True)
    return parts


def manifest_state(directory: Path) -> ManifestState | None:
    """The manifest of ``directory`` read whole (None: no manifest of either version).

    Raises:
        ManifestUnreadable: the file is not a manifest.
        OSError: it cannot be read.
    """
    try:
        data = _whole_lines((directory / MANIFEST).read_bytes())
    except FileNotFoundError:
        return _legacy(directory)
    parts: dict[str, dict[str, Any]] = {}
    changed = _apply(data, parts, True)
    return ManifestState(parts, MANIFEST_VERSION, hashlib.sha256(data).hexdigest(), len(data), changed)


def _legacy(directory: Path) -> ManifestState | None:
    try:
        body = json.loads((directory / LEGACY_MANIFEST).read_text())
    except FileNotFoundError:
        return None
    if not isinstance(body, dict) or body.get("version") != LEGACY_VERSION or not isinstance(body.get("parts"), dict):
        found = body.get("version") if isinstance(body, dict) else type(body).__name__
        raise ManifestUnreadable(f"expected manifest version {LEGACY_VERSION}, found {found!r}")
    return ManifestState(dict(body["parts"]), LEGACY_VERSION, changed=set(body["parts"]))


def manifest_state_since(directory: Path) -> ManifestState | None:
    """The manifest of ``directory``, reading only what was appended since this process last read it here.

    ``changed`` names the parts the new bytes entered or dropped (all of them when the file was read whole).
    """
    path = directory / MANIFEST
    key = str(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        with _cursors_lock:
            _cursors.pop(key, None)
        return _legacy(directory)
    inode = (st.st_ino, st.st_dev)
    with _cursors_lock:
        cursor = _cursors.get(key)
        if cursor is not None and cursor.inode == inode and st.st_size >= cursor.length:
            with path.open("rb") as fh:
                fh.seek(cursor.length)
                new = _whole_lines(fh.read())
            changed = _apply(new, cursor.parts, False) if new else set()
            cursor.hasher.update(new)
            cursor.length += len(new)
            return ManifestState(dict(cursor.parts), MANIFEST_VERSION, cursor.hasher.hexdigest(), cursor.length,
                                 changed)
    state = manifest_state(directory)
    if state is not None and state.version == MANIFEST_VERSION:
        with _cursors_lock:
            _cursors[key] = _Cursor(inode, state.length, _hasher_of(path, state.length), dict(state.parts))
    return state


def _hasher_of(path: Path, length: int) -> Any:
    with path.open("rb") as fh:
        return hashlib.sha256(fh.read(length))


def append_lines(directory: Path, entries: list[dict[str, Any]]) -> None:
    """Append ``entries`` to the manifest (created with its header, or moved from version 1, first); the caller
    holds the directory's manifest lock."""
    path = directory / MANIFEST
    if not path.exists():
        legacy = _legacy(directory)
        body = _HEADER + b"".join(_line({"part": name, **entry})
                                  for name, entry in sorted((legacy.parts if legacy else {}).items()))
        write_atomic(path, body)
        (directory / LEGACY_MANIFEST).unlink(missing_ok=True)
        fsync_dir(directory)
    with path.open("r+b") as fh:
        end = fh.seek(0, os.SEEK_END)
        fh.seek(max(end - 1, 0))
        if end == 0:  # created empty by something else: give it its header
            fh.write(_HEADER)
            end = len(_HEADER)
        elif fh.read(1) != b"\n":  # an append cut short by a crash: its part is not in the manifest
            fh.seek(0)
            end = len(_whole_lines(fh.read()))
            fh.truncate(end)
        fh.seek(end)
        fh.write(b"".join(_line(e) for e in entries))
        fh.flush()
        os.fsync(fh.fileno())


def _line(entry: dict[str, Any]) -> bytes:
    return (json.dumps(entry, sort_keys=True, separators=(",", ":")) + "\n").encode()
