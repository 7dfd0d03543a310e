"""The public keys a reader trusts besides the home's signing key (:mod:`._signing`): ``trusted_keys.json`` in
the state home, and what changes it: trusting a key, distrusting it from a date-time or entirely, forgetting
it, and rotating the signing key (the old one kept here). The file's fields: :mod:`._signing`."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from filelock import FileLock

from .._atomic import write_atomic
from .._home import home
from ._signing import (
    DISTRUSTED_ENTIRELY,
    PublicKey,
    SigningKeyError,
    key_id,
    load_signing_key,
    now,
    parse_time,
    public_text,
    signing_key_path,
)

TRUSTED_KEYS_FILE = "trusted_keys.json"
"""The trusted public keys' file name in the state home."""


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
