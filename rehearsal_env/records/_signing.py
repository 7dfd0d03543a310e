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
import json
import os
import stat
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from filelock import FileLock

from .._atomic import write_atomic
from .._home import home

SIGNING_KEY_FILE = "signing_key.pem"
"""The signing key's file name in the state home."""
TRUSTED_KEYS_FILE = "trusted_keys.json"
"""The trusted public keys' file name in the state home."""
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


def _trusted_path(root: Path | None = None) -> Path:
    return (root or home()) / TRUSTED_KEYS_FILE


def _read_trusted(path: Path) -> dict[str, dict[str, Any]]:
    try:
        body = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise SigningKeyError(f"{path}: the trusted keys file cannot be read ({exc}); fix or remove it") from None
    if not isinstance(body, dict) or not all(isinstance(v, dict) and "key" in v for v in body.values()):
        raise SigningKeyError(f"{path}: expected {{key id: {{'key': 'ed25519:...', 'name': ..., 'created': ..., "
                              "'distrusted_from': ..., 'reason': ...}}; fix or remove it")
    return body


def _entry_key(path: Path, ident: str, entry: Mapping[str, Any]) -> PublicKey:
    """The :class:`PublicKey` of one entry of the trusted keys file (``path``, for messages)."""
    try:
        key = PublicKey(str(entry["key"]), str(entry.get("name") or ""),
                        None if entry.get("created") is None else parse_time(entry["created"], "'created'"),
                        None if entry.get("distrusted_from") is None
                        else parse_time(entry["distrusted_from"], "'distrusted_from'"),
                        str(entry.get("reason") or ""))
        key.key()
    except SigningKeyError as exc:
        raise SigningKeyError(f"{path}: the entry {ident!r}: {exc}; fix or remove it") from None
    if key.id != ident:
        raise SigningKeyError(f"{path}: the entry {ident!r} holds the key with id {key.id}; expected an entry's "
                              "name to be its key's id. Fix or remove it")
    return key


def _entry(key: PublicKey, added: str | None) -> dict[str, Any]:
    return {"key": key.text, "name": key.name, "created": None if key.created is None else key.created.isoformat(),
            "added": added or now().isoformat(),
            "distrusted_from": None if key.distrusted_from is None else key.distrusted_from.isoformat(),
            "reason": key.reason}


def _lock(path: Path) -> FileLock:
    path.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(str(path.with_name(f".{path.name}.lock")))


def home_keys() -> list[PublicKey]:
    """The keys this home knows, the signing key first (its ``created`` from its file's time), then the
    trusted keys file's entries (distrusted ones too), oldest first (those of unknown age last)."""
    out: list[PublicKey] = []
    own = load_signing_key()
    path = _trusted_path()
    entries = {ident: _entry_key(path, ident, entry) for ident, entry in _read_trusted(path).items()}
    if own is not None:
        mine = PublicKey(public_text(own.public_key()), "this home's signing key",
                         datetime.fromtimestamp(signing_key_path().stat().st_mtime, UTC))
        out.append(entries.pop(mine.id, mine))
    oldest_first = sorted(entries.values(), key=lambda k: (k.created is None, k.created or DISTRUSTED_ENTIRELY, k.id))
    return out + oldest_first


def trusted_keys(extra: Iterable[str] = ()) -> dict[str, PublicKey]:
    """Key id -> public key of every key whose seal is accepted: the home's signing key (when there is
    one), the home's trusted keys file, and ``extra`` (public key texts, e.g. from ``--trust``)."""
    out: dict[str, PublicKey] = {}
    own = load_signing_key()
    if own is not None:
        local = PublicKey(public_text(own.public_key()), "this home's signing key")
        out[local.id] = local
    path = _trusted_path()
    for ident, entry in _read_trusted(path).items():
        key = _entry_key(path, ident, entry)
        out[key.id] = key  # an entry for the home's own key (distrusted, say) is what counts
    for text in extra:
        key = PublicKey(text.strip(), "given with --trust")
        key.key()
        out.setdefault(key.id, key)  # --trust never lifts a distrust the home recorded
    return out


def trust_key(text: str, name: str = "") -> PublicKey:
    """Add a public key to the home's trusted keys (or rename one already there); return it.

    Raises:
        SigningKeyError: a malformed key, or one the home distrusts (``distrust_key(id, None)`` lifts that).
    """
    key = PublicKey(text.strip(), name)
    key.key()  # refuses a malformed key before it is stored
    path = _trusted_path()
    with _lock(path):
        body = _read_trusted(path)
        old = body.get(key.id)
        if old is not None:
            known = _entry_key(path, key.id, old)
            if known.distrusted_from is not None:
                raise SigningKeyError(f"key {key.id} is {known.state}; trusting it again is explicit: "
                                      f"`rehearsal keys distrust {key.id} --since never`")
            key = PublicKey(key.text, name or known.name, known.created)
        body[key.id] = _entry(key, old.get("added") if old else None)
        _write_json(path, body)
    return key


def distrust_key(ident: str, since: datetime | None, reason: str = "") -> PublicKey:
    """Mark a key of the home's trusted keys file (by its id) distrusted from ``since`` (UTC;
    :data:`DISTRUSTED_ENTIRELY`: all its seals; None: trusted again); return it as now recorded.

    Raises:
        SigningKeyError: no trusted key has that id, or it is the home's signing key (rotate that one).
    """
    path = _trusted_path()
    own = load_signing_key()
    with _lock(path):
        body = _read_trusted(path)
        if ident not in body:
            if own is not None and key_id(public_text(own.public_key())) == ident:
                raise SigningKeyError(f"{ident} is this home's signing key; `rehearsal keys signing rotate "
                                      "--distrust-old now|DATE|all --reason TEXT` replaces it and distrusts it")
            raise SigningKeyError(f"no trusted key has id {ident!r}; `rehearsal keys signing list` lists them")
        known = _entry_key(path, ident, body[ident])
        key = PublicKey(known.text, known.name, known.created, since, reason if since is not None else "")
        body[ident] = _entry(key, body[ident].get("added"))
        _write_json(path, body)
    return key


def rotate_signing_key(distrust_from: datetime | str | None = "now", reason: str = "",
                       root: Path | None = None) -> tuple[PublicKey, Ed25519PrivateKey]:
    """Replace the home's signing key with a new one (mode 0600) and keep the old public key in the
    trusted keys file, distrusted from ``distrust_from``: ``"now"`` (the rotation's time: seals it made
    before still verify), a date-time, :data:`DISTRUSTED_ENTIRELY` (none of its seals), or None (still
    trusted). The old private key is gone afterwards. Return the old key as recorded, and the new key.

    Raises:
        SigningKeyError: the home has no signing key, or its key or trusted keys file cannot be read.
    """
    key_path = signing_key_path(root)
    path = _trusted_path(root)
    with _lock(path):
        old = load_signing_key(key_path)
        if old is None:
            raise SigningKeyError(f"no signing key at {key_path} to rotate; `rehearsal keys signing create` "
                                  "makes one")
        moment = now()
        since = moment if distrust_from == "now" else distrust_from
        if isinstance(since, str):
            since = parse_time(since, "--distrust-old")
        text = public_text(old.public_key())
        body = _read_trusted(path)
        entry = body.get(key_id(text))
        known = _entry_key(path, key_id(text), entry) if entry else None
        created = known.created if known and known.created else \
            datetime.fromtimestamp(key_path.stat().st_mtime, UTC)
        retired = PublicKey(text, known.name if known and known.name else
                            f"this home's signing key until {moment.isoformat(timespec='seconds')}", created,
                            since, (reason or "no reason given") if since is not None else "")
        body[retired.id] = _entry(retired, entry.get("added") if entry else None)
        _write_json(path, body)  # first: a crash before the new key is written leaves the old one recorded
        new = Ed25519PrivateKey.generate()
        write_atomic(key_path, new.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                 serialization.NoEncryption()), mode=0o600)
    return retired, new


def untrust_key(ident: str) -> PublicKey:
    """Remove a key (by its id) from the home's trusted keys; return it.

    Raises:
        SigningKeyError: no trusted key has that id.
    """
    path = _trusted_path()
    with _lock(path):
        body = _read_trusted(path)
        if ident not in body:
            raise SigningKeyError(f"no trusted key has id {ident!r}; `rehearsal keys trusted` lists them")
        entry = body.pop(ident)
        _write_json(path, body)
    return PublicKey(str(entry["key"]), str(entry.get("name") or ""))


def _write_json(path: Path, body: Mapping[str, object]) -> None:
    write_atomic(path, json.dumps(body, indent=1, sort_keys=True) + "\n")
