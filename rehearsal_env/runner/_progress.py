"""A one-line progress display on stderr: episodes done, outcomes so far, rate and time left.

It draws only on a terminal (``isatty``) and when enabled; otherwise every call
is a no-op, so logs and pipes stay clean.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Sequence
from typing import TextIO

from ._summary import OUTCOMES

_SHORT = {"verified": "ok", "not_achieved": "miss", "rule_violated": "rule", "not_scored": "n/s"}


class Progress:
    """Counts finished episodes and redraws one status line at most ``10`` times a second.

    Args:
        total: Episodes in the whole run.
        done: Episodes already recorded before this process started (a resumed run).
        enabled: False to stay quiet (``--quiet``).
        stream: Where to draw (default: ``sys.stderr``); nothing is drawn unless it is a terminal.
    """

    def __init__(self, total: int, *, done: int = 0, enabled: bool = True,
                 stream: TextIO | None = None) -> None:
        self.total = total
        self.done = done
        self.outcomes: Counter[str] = Counter()
        self._stream = stream if stream is not None else sys.stderr
        self._on = enabled and self._stream.isatty()
        self._played = 0
        self._start = time.monotonic()
        self._drawn = 0.0
        self._shown = -1

    @property
    def active(self) -> bool:
        """Whether anything is drawn."""
        return self._on

    def start(self) -> None:
        """Start the rate's clock now (when the workers are ready, so their start-up is not counted)."""
        self._start = time.monotonic()

    def update(self, outcomes: Sequence[str]) -> None:
        """Count a finished batch by its episodes' outcomes; redraw if the last draw is 0.1 s old."""
        self.done += len(outcomes)
        self._played += len(outcomes)
        self.outcomes.update(outcomes)
        now = time.monotonic()
        if self._on and (now - self._drawn >= 0.1 or self.done >= self.total):
            self._draw(now)

    def line(self, now: float | None = None) -> str:
        """The status line: ``done/total``, outcomes so far, episodes per second, time left."""
        elapsed = max((now if now is not None else time.monotonic()) - self._start, 1e-9)
        rate = self._played / elapsed
        left = (self.total - self.done) / rate if rate > 0 else float("nan")
        outcomes = " ".join(f"{_SHORT[o]} {self.outcomes[o]}" for o in OUTCOMES)
        eta = "-" if left != left else f"{int(left) // 60}:{int(left) % 60:02d}"
        return f"{self.done}/{self.total} episodes | {outcomes} | {rate:,.0f}/s | left {eta}"

    def _draw(self, now: float) -> None:
        self._drawn = now
        self._shown = self.done
        self._stream.write("\r" + self.line(now) + "\x1b[K")
        self._stream.flush()

    def close(self) -> None:
        """Draw the last count if it is not shown yet, and end the line (when anything was drawn)."""
        if self._on and self._drawn:
            if self._shown != self.done:
                self._draw(time.monotonic())
            self._stream.write("\n")
            self._stream.flush()
