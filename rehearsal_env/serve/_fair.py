"""Fair shares of the worker threads: no key's slow requests can take the threads another key needs.

Every request's database work runs in a worker thread through one :class:`FairLimiter`: at most
``total`` run at once, and at most ``per_key`` of one key's. When a thread frees, it goes to the
waiting key that holds the fewest (ties: the one that has waited longest), so a key with many
sessions sending slow queries queues behind its own requests, never in front of another key's.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import anyio
import anyio.to_thread

T = TypeVar("T")


class FairLimiter:
    """Worker-thread slots shared among keys (call from one event loop)."""

    def __init__(self, total: int, per_key: int) -> None:
        if total < 1 or not 1 <= per_key <= total:
            raise ValueError(f"expected total >= 1 and 1 <= per_key <= total, got {total} and {per_key}")
        self.total, self.per_key = total, per_key
        self._threads = anyio.CapacityLimiter(total)
        self._running: dict[str, int] = {}
        self._waiting: dict[str, deque[tuple[int, asyncio.Future[None]]]] = {}
        self._order = itertools.count()
        self.busy = 0

    async def run(self, key: str, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in a worker thread, once ``key`` has a slot."""
        await self._acquire(key)
        try:
            return await anyio.to_thread.run_sync(partial(fn, *args), limiter=self._threads)
        finally:
            self._release(key)

    def running(self, key: str) -> int:
        """Slots ``key`` holds now."""
        return self._running.get(key, 0)

    def waiting(self, key: str) -> int:
        """Requests of ``key`` waiting for a slot."""
        return len(self._waiting.get(key, ()))

    async def _acquire(self, key: str) -> None:
        if self.busy < self.total and self.running(key) < self.per_key:
            self._grant(key)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(key, deque()).append((next(self._order), future))
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self._release(key)  # granted as it was cancelled: give the slot on
            else:
                queue = self._waiting.get(key)
                if queue is not None:
                    self._waiting[key] = deque(item for item in queue if item[1] is not future)
                    if not self._waiting[key]:
                        del self._waiting[key]
            raise

    def _grant(self, key: str) -> None:
        self._running[key] = self.running(key) + 1
        self.busy += 1

    def _release(self, key: str) -> None:
        self._running[key] -= 1
        if not self._running[key]:
            del self._running[key]
        self.busy -= 1
        self._dispatch()

    def _dispatch(self) -> None:
        while self.busy < self.total:
            ready = [(self.running(k), q[0][0], k) for k, q in self._waiting.items() if self.running(k) < self.per_key]
            if not ready:
                return
            _, _, key = min(ready)
            _, future = self._waiting[key].popleft()
            if not self._waiting[key]:
                del self._waiting[key]
            if future.cancelled():
                continue
            self._grant(key)
            future.set_result(None)
