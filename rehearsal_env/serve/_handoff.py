"""Worker threads that take calls from one event loop at little cost per call (issue 37, round 3).

The served step's hop to a worker thread cost 8-16% of the server's busy CPU through
``anyio.to_thread.run_sync`` (a capacity limiter, a cancel scope, a task-local worker queue and one
``call_soon_threadsafe`` per call, each a write to the loop's self-pipe). :class:`Threads` does the same
hop with what it needs: a deque and a condition to give a call to an idle thread, and a list of finished
calls that the loop reads in one wake-up, however many calls finished since the last one (at 100 busy
sessions, several steps finish between two turns of the loop, and one self-pipe write answers them all).

What it keeps from anyio's: a call that is cancelled while it runs is waited for (the caller's
``finally`` never runs beside its own thread), and its result is dropped. It does not limit how many calls
run: the caller (:class:`~rehearsal_env.serve.FairLimiter`) grants at most as many as there are threads.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
_Call = tuple[Callable[[], Any], "asyncio.Future[Any]"]


class Threads:
    """``size`` worker threads serving calls of the event loop that first calls :meth:`run` (started on
    first use; daemon threads, so a server that stops never waits for them)."""

    def __init__(self, size: int, name: str, initializer: Callable[[], None] | None = None) -> None:
        if size < 1:
            raise ValueError(f"expected size >= 1, got {size}")
        self.size, self.name, self._initializer = size, name, initializer
        self._calls: deque[_Call] = deque()
        self._ready = threading.Condition(threading.Lock())
        self._idle = 0
        self._started = 0
        self._done: list[tuple[asyncio.Future[Any], bool, Any]] = []
        self._done_lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False

    async def run(self, fn: Callable[[], T]) -> T:
        """``fn()`` in one of the threads; a cancellation waits for it to finish, then is raised."""
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif self._loop is not loop:
            raise RuntimeError(f"the {self.name} threads serve one event loop; this call came from another")
        future: asyncio.Future[T] = loop.create_future()
        with self._ready:
            if self._closed:
                raise RuntimeError(f"the {self.name} threads are closed")
            self._calls.append((fn, future))
            if self._idle:
                self._ready.notify()
            elif self._started < self.size:
                self._started += 1
                threading.Thread(target=self._work, name=f"{self.name}-{self._started}", daemon=True).start()
        cancelled: asyncio.CancelledError | None = None
        while True:
            try:
                result = await asyncio.shield(future)
                break
            except asyncio.CancelledError as exc:
                if future.done():
                    raise
                cancelled = exc  # the call runs on: wait for it, as anyio does, then give the cancellation
        if cancelled is not None:
            raise cancelled
        return result

    def close(self) -> None:
        """Let the threads end once no call is left (calls given after this are refused)."""
        with self._ready:
            self._closed = True
            self._ready.notify_all()

    def _work(self) -> None:
        if self._initializer is not None:
            self._initializer()
        while True:
            with self._ready:
                while not self._calls:
                    if self._closed:
                        return
                    self._idle += 1
                    self._ready.wait()
                    self._idle -= 1
                fn, future = self._calls.popleft()
            try:
                finished: tuple[asyncio.Future[Any], bool, Any] = (future, True, fn())
            except BaseException as exc:  # noqa: BLE001  (handed to the awaiting task, raised there)
                finished = (future, False, exc)
            with self._done_lock:
                self._done.append(finished)
                first = len(self._done) == 1
            if first:  # one wake-up of the loop for every call that finishes before it reads them
                assert self._loop is not None
                try:
                    self._loop.call_soon_threadsafe(self._deliver)
                except RuntimeError:  # the loop closed: nobody waits for the result
                    return

    def _deliver(self) -> None:
        with self._done_lock:
            done, self._done = self._done, []
        for future, ok, value in done:
            if future.cancelled():
                continue
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)
