"""The keys that seal runs: one Ed25519 signing key per evaluator, and the public keys a reader trusts.

Both live in the state home (:func:`rehearsal_env._home.home`):

- ``signing_key.pem``: the private key runs are sealed with (PKCS #8 PEM, mode 0600). The
  first run that seals creates it, saying so on stderr; ``rehearsal keys signing create``
  makes one up front. A key file readable by group or others is refused, as ssh does.
- ``trusted_keys.json``: ``{key id: {"key": "ed25519:...", "name": ...}}``, the public keys
  whose seals a reader accepts besides the home's own signing key (which is always trusted).
  ``rehearsal keys trust KEY`` adds one.

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
from pathlib import Path

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


class SigningKeyError(ValueError):
    """A signing or public key that cannot be used: the message says which, why, and what to do."""


@dataclass(frozen=True)
class PublicKey:
    """A public key a seal can be checked against."""

    text: str
    """``ed25519:`` + base64 of the raw 32 bytes."""
    name: str = ""
    """A label (who holds the private key)."""

    @property
    def id(self) -> str:
        """The first 16 hex characters of the SHA-256 of the raw key."""
        return key_id(self.text)

    def key(self) -> Ed25519PublicKey:
        return Ed25519PublicKey.from_public_bytes(_raw(self.text))


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


def _read_trusted(path: Path) -> dict[str, dict[str, str]]:
    try:
        body = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise SigningKeyError(f"{path}: the trusted keys file cannot be read ({exc}); fix or remove it") from None
    if not isinstance(body, dict) or not all(isinstance(v, dict) and "key" in v for v in body.values()):
        raise SigningKeyError(f"{path}: expected {{key id: {{'key': 'ed25519:...', 'name': ...}}}}; "
                              "fix or remove it")
    return body


def trusted_keys(extra: Iterable[str] = ()) -> dict[str, PublicKey]:
    """Key id -> public key of every key whose seal is accepted: the home's signing key (when there is
    one), the home's trusted keys file, and ``extra`` (public key texts, e.g. from ``--trust``)."""
    out: dict[str, PublicKey] = {}
    own = load_signing_key()
    if own is not None:
        local = PublicKey(public_text(own.public_key()), "this home's signing key")
        out[local.id] = local
    for entry in _read_trusted(_trusted_path()).values():
        key = PublicKey(entry["key"], entry.get("name", ""))
        out[key.id] = key
    for text in extra:
        key = PublicKey(text.strip(), "given with --trust")
        out[key.id] = key
    return out


def trust_key(text: str, name: str = "") -> PublicKey:
    """Add a public key to the home's trusted keys; return it."""
    key = PublicKey(text.strip(), name)
    key.key()  # refuses a malformed key before it is stored
    path = _trusted_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path.with_name(f".{path.name}.lock"))):
        body = _read_trusted(path)
        body[key.id] = {"key": key.text, "name": name}
        _write_json(path, body)
    return key


def untrust_key(ident: str) -> PublicKey:
    """Remove a key (by its id) from the home's trusted keys; return it.

    Raises:
        SigningKeyError: no trusted key has that id.
    """
    path = _trusted_path()
    with FileLock(str(path.with_name(f".{path.name}.lock"))):
        body = _read_trusted(path)
        if ident not in body:
            raise SigningKeyError(f"no trusted key has id {ident!r}; `rehearsal keys trusted` lists them")
        entry = body.pop(ident)
        _write_json(path, body)
    return PublicKey(entry["key"], entry.get("name", ""))


def _write_json(path: Path, body: Mapping[str, object]) -> None:
    write_atomic(path, json.dumps(body, indent=1, sort_keys=True) + "\n")
