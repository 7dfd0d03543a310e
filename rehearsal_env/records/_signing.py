"""The keys that seal runs: one Ed25519 signing key per evaluator, and the public keys a reader trusts.

Both live in the state home (:func:`rehearsal_env._home.home`):

- ``signing_key.pem``: the private key runs are sealed with (PKCS #8 PEM, mode 0600). The
  first run that seals creates it, saying so on stderr; ``rehearsal keys signing create``
  makes one up front. A key file readable by group or others is refused, as ssh does.
- ``trusted_keys.json``: ``{key id: {"key": "ed25519:...", "name": ..., "created": ..., "added": ...,
  "distrusted_from": ..., "reason": ...}}``, the public keys whose seals a reader accepts besides the
  home's own signing key. ``rehearsal keys trust KEY`` adds one; ``rehearsal keys signing rotate``
  replaces the signing key and keeps the old one here. ``created`` is when the key was made (null when it
  was made elsewhere), ``added`` when it entered the file, ``distrusted_from`` null (trusted) or an ISO
  date-time from which its seals are refused (:data:`DISTRUSTED_ENTIRELY`: all of them), and ``reason``
  the one line a reader is told. A file written before these fields existed (only ``key`` and ``name``)
  reads as trusted keys of unknown age.

A seal records the time it was made (``sealed_at``, signed with the rest); a key distrusted from a
date-time refuses the seals made at or after it, and the seals that record no time. That time is
written by whoever holds the key: a thief can backdate it, so a key that surely leaked is distrusted
entirely.

A public key is written ``ed25519:`` + the base64 of its 32 raw bytes; its id is the first 16
hex characters of the SHA-256 of those bytes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import stat
import sys
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from .._home import home

SIGNING_KEY_FILE = "signing_key.pem"
"""The signing key's file name in the state home."""
KEY_PREFIX = "ed25519:"
DISTRUSTED_ENTIRELY = datetime.min.replace(tzinfo=UTC)
"""``distrusted_from`` of a key none of whose seals is accepted, whatever time they record."""


class SigningKeyError(ValueError):
    """A signing or public key that cannot be used: the message says which, why, and what to do."""


def now() -> datetime:
    """The current time, in UTC (what a seal and a rotation record)."""
    return datetime.now(UTC)


def parse_time(text: str, what: str = "a date-time") -> datetime:
    """An aware UTC date-time from ISO text: ``YYYY-MM-DD`` (midnight UTC) or a date-time (UTC unless it
    names its offset).

    Raises:
        SigningKeyError: the text is not one, saying what was expected.
    """
    value = str(text).strip()
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        try:
            day = date.fromisoformat(value)
        except ValueError:
            raise SigningKeyError(f"expected {what} as an ISO date (2025-06-01) or date-time "
                                  f"(2025-06-01T12:00:00+00:00); got {value[:60]!r}") from None
        parsed = datetime(day.year, day.month, day.day)
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).astimezone(UTC)


def show_time(moment: datetime | None) -> str:
    """A time as a list or a problem line shows it (ISO, UTC); ``-`` for an unknown one."""
    return "-" if moment is None else moment.isoformat()


@dataclass(frozen=True)
class PublicKey:
    """A public key a seal can be checked against, and whether (from when) its seals are refused."""

    text: str
    """``ed25519:`` + base64 of the raw 32 bytes."""
    name: str = ""
    """A label (who holds the private key)."""
    created: datetime | None = None
    """When the key was made (UTC); None when unknown (a key made elsewhere, or by an older release)."""
    distrusted_from: datetime | None = None
    """None: trusted. Else seals made at or after this time (UTC), and seals that record no time, are
    refused; :data:`DISTRUSTED_ENTIRELY` refuses every seal of the key."""
    reason: str = ""
    """Why the key is distrusted (one line, told to every reader that refuses a seal)."""

    @property
    def id(self) -> str:
        """The first 16 hex characters of the SHA-256 of the raw key."""
        return key_id(self.text)

    def key(self) -> Ed25519PublicKey:
        return Ed25519PublicKey.from_public_bytes(_raw(self.text))

    @property
    def entirely_distrusted(self) -> bool:
        """Whether no seal of the key is accepted, whatever time it records."""
        return self.distrusted_from is not None and self.distrusted_from <= DISTRUSTED_ENTIRELY

    def distrusts(self, sealed_at: datetime | None) -> bool:
        """Whether a seal of this key made at ``sealed_at`` (None: the seal records no time) is refused."""
        if self.distrusted_from is None:
            return False
        return self.entirely_distrusted or sealed_at is None or sealed_at >= self.distrusted_from

    @property
    def state(self) -> str:
        """``trusted``, ``distrusted entirely: REASON`` or ``distrusted since TIME: REASON``."""
        if self.distrusted_from is None:
            return "trusted"
        since = "entirely" if self.entirely_distrusted else f"since {show_time(self.distrusted_from)}"
        return f"distrusted {since}: {self.reason or 'no reason recorded'}"


def _raw(text: str) -> bytes:
    if not isinstance(text, str) or not text.startswith(KEY_PREFIX):
        raise SigningKeyError(f"expected a public key written {KEY_PREFIX}BASE64 (see `rehearsal keys signing show`); "
                        f"got {str(text)[:60]!r}")
    try:
        raw = base64.b64decode(text[len(KEY_PREFIX):], validate=True)
    except (binascii.Error, ValueError):
        raise SigningKeyError(f"the public key {text[:60]!r} is not valid base64 after {KEY_PREFIX!r}") from None
    if len(raw) != 32:
        raise SigningKeyError(f"an Ed25519 public key has 32 bytes; {text[:60]!r} has {len(raw)}")
    return raw


def key_id(text: str) -> str:
    """The id of a public key text (see the module docstring)."""
    return hashlib.sha256(_raw(text)).hexdigest()[:16]


def public_text(key: Ed25519PublicKey) -> str:
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return KEY_PREFIX + base64.b64encode(raw).decode()


def signing_key_path(root: Path | None = None) -> Path:
    """Where the signing key lives: ``HOME/signing_key.pem``."""
    return (root or home()) / SIGNING_KEY_FILE


def load_signing_key(path: Path | None = None) -> Ed25519PrivateKey | None:
    """The signing key at ``path`` (default: the home's); None when there is none.

    Raises:
        SigningKeyError: the file is readable by others, or not an Ed25519 private key.
    """
    path = path or signing_key_path()
    try:
        mode = path.stat().st_mode
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise SigningKeyError(f"{path}: the signing key is readable by others (mode {stat.filemode(mode)}); anyone who "
                        f"can read it can seal runs in your name. Run `chmod 600 {path}` (and make a new key if "
                        "others may have copied it)")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise SigningKeyError(f"{path}: expected an unencrypted Ed25519 private key in PEM; the file is not one. "
                        "Move it away and run `rehearsal keys signing create`") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise SigningKeyError(f"{path}: expected an Ed25519 private key; found {type(key).__name__}")
    return key


def create_signing_key(path: Path | None = None) -> tuple[Ed25519PrivateKey, bool]:
    """The signing key at ``path`` (default: the home's), created (mode 0600) when absent; and whether it was.

    Two processes creating it at once end with one key: the file appears whole or not at all.
    """
    path = path or signing_key_path()
    existing = load_signing_key(path)
    if existing is not None:
        return existing, False
    path.parent.mkdir(parents=True, exist_ok=True)
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.fchmod(fd, 0o600)  # exactly 0600 (readable only by what signs), whatever the umask
        with os.fdopen(fd, "wb") as fh:
            fh.write(pem)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)  # fails when another process made the key first: use that one
        except FileExistsError:
            return load_signing_key(path) or key, False
    finally:
        tmp.unlink(missing_ok=True)
    return key, True


def signing_key_for_run() -> Ed25519PrivateKey:
    """The home's signing key, created on first use with a one-line note on stderr."""
    key, created = create_signing_key()
    if created:
        print(f"rehearsal: created the signing key {signing_key_path()} (mode 0600, public key "
              f"{public_text(key.public_key())}); runs are sealed with it. Readers elsewhere need "
              "`rehearsal keys trust` of that public key", file=sys.stderr)
    return key
