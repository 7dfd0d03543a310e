"""Checkpoints a server hands out, authenticated so that only those come back in.

A served checkpoint is the env's checkpoint bytes (:meth:`~rehearsal_env.RehearsalEnv.checkpoint`) wrapped with the
facts the server decided about the episode: the key that owns it, the agent name and version on its record, its seed,
reward profile and step count. An HMAC-SHA256 with a key that never leaves the server covers the facts and the bytes.
A restore accepts only such bytes, unchanged, from the key they were issued to: a checkpoint made locally, edited
(turn, counters, episode id, digest recomputed or not), or issued to another key is refused. A restored episode is
recorded as a restore of the checkpointed episode (``parent_kind`` ``restore``), under the agent the checkpoint names,
and is never evidence for readiness.

The layout is the env's (:func:`rehearsal_env.env.wrap_served`): the facts as canonical JSON, then the tag,
HMAC-SHA256 over the facts and the checkpoint, then the checkpoint; a served checkpoint still restores in your own
process with :func:`rehearsal_env.restore`, which needs no key.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from dataclasses import asdict, dataclass
from pathlib import Path

from filelock import FileLock

from ..env import CheckpointError, open_served, wrap_served
from ._session import Refused

KEY_BYTES = 32
"""The length of the server's checkpoint key."""


@dataclass(frozen=True)
class Issued:
    """What the server decided about a checkpointed episode; restored with it, never taken from the caller."""

    key_id: str
    """The key that owns the episode (only it may restore the checkpoint)."""
    episode_id: str
    """The checkpointed episode (the restored one's parent)."""
    agent: str
    """The agent name on the episode's record."""
    agent_version: str
    """The agent version on its record."""
    seed: int
    """Its reset seed."""
    profile: str | None
    """Its reward profile (None: the outcome reward)."""
    steps: int
    """Steps taken when it was checkpointed (the restored episode's next ``step_index``)."""


class CheckpointSeal:
    """Wraps the env's checkpoint bytes with :class:`Issued` facts and a tag, and opens only what it wrapped."""

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key if key is not None else secrets.token_bytes(KEY_BYTES)
        if len(self._key) < KEY_BYTES:
            raise ValueError(f"expected a checkpoint key of at least {KEY_BYTES} bytes, got {len(self._key)}")

    @classmethod
    def shared(cls, folder: str | Path) -> CheckpointSeal:
        """The seal of every process that shares ``folder`` (one ``--workers N`` server): its key is made once, in
        ``folder/checkpoint.key`` (mode 0600), and read by the others."""
        path = Path(folder) / "checkpoint.key"
        with FileLock(str(path) + ".lock"):
            if not path.exists():
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as out:
                    out.write(secrets.token_bytes(KEY_BYTES))
            return cls(path.read_bytes())

    def _tag(self, signed: bytes, checkpoint: bytes) -> bytes:
        return hmac.new(self._key, signed + checkpoint, hashlib.sha256).digest()

    def wrap(self, issued: Issued, checkpoint: bytes) -> bytes:
        """The bytes a caller gets: ``checkpoint`` with ``issued`` and their tag."""
        facts = json.dumps(asdict(issued), sort_keys=True, separators=(",", ":")).encode()
        return wrap_served(facts, self._tag, checkpoint)

    def open(self, data: bytes) -> tuple[Issued, bytes]:
        """The facts and the env's checkpoint bytes of ``data``, if this server wrapped them and nobody changed them.

        Raises:
            Refused: anything else (a checkpoint made elsewhere, edited, cut short, or of another server).
        """
        try:
            served = open_served(data)
        except CheckpointError as exc:
            raise Refused(str(exc)) from None
        if served is None:
            raise Refused("expected a checkpoint this server handed out (GET /v1/episodes/{id}/checkpoint); got bytes "
                          "that are not one. A checkpoint made with RehearsalEnv.checkpoint() is restored with "
                          "rehearsal_env.restore() in your own process, not over the API")
        if not hmac.compare_digest(served.tag, self._tag(served.signed, served.checkpoint)):
            raise Refused("the checkpoint was not handed out by this server, or was changed since: its tag does not "
                          "match. Restore only checkpoints this server gave you, unchanged")
        return Issued(**json.loads(served.facts)), served.checkpoint
