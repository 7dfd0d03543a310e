"""Records reach disk as episodes end when episodes are slow: a time bound on the batch.

A batch of episodes (``RunConfig.batch_size``, 32 by default) is written as one part file when it ends; a
model playing slowly could take hours over one batch, and a run stopped meanwhile left nothing to measure.
:class:`PartFlusher` takes each record as its episode ends and writes what it holds as a part as soon as
:data:`FLUSH_S` seconds have passed since the batch started or since its last write (and the rest when the
batch ends). A fast batch is still one part, written in plan order; a slow one is several parts, each in
plan order. Every part is a complete set of records, so ``measure.py`` reads a stopped run as far as it
went and ``--resume`` plays only the episodes no part holds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ..records import EpisodeRecord, write_part
from ._plan import EpisodeSpec

FLUSH_S = 30.0
"""Longest time a finished episode's record waits in memory before it is written (while its batch plays on)."""


class PartFlusher:
    """Writes one batch's records as parts, at most :data:`FLUSH_S` seconds after each episode ends.

    Args:
        out: The run directory.
        specs: The batch's episodes, in plan order (each part is written in this order).
        part: The batch's part number (its first write).
        spare: Gives a new part number for each later write of the batch (never one the plan uses).
        flush_s: The time bound (None: :data:`FLUSH_S`).
    """

    def __init__(self, out: Path, specs: Sequence[EpisodeSpec], part: int, spare: Callable[[], int],
                 flush_s: float | None = None) -> None:
        self.out = out
        self.order = {(s.scenario, s.repeat): n for n, s in enumerate(specs)}
        self.part: int | None = part
        self.spare = spare
        self.flush_s = FLUSH_S if flush_s is None else flush_s
        self.written: set[tuple[str, int]] = set()
        """The episodes of the batch already written."""
        self.parts: list[Path] = []
        """The part files written, in order."""
        self.flushed: list[EpisodeRecord] = []
        """The records written, in order."""
        self._held: list[EpisodeRecord] = []
        self._since = time.monotonic()

    def add(self, record: EpisodeRecord) -> None:
        """Take a finished episode's record; write what is held when the time bound has passed."""
        self._held.append(record)
        if time.monotonic() - self._since >= self.flush_s:
            self.flush()

    def flush(self) -> None:
        """Write the records held (if any) as one part, in plan order."""
        held = [r for r in self._held if (r.scenario, r.repeat) not in self.written]
        self._held = []
        self._since = time.monotonic()
        if not held:
            return
        held.sort(key=lambda r: self.order.get((r.scenario, r.repeat), len(self.order)))
        number = self.part if self.part is not None else self.spare()
        self.part = None
        self.parts.append(write_part(self.out, held, number))
        self.flushed.extend(held)
        self.written.update((r.scenario, r.repeat) for r in held)

    def finish(self, records: Sequence[EpisodeRecord]) -> None:
        """The batch ended (or stopped) with ``records``: write those not yet written."""
        held = {(r.scenario, r.repeat) for r in self._held}
        self._held = [*self._held, *(r for r in records if (r.scenario, r.repeat) not in held)]
        self.flush()
