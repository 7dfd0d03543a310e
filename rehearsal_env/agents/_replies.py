"""A scripted model server's answer (:class:`Reply`) as the OpenAI protocol writes it: a chat completion's JSON
body, or the chunks of a streamed one (:func:`chunks`; a runaway's never end). Served by
:class:`~rehearsal_env.agents.testing.ModelServer`."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

RUNAWAY_CAP_S = 120.0
"""Longest a runaway reply streams before the server gives up on it."""
RUNAWAY_EVERY_S = 0.005
"""Seconds between a runaway's chunks."""


@dataclass(frozen=True)
class Reply:
    """One scripted answer of the server."""

    tool_calls: tuple[tuple[str, str], ...] = ()
    """(tool name, arguments as raw text) per call, in order."""
    content: str | None = None
    """The assistant's text."""
    finish_reason: str | None = None
    """``stop``, ``tool_calls`` or ``length`` (None: ``tool_calls`` when there are calls, else ``stop``)."""
    tokens: int | None = 100
    """``usage.total_tokens`` (None: the reply carries no usage)."""
    status: int = 200
    """HTTP status; another than 200 answers an error body with ``content`` as its message."""
    delay_s: float = 0.0
    """Seconds to wait before answering (a reply slower than the client's timeout never arrives)."""
    headers: tuple[tuple[str, str], ...] = ()
    """Extra response headers (e.g. ``retry-after-ms``)."""
    endless: bool = False
    """Streamed: the first call's arguments never end (a runaway model); see :meth:`runaway`."""

    @staticmethod
    def runaway(tool: str = "get_order", *, delay_s: float = 60.0) -> Reply:
        """A model that never stops: streamed, ``tool``'s arguments grow forever (a chunk every 5 ms, until the
        client hangs up or :data:`RUNAWAY_CAP_S` pass); not streamed, the answer comes after ``delay_s``."""
        return Reply(tool_calls=((tool, '{"order_id": "'),), endless=True, delay_s=delay_s)

    @staticmethod
    def call(tool: str, /, tokens: int | None = 100, **args: Any) -> Reply:
        """One well-formed tool call."""
        return Reply(tool_calls=((tool, json.dumps(args)),), tokens=tokens)

    @staticmethod
    def calls(*calls: tuple[str, dict[str, Any]], tokens: int | None = 100) -> Reply:
        """Parallel tool calls in one reply."""
        return Reply(tool_calls=tuple((name, json.dumps(args)) for name, args in calls), tokens=tokens)

    @staticmethod
    def raw_call(tool: str, arguments: str, *, finish_reason: str | None = None, tokens: int | None = 100) -> Reply:
        """A tool call with arguments exactly as given (e.g. not JSON, or cut off)."""
        return Reply(tool_calls=((tool, arguments),), finish_reason=finish_reason, tokens=tokens)

    @staticmethod
    def text(content: str, *, finish_reason: str = "stop", tokens: int | None = 100) -> Reply:
        """Text and no tool call (``finish_reason="length"``: cut off)."""
        return Reply(content=content, finish_reason=finish_reason, tokens=tokens)

    @staticmethod
    def error(status: int, message: str = "scripted error", *, retry_after_ms: int | None = None,
              delay_s: float = 0.0) -> Reply:
        """An HTTP error answer (429, 500, 404, 400, ...), optionally with ``retry-after-ms``."""
        headers = (("retry-after-ms", str(retry_after_ms)),) if retry_after_ms is not None else ()
        return Reply(content=message, status=status, headers=headers, delay_s=delay_s)

    def body(self, model: str, number: int) -> dict[str, Any]:
        """The JSON body of this reply."""
        if self.status != 200:
            kind = {400: "invalid_request_error", 404: "not_found_error", 429: "rate_limit_error"}.get(
                self.status, "server_error")
            return {"error": {"message": self.content or "scripted error", "type": kind, "code": None}}
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [
                {"id": f"call_{number}_{i}", "type": "function", "function": {"name": n, "arguments": a}}
                for i, (n, a) in enumerate(self.tool_calls)]
        finish = self.finish_reason or ("tool_calls" if self.tool_calls else "stop")
        out: dict[str, Any] = {"id": f"chatcmpl-{number}", "object": "chat.completion", "created": 0,
                               "model": model, "choices": [{"index": 0, "message": message,
                                                            "finish_reason": finish, "logprobs": None}]}
        if self.tokens is not None:
            prompt = self.tokens * 4 // 5
            out["usage"] = {"prompt_tokens": prompt, "completion_tokens": self.tokens - prompt,
                            "total_tokens": self.tokens}
        return out


def _chunk(model: str, number: int, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": f"chatcmpl-{number}", "object": "chat.completion.chunk", "created": 0, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}


def chunks(reply: Reply, model: str, number: int, usage: bool) -> Iterator[dict[str, Any]]:
    """The chunks of a streamed reply (endless for a runaway)."""
    yield _chunk(model, number, {"role": "assistant", "content": ""})
    for word in re.findall(r"\S+\s*|\s+", reply.content or ""):
        yield _chunk(model, number, {"content": word})
    for i, (name, arguments) in enumerate(reply.tool_calls):
        yield _chunk(model, number, {"tool_calls": [{"index": i, "id": f"call_{number}_{i}", "type": "function",
                                                     "function": {"name": name, "arguments": ""}}]})
        for at in range(0, len(arguments), 4):
            yield _chunk(model, number, {"tool_calls": [{"index": i, "function": {"arguments": arguments[at:at + 4]}}]})
        if reply.endless:
            until = time.monotonic() + RUNAWAY_CAP_S
            while time.monotonic() < until:
                yield _chunk(model, number, {"tool_calls": [{"index": i, "function": {"arguments": "9"}}]})
            return
    yield _chunk(model, number, {}, reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop"))
    if usage and reply.tokens is not None:
        prompt = reply.tokens * 4 // 5
        yield {"id": f"chatcmpl-{number}", "object": "chat.completion.chunk", "created": 0, "model": model,
               "choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": reply.tokens - prompt,
                                        "total_tokens": reply.tokens}}
