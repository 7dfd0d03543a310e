"""API keys: created once, shown once, stored only as a SHA-256 digest, each with one scope.

A key is ``rk_<id>_<secret>``; the keys file (JSON, written atomically under a file lock)
holds its id, scope, label, creation time and the digest of the whole key, never the key.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path

from filelock import FileLock
from pydantic import BaseModel, ValidationError

from .._atomic import write_atomic
from .._home import home

PREFIX = "rk_"
MAX_AGENT_NAME = 200
"""Longest agent name (as the API's ``agent.name``)."""


class Scope(StrEnum):
    """What a key may do."""

    EVALUATE = "evaluate"
    """Play episodes and read the outcome of its own episodes' verdicts."""
    BUILD_AND_EVALUATE = "build-and-evaluate"
    """Also read scenarios' checks and reference solutions (never a holdout scenario's) and other
    keys' episodes with their check results."""


SCOPES = tuple(s.value for s in Scope)


@dataclass(frozen=True)
class ApiKey:
    """One stored key (its secret is not kept)."""

    id: str
    """The key's public id (``rk_<id>_...``); the episodes a key starts are owned by this id."""
    scope: Scope
    """What the key may do."""
    name: str
    """A label given at creation."""
    created: str
    """When it was created (ISO 8601, UTC)."""
    digest: str
    """SHA-256 of the whole key, hex."""
    agents: tuple[str, ...] = ()
    """The agent names the key may play as (``rehearsal keys create --agent NAME``); empty: any name."""


class _KeyEntry(BaseModel):
    """One key as the keys file holds it (declared: every field and its type; others are ignored)."""

    id: str
    scope: Scope
    name: str
    created: str
    digest: str
    agents: tuple[str, ...] = ()


class _KeysFile(BaseModel):
    """The keys file: ``{"keys": [...]}``."""

    keys: list[_KeyEntry]


def default_keys_path() -> Path:
    """``$REHEARSAL_HOME/keys.json``, else ``~/.rehearsal/keys.json``."""
    return home() / "keys.json"


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class KeyStore:
    """The keys file: create, list, revoke and authenticate keys."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_keys_path()
        self._lock = FileLock(str(self.path) + ".lock")
        self._cache: tuple[tuple[int, int, int], dict[str, ApiKey]] | None = None

    def _read(self) -> list[ApiKey]:
        if not self.path.exists():
            return []
        try:
            data = _KeysFile.model_validate_json(self.path.read_bytes())
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            where = ".".join(str(k) for k in first["loc"]) or "the file"
            raise ValueError(f"{self.path}: expected a keys file written by `rehearsal keys create` "
                             f"({{\"keys\": [...]}}); it cannot be read ({where}: {first['msg']}). Move it away "
                             "and create new keys") from None
        return [ApiKey(k.id, k.scope, k.name, k.created, k.digest, k.agents) for k in data.keys]

    def _write(self, keys: list[ApiKey]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        body = {"keys": [{**asdict(k), "scope": k.scope.value, "agents": list(k.agents)} for k in keys]}
        write_atomic(self.path, json.dumps(body, indent=2) + "\n", mode=0o600)

    def create(self, scope: str | Scope, name: str = "", agents: Sequence[str] = ()) -> tuple[ApiKey, str]:
        """A new key of ``scope`` (bound to the agent names ``agents``, if any): (its stored entry, the key
        itself, which is shown only now)."""
        try:
            scope = Scope(scope)
        except ValueError:
            raise ValueError(f"unknown scope {scope!r}; expected one of {', '.join(SCOPES)}") from None
        for agent in agents:
            if not 1 <= len(agent) <= MAX_AGENT_NAME or not agent.isprintable():
                raise ValueError(f"expected agent names of 1 to {MAX_AGENT_NAME} printable characters; got "
                                 f"{agent[:40]!r} ({len(agent)} characters)")
        key_id = secrets.token_hex(4)
        secret = f"{PREFIX}{key_id}_{secrets.token_urlsafe(24)}"
        entry = ApiKey(key_id, scope, name, datetime.now(UTC).isoformat(timespec="seconds"), _digest(secret),
                       tuple(dict.fromkeys(agents)))
        with self._lock:
            keys = self._read()
            self._write([*keys, entry])
        return entry, secret

    def keys(self) -> list[ApiKey]:
        """Every stored key."""
        with self._lock:
            return self._read()

    def revoke(self, key_id: str) -> ApiKey:
        """Remove the key with this id; return it.

        Raises:
            KeyError: no key has this id (naming the ids there are).
        """
        with self._lock:
            keys = self._read()
            found = [k for k in keys if k.id == key_id]
            if not found:
                raise KeyError(f"no key with id {key_id!r} in {self.path}; "
                               f"ids: {', '.join(k.id for k in keys) or '(none)'}")
            self._write([k for k in keys if k.id != key_id])
        return found[0]

    def authenticate(self, key: str) -> ApiKey | None:
        """The stored key that ``key`` is, or None (the file is re-read when it changes, so a revocation
        applies to the next request)."""
        try:
            st = self.path.stat()
            stamp = (st.st_ino, st.st_mtime_ns, st.st_size)  # every write replaces the file: a new inode
        except FileNotFoundError:
            return None
        if self._cache is None or self._cache[0] != stamp:
            self._cache = (stamp, {k.digest: k for k in self.keys()})
        digest = _digest(key)
        entry = self._cache[1].get(digest)
        return entry if entry is not None and hmac.compare_digest(entry.digest, digest) else None
