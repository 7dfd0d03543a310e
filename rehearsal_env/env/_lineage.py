"""Where an episode came from when it did not start at ``reset``: a fork or a restored checkpoint."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Literal

LineageKind = Literal["fork", "restore"]


@dataclass(frozen=True)
class Lineage:
    """The episode this one continues from, and at which turn it parted."""

    parent_episode: str
    """The parent's episode id (:attr:`~rehearsal_env.env.Episode.id`)."""
    parent_turn: int
    """The parent's turn when it was forked or checkpointed (0: right after ``reset``)."""
    kind: LineageKind
    """``fork`` (:meth:`RehearsalEnv.fork`) or ``restore`` (:func:`rehearsal_env.restore` of a checkpoint)."""


def new_episode_id() -> str:
    """A fresh episode id (``ep_`` and 20 hex characters)."""
    return "ep_" + uuid.uuid4().hex[:20]
