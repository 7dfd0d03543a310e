"""Checkpoint bytes: an in-flight episode, versioned and self-describing, checked before anything is rebuilt.

Layout::

    REHEARSAL-CHECKPOINT\\n          magic (21 bytes)
    header length                    4 bytes, big-endian
    header                           canonical JSON (sorted keys), UTF-8
    payload                          zlib-compressed canonical JSON

The header says what the bytes are without decompressing anything: ``format``
(:data:`FORMAT_VERSION`), ``package_version``, ``world``, ``world_version`` (the
``wv_`` id of the world as the env ran it, its clock included), ``anchor`` (the day
its clock and data were anchored to), ``scenario``,
``backend``, ``turn``, ``episode_id``, ``payload_bytes`` and ``digest``: a SHA-256
over the header's other fields and the payload, so an edit of either, or bytes cut
short, is refused before anything is read. The payload holds the episode's state
(:mod:`._state`), the database's touched rows (:mod:`._delta`) and the env's random
state. Nothing in it is code: reading a checkpoint never runs anything it holds (the
digest guards against damage, not against a forger: keep checkpoints where only you
can write).

Delta records (:mod:`._chain`: an incremental checkpoint's turns) may follow the
payload, each::

    REHEARSAL-DELTA\n        magic (16 bytes)
    body length              4 bytes, big-endian
    body                     JSON, UTF-8 (the digest covers these very bytes)
    chain digest             32 bytes: SHA-256 of the previous digest (the header's, for the first) and the body
"""

from __future__ import annotations

import functools
import hashlib
import json
import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._version import __version__
from ..identity import world_version
from ..worlds import World

MAGIC = b"REHEARSAL-CHECKPOINT\n"
FORMAT_VERSION = 1
"""Version of the byte layout and header; a reader refuses any other."""
MAX_PAYLOAD = 256 << 20
"""The most payload bytes (compressed or not) a checkpoint may declare."""
_LENGTH = struct.Struct(">I")
DELTA_MAGIC = b"REHEARSAL-DELTA\n"
"""The start of a delta record appended to a checkpoint."""
MAX_RECORD = 64 << 20
"""The most body bytes a delta record may declare."""
_HEADER_KEYS = frozenset({"format", "package_version", "world", "world_version", "anchor", "scenario", "backend",
                          "turn", "episode_id", "payload_bytes", "digest"})


class CheckpointError(ValueError):
    """Bytes that are not a checkpoint this package can restore (says what was expected and what arrived)."""


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint read back and checked (its digest matched)."""

    header: Mapping[str, Any]
    """The header's fields (see the module docstring)."""
    payload: Mapping[str, Any]
    """The state: ``env``, ``episode``, ``database`` and ``rng``."""
    records: tuple[Mapping[str, Any], ...] = ()
    """The delta records appended after the payload, checked and read, in order (see :mod:`._chain`)."""


@functools.lru_cache(maxsize=64)
def version_of(world: World) -> str:
    """The world version id of ``world`` (worlds are immutable: computed once per world object)."""
    return world_version(world)


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def _digest(header: Mapping[str, Any], payload: bytes) -> str:
    fields = {k: v for k, v in header.items() if k != "digest"}
    return hashlib.sha256(_canonical(fields) + b"\x00" + payload).hexdigest()


def encode(header: Mapping[str, Any], payload: Mapping[str, Any]) -> bytes:
    """Checkpoint bytes of ``header`` (without ``format``, ``package_version``, ``payload_bytes`` and
    ``digest``, which this adds) and ``payload``."""
    body = zlib.compress(_canonical(payload), 1)
    full = {**header, "format": FORMAT_VERSION, "package_version": __version__, "payload_bytes": len(body)}
    full["digest"] = _digest(full, body)
    head = _canonical(full)
    return MAGIC + _LENGTH.pack(len(head)) + head + body


SERVED_MAGIC = b"REHEARSAL-SERVED-CHECKPOINT\n"
"""The start of a checkpoint a server handed out: these bytes wrapped with the server's facts and their tag."""
MAX_FACTS = 4096
"""The longest facts block a served checkpoint may declare."""
TAG_BYTES = 32
"""The length of a served checkpoint's tag (HMAC-SHA256)."""


@dataclass(frozen=True)
class Served:
    """A served checkpoint taken apart (nothing verified: :class:`rehearsal_env.episodes.CheckpointSeal` checks the
    tag with the server's key)."""

    signed: bytes
    """The facts with their length prefix: what the tag covers, with :attr:`checkpoint`."""
    facts: bytes
    """The server's facts (canonical JSON)."""
    tag: bytes
    """The tag the server computed."""
    checkpoint: bytes
    """The env's checkpoint bytes inside."""


def wrap_served(facts: bytes, tag_of: Any, checkpoint: bytes) -> bytes:
    """``checkpoint`` wrapped with ``facts`` and ``tag_of(signed, checkpoint)`` (see :class:`Served`)."""
    signed = _LENGTH.pack(len(facts)) + facts
    return SERVED_MAGIC + signed + tag_of(signed, checkpoint) + checkpoint


def open_served(data: bytes) -> Served | None:
    """The parts of a served checkpoint; None for bytes that do not start like one.

    Raises:
        CheckpointError: a served checkpoint cut short or damaged.
    """
    data = bytes(data)
    if not data.startswith(SERVED_MAGIC):
        return None
    rest = data[len(SERVED_MAGIC):]
    size = _LENGTH.unpack_from(rest)[0] if len(rest) >= _LENGTH.size else -1
    if not 0 <= size <= MAX_FACTS or len(rest) < _LENGTH.size + size + TAG_BYTES:
        raise CheckpointError("the served checkpoint is cut short or damaged: take a new one")
    end = _LENGTH.size + size
    return Served(rest[:end], rest[_LENGTH.size:end], rest[end:end + TAG_BYTES], rest[end + TAG_BYTES:])


def _inner(data: bytes) -> bytes:
    """The env's checkpoint of ``data``: itself, or what a served checkpoint wraps (restoring it in your own process
    needs no server key: the digest still guards it)."""
    served = open_served(data)
    return served.checkpoint if served is not None else bytes(data)


def read_header(data: bytes) -> dict[str, Any]:
    """The header of checkpoint bytes, checked for layout and format version only (not the digest).

    Raises:
        CheckpointError: not checkpoint bytes, cut short, or another format version.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise CheckpointError(f"expected checkpoint bytes (from env.checkpoint()), got {type(data).__name__}")
    data = _inner(data)
    if len(data) < len(MAGIC) and MAGIC.startswith(data) and data:
        raise CheckpointError(f"the checkpoint is truncated: {len(data)} bytes, not even its {len(MAGIC)}-byte magic")
    if not data.startswith(MAGIC):
        raise CheckpointError(f"these {len(data)} bytes are not a rehearsal-env checkpoint: expected them to start "
                              f"with {MAGIC!r}, got {data[:len(MAGIC)]!r}; pass the bytes env.checkpoint() returned")
    start = len(MAGIC) + _LENGTH.size
    if len(data) < start:
        raise CheckpointError(f"the checkpoint is truncated: {len(data)} bytes, not even a header length")
    (size,) = _LENGTH.unpack_from(data, len(MAGIC))
    if size > 1 << 20 or len(data) < start + size:
        raise CheckpointError(f"the checkpoint is truncated or damaged: its header declares {size} bytes, "
                              f"{max(0, len(data) - start)} follow")
    try:
        header = json.loads(data[start:start + size])
    except ValueError as exc:
        raise CheckpointError(f"the checkpoint's header is damaged (not JSON: {exc})") from None
    if not isinstance(header, dict) or set(header) != _HEADER_KEYS:
        got = sorted(header) if isinstance(header, dict) else type(header).__name__
        raise CheckpointError(f"the checkpoint's header is damaged: expected the fields {sorted(_HEADER_KEYS)}, "
                              f"got {got}")
    if header["format"] != FORMAT_VERSION:
        raise CheckpointError(f"the checkpoint has format version {header['format']!r}; this rehearsal-env "
                              f"({__version__}) reads format {FORMAT_VERSION} only: restore it with the "
                              f"rehearsal-env that made it ({header['package_version']})")
    return header


def decode(data: bytes, world: World) -> Checkpoint:
    """Checkpoint bytes read back and checked against ``world`` (the world as the env will run it).

    Raises:
        CheckpointError: not a checkpoint, truncated, edited (the digest differs), made by another package
            version, or of another world or world version; each says what was expected.
    """
    header = read_header(data)
    data = _inner(data)
    start = len(MAGIC) + _LENGTH.size + _LENGTH.unpack_from(data, len(MAGIC))[0]
    declared = header["payload_bytes"]
    body = data[start:start + declared] if isinstance(declared, int) and declared >= 0 else data[start:]
    rest = data[start + len(body):]
    if not isinstance(declared, int) or not 0 <= declared <= MAX_PAYLOAD or len(body) != declared or (
            rest and not rest.startswith(DELTA_MAGIC)):
        raise CheckpointError(f"the checkpoint is truncated or has bytes appended: its header declares a "
                              f"{declared}-byte payload, {len(body)} bytes follow")
    if _digest(header, body) != header["digest"]:
        raise CheckpointError("the checkpoint was edited or damaged: its SHA-256 digest does not match its header "
                              "and payload; take a new checkpoint (env.checkpoint())")
    if header["package_version"] != __version__:
        raise CheckpointError(f"the checkpoint was made by rehearsal-env {header['package_version']}; this is "
                              f"{__version__}: restore it with rehearsal-env {header['package_version']}")
    if header["world"] != world.name:
        raise CheckpointError(f"the checkpoint is of world {header['world']!r}, not {world.name!r}: pass "
                              f"world={header['world']!r} (or that World)")
    have = version_of(world)
    if header["world_version"] != have:
        raise CheckpointError(f"the checkpoint is of world version {header['world_version']} of "
                              f"{header['world']!r}; this process has {have}: restore it where that world "
                              "version is installed (rehearsal versions)")
    try:
        raw = zlib.decompressobj().decompress(body, MAX_PAYLOAD + 1)
        payload = json.loads(raw)
    except (zlib.error, ValueError) as exc:
        raise CheckpointError(f"the checkpoint's payload is damaged: {exc}") from None
    if len(raw) > MAX_PAYLOAD:
        raise CheckpointError(f"the checkpoint's payload unpacks to more than {MAX_PAYLOAD} bytes; refused")
    return Checkpoint(header, payload, tuple(split_records(rest, header["digest"])))


def delta_record(previous: bytes, body: bytes) -> tuple[bytes, bytes]:
    """A delta record of ``body`` chained to ``previous`` (a digest), and its own chain digest."""
    digest = hashlib.sha256(previous + body).digest()
    return DELTA_MAGIC + _LENGTH.pack(len(body)) + body + digest, digest


def split_records(rest: bytes, digest: str) -> list[dict[str, Any]]:
    """The delta records appended to a full checkpoint (whose digest is ``digest``), checked and read, in order.

    Raises:
        CheckpointError: a record cut short, edited, dropped or reordered (its chain digest differs).
    """
    out: list[dict[str, Any]] = []
    previous, at = bytes.fromhex(digest), 0
    while at < len(rest):
        head = len(DELTA_MAGIC) + _LENGTH.size
        if rest[at:at + len(DELTA_MAGIC)] != DELTA_MAGIC or len(rest) < at + head:
            raise CheckpointError(f"the checkpoint has {len(rest) - at} bytes after its payload that are not a delta "
                                  f"record (expected {DELTA_MAGIC!r}); pass the bytes a CheckpointChain gave")
        (size,) = _LENGTH.unpack_from(rest, at + len(DELTA_MAGIC))
        end = at + head + size + 32
        if size > MAX_RECORD or len(rest) < end:
            raise CheckpointError(f"delta record {len(out) + 1} of the checkpoint is cut short or damaged: it declares "
                                  f"{size} bytes, {max(0, len(rest) - at - head)} follow")
        body = rest[at + head:at + head + size]
        digest_now = hashlib.sha256(previous + body).digest()
        if digest_now != rest[end - 32:end]:
            raise CheckpointError(f"delta record {len(out) + 1} of the checkpoint was edited, dropped or reordered: "
                                  "its chain digest does not match; take a new checkpoint")
        try:
            record = json.loads(body)
        except ValueError as exc:
            raise CheckpointError(f"delta record {len(out) + 1} of the checkpoint is damaged: {exc}") from None
        if not isinstance(record, dict) or not isinstance(record.get("turn"), int):
            raise CheckpointError(f"delta record {len(out) + 1} of the checkpoint has no turn")
        out.append(record)
        previous, at = digest_now, end
    return out

