"""Fair shares of the worker threads: no key's slow requests can take the threads another key needs.

Every request's database work runs in a worker thread through one :class:`FairLimiter`:

- at most ``total`` run at once, and at most ``per_key`` of one key's;
- a key whose recent requests were slow (a moving average of their wall time above ``heavy_s``)
  is *heavy*: all heavy keys together hold at most ``heavy_total`` threads (default: half the
  CPUs), so slow queries can never take every core from the quick requests of other keys, and
  (on Linux) those threads run at a lower CPU priority (``nice`` +:data:`HEAVY_NICE`), so that a
  core they share with quick requests goes to the quick ones first;
- when a thread frees, it goes to the waiting key that holds the fewest (ties: the one that has
  waited longest), so a key with many sessions queues behind its own requests, never in front of
  another key's.

A key is judged by its own requests only: one that stops sending slow work is light again after a
few quick requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

from ._handoff import Threads

T = TypeVar("T")
HEAVY_S = 0.25
"""A key whose requests' moving-average wall time passes this many seconds is heavy."""
SMOOTHING = 0.3
"""Weight of the newest request in a key's moving average."""
HEAVY_NICE = 10
"""How much lower the heavy threads' CPU priority is (Linux ``nice``; about a tenth of a normal thread's share
of a contended core)."""


def _lower_priority() -> None:
    """Lower this thread's CPU priority by :data:`HEAVY_NICE` from what it inherited (a server started under
    ``nice 10`` puts its heavy threads at 20, capped at 19, not back at 10 beside its light ones). Linux only: a
    thread is a task of its own there; elsewhere ``setpriority`` would lower the whole process, so nothing is
    done."""
    if sys.platform == "linux":
        with contextlib.suppress(OSError):
            task = threading.get_native_id()
            os.setpriority(os.PRIO_PROCESS, task, min(19, os.getpriority(os.PRIO_PROCESS, task) + HEAVY_NICE))


class FairLimiter:
    """Worker-thread slots shared among keys (call from one event loop)."""

    def __init__(self, total: int, per_key: int, *, heavy_total: int | None = None, heavy_s: float = HEAVY_S) -> None:
        heavy_total = heavy_total or max(1, min(total, (os.cpu_count() or 2) // 2))
        if total < 1 or not 1 <= per_key <= total or not 1 <= heavy_total <= total:
            raise ValueError(f"expected total >= 1, 1 <= per_key <= total and 1 <= heavy_total <= total, got "
                             f"{total}, {per_key} and {heavy_total}")
        self.total, self.per_key, self.heavy_total, self.heavy_s = total, per_key, heavy_total, heavy_s
        self._threads = Threads(total, "rehearsal-worker")
        self._heavy_threads = Threads(heavy_total, "rehearsal-heavy", initializer=_lower_priority)
        self._running: dict[str, int] = {}
        self._cost: dict[str, float] = {}
        self._waiting: dict[str, deque[tuple[int, asyncio.Future[bool]]]] = {}
        self._order = itertools.count()
        self.busy = 0
        self.heavy_busy = 0

    async def run(self, key: str, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in a worker thread, once ``key`` has a slot."""
        heavy = await self._acquire(key)
        began = time.monotonic()
        try:
            return await (self._heavy_threads if heavy else self._threads).run(partial(fn, *args))
        finally:
            took = time.monotonic() - began
            self._cost[key] = (1 - SMOOTHING) * self._cost.get(key, took) + SMOOTHING * took
            self._release(key, heavy)

    def close(self) -> None:
        """Stop the worker threads (each ends once nothing is left for it)."""
        self._threads.close()
        self._heavy_threads.close()

    def running(self, key: str) -> int:
        """Slots ``key`` holds now."""
        return self._running.get(key, 0)

    def waiting(self, key: str) -> int:
        """Requests of ``key`` waiting for a slot."""
        return len(self._waiting.get(key, ()))

    def heavy(self, key: str) -> bool:
        """Whether ``key``'s recent requests were slow (it then shares the heavy threads)."""
        return self._cost.get(key, 0.0) > self.heavy_s

    def _free_for(self, key: str) -> bool:
        return (self.busy < self.total and self.running(key) < self.per_key
                and (not self.heavy(key) or self.heavy_busy < self.heavy_total))

    async def _acquire(self, key: str) -> bool:
        if self._free_for(key) and not self._waiting.get(key):
            return self._grant(key)
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(key, deque()).append((next(self._order), future))
        try:
            return await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self._release(key, future.result())  # granted as it was cancelled: give the slot on
            else:
                queue = self._waiting.get(key)
                if queue is not None:
                    self._waiting[key] = deque(item for item in queue if item[1] is not future)
                    if not self._waiting[key]:
                        del self._waiting[key]
            raise

    def _grant(self, key: str) -> bool:
        heavy = self.heavy(key)
        self._running[key] = self.running(key) + 1
        self.busy += 1
        self.heavy_busy += heavy
        return heavy

    def _release(self, key: str, heavy: bool) -> None:
        self._running[key] -= 1
        if not self._running[key]:
            del self._running[key]
        self.busy -= 1
        self.heavy_busy -= heavy
        self._dispatch()

    def _dispatch(self) -> None:
        while self.busy < self.total:
            ready = [(self.running(k), q[0][0], k) for k, q in self._waiting.items() if self._free_for(k)]
            if not ready:
                return
            _, _, key = min(ready)
            _, future = self._waiting[key].popleft()
            if not self._waiting[key]:
                del self._waiting[key]
            if not future.cancelled():
                future.set_result(self._grant(key))
