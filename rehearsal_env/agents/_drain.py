"""A call the agent abandons is never charged to another episode.

When the agent cuts a reply off (past ``max_call_s`` or ``max_tokens``, :mod:`._reply`) it closes the
connection. A server that stops generating when its client leaves (``rehearsal models serve``, vLLM, most
hosted APIs) is then free at once; one that cannot (llama-cpp-python's own formats on a reply that is not
streamed) goes on generating the abandoned reply, and every request behind it waits in its queue. That wait
must not be charged to whoever asks next.

So the agent **waits for the server to be idle** before its episode goes on: right after the cut-off it sends
a *drain probe*, the episode's own system message and tools with ``max_tokens`` 1 and no ``tool_choice`` (the
prefix every request of the run starts with, so the server's prompt cache keeps it; a server that renders
tools only with a ``tool_choice``, such as llama-cpp-python's ``chatml-function-calling``, then reads the
system message alone and never takes its tool path, which ignores ``max_tokens``), and waits for its answer,
at most :data:`DRAIN_MAX_S` seconds. A server that answers in order has then finished the abandoned reply. The wait
is the abandoning episode's own, outside every call's time (``max_call_s`` and ``model_latency_ms`` never
count it); its trace records it with the cut-off turn (``dropped_reply.server``: ``waited_ms`` and whether
the server answered). Meanwhile other episodes of the same process hold their next call until the drain
ends (:class:`Gate`), so their calls are not queued behind it either; a call already in the server's queue
when the reply was abandoned is not protected (run ``--concurrency 1`` against a server that cannot cancel).
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass
from typing import Any

import openai

if openai.__version__.split(".")[0] in ("0", "1", "2"):  # verifiers 0.4 pins openai<3, whose client speaks httpx
    import httpx
else:  # openai 3 speaks httpx2
    import httpx2 as httpx  # type: ignore[no-redef]
from openai.types.chat import ChatCompletion

DRAIN_MAX_S = 1800.0
"""Longest wait for the drain probe's answer (a runaway reply runs to the end of the model's context)."""
POLL_S = 0.05
"""How often a call held by another episode's drain looks again."""


@dataclass(frozen=True)
class Drained:
    """What waiting for the server after an abandoned call found."""

    waited_ms: float
    """Wall time until the server answered the probe (or the wait gave up), in milliseconds."""
    answered: bool
    """Whether the server answered the probe (False: it timed out or the connection failed; the episode went on)."""

    def to_dict(self) -> dict[str, Any]:
        return {"waited_ms": round(self.waited_ms, 1), "answered": self.answered,
                "how": "waited for the server to answer a 1-token probe before going on"}


class Gate:
    """The drains in progress in this process, by server: a new call waits while one is."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._draining: dict[str, int] = {}

    def enter(self, base_url: str) -> None:
        with self._lock:
            self._draining[base_url] = self._draining.get(base_url, 0) + 1

    def leave(self, base_url: str) -> None:
        with self._lock:
            self._draining[base_url] -= 1

    def busy(self, base_url: str) -> bool:
        """Whether an episode is waiting for this server to finish an abandoned reply."""
        with self._lock:
            return self._draining.get(base_url, 0) > 0

    def hold(self, base_url: str) -> float:
        """Wait while the server is being drained; the milliseconds waited."""
        started = time.perf_counter()
        while self.busy(base_url):
            time.sleep(POLL_S)
        return (time.perf_counter() - started) * 1000

    async def hold_async(self, base_url: str) -> float:
        """:meth:`hold` without blocking the event loop."""
        started = time.perf_counter()
        while self.busy(base_url):
            await asyncio.sleep(POLL_S)
        return (time.perf_counter() - started) * 1000


GATE = Gate()
"""This process's drains."""


def probe_body(model: str | None, system: str, tools: list[dict[str, Any]], extra: dict[str, Any]) -> dict[str, Any]:
    """The drain probe (and the run's preflight): the system message and the tools, 1 token, no ``tool_choice``,
    not streamed."""
    body = {**extra, "model": model or "", "messages": [{"role": "system", "content": system}], "max_tokens": 1,
            "stream": False}
    if tools:
        body["tools"] = tools
    return body


def drain(client: openai.OpenAI, body: dict[str, Any], max_s: float = DRAIN_MAX_S) -> Drained:
    """Send the probe and wait for any answer (see the module docstring)."""
    base = str(client.base_url)
    GATE.enter(base)
    started = time.perf_counter()
    try:
        client.post("/chat/completions", body=body, cast_to=ChatCompletion,
                    options={"security": {"bearer_auth": True}, "timeout": max_s})
        answered = True
    except openai.APIStatusError:
        answered = True  # it answered: the queue ahead of the probe is empty
    except (openai.APIError, httpx.HTTPError):
        answered = False
    finally:
        GATE.leave(base)
    return Drained((time.perf_counter() - started) * 1000, answered)


async def drain_async(client: openai.AsyncOpenAI, body: dict[str, Any], max_s: float = DRAIN_MAX_S) -> Drained:
    """:func:`drain` with an async client."""
    base = str(client.base_url)
    GATE.enter(base)
    started = time.perf_counter()
    try:
        await client.post("/chat/completions", body=body, cast_to=ChatCompletion,
                          options={"security": {"bearer_auth": True}, "timeout": max_s})
        answered = True
    except openai.APIStatusError:
        answered = True
    except (openai.APIError, httpx.HTTPError):
        answered = False
    finally:
        GATE.leave(base)
    return Drained((time.perf_counter() - started) * 1000, answered)
