"""Episode ids that name their owner: ``ep_[<instance>.][<worker>_]<32 hex>``.

``instance`` is the server's ``--instance`` name (several servers behind one reverse proxy, which
routes on it); ``worker`` is the random tag of the process that holds the episode (``--workers N``:
another process forwards requests to it). A single process without ``--instance`` issues plain
``ep_<32 hex>`` ids. The 128 random bits are never reused, so ids stay unguessable.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

INSTANCE = re.compile(r"[a-z0-9][a-z0-9-]{0,31}")
"""An instance name: lower-case letters, digits and '-', at most 32 characters."""
EPISODE_ID = re.compile(r"ep_(?:(?P<instance>[a-z0-9][a-z0-9-]{0,31})\.)?(?:(?P<worker>[0-9a-f]{8})_)?[0-9a-f]{32}")


def check_instance(name: str) -> str:
    """``name`` if it is a valid instance name, else ValueError saying what one looks like."""
    if not INSTANCE.fullmatch(name):
        raise ValueError(f"expected an instance name of 1 to 32 lower-case letters, digits and '-' (starting with a "
                         f"letter or digit), got {name[:40]!r}; it becomes the prefix of the episode ids the server "
                         f"issues, which a reverse proxy routes on")
    return name


@dataclass(frozen=True)
class Owner:
    """Who holds an episode, read from its id."""

    instance: str | None
    """The ``--instance`` of the server that issued it (None: a server without one)."""
    worker: str | None
    """The tag of the process holding it (None: a server of one process)."""


def owner_of(episode_id: str) -> Owner | None:
    """The owner an episode id names; None for a string that is no episode id of ours."""
    match = EPISODE_ID.fullmatch(episode_id)
    return None if match is None else Owner(match["instance"], match["worker"])


@dataclass(frozen=True)
class Identity:
    """This server process: its instance name and worker tag; the ids it issues carry both."""

    instance: str | None = None
    """``--instance`` (None: none)."""
    worker: str | None = None
    """This process's tag among ``--workers N`` (None: a server of one process)."""

    @classmethod
    def of(cls, instance: str | None, workers: bool) -> Identity:
        """The identity of a new process (``workers``: one of several, so with a fresh random tag)."""
        return cls(check_instance(instance) if instance is not None else None,
                   secrets.token_hex(4) if workers else None)

    def new_id(self) -> str:
        """A new episode id naming this process."""
        instance = f"{self.instance}." if self.instance else ""
        worker = f"{self.worker}_" if self.worker else ""
        return f"ep_{instance}{worker}{secrets.token_hex(16)}"

    def holds(self, owner: Owner) -> bool:
        """Whether an episode of ``owner`` would be held by this very process."""
        return owner.instance == self.instance and (owner.worker is None or owner.worker == self.worker)
