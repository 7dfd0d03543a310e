"""One model call, streamed or not, cut off on our side when the model runs away.

The profile's ``max_tokens`` and ``max_call_s`` are enforced here, whatever the provider does with them
(llama-cpp-python ignores ``max_tokens`` for tool arguments):

- **streamed** (``[provider] stream = true``, the default): the reply is read chunk by chunk; past
  ``max_tokens`` chunks with text or call arguments (a provider sends about one token per chunk), or past
  ``max_call_s`` seconds, the stream is closed and the reply is *cut off* (``cut_off_tokens`` or
  ``cut_off_time``);
- **not streamed**: the call's timeout is ``max_call_s``.

A call that runs out of time is the model's runaway only while the provider is answering: then
:func:`alive` asks the server for any HTTP answer at all (a ``GET`` of the base URL, at most
:data:`PROBE_S` seconds). A provider that answers it was busy with this reply (the agent's rejected
attempt, scored); one that does not is down (the call's error goes to the retries, then ``not_scored``,
cause ``provider``). Time spent in a provider's queue behind other requests counts toward ``max_call_s``.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import openai

if openai.__version__.split(".")[0] in ("0", "1", "2"):  # verifiers 0.4 pins openai<3, whose client speaks httpx
    import httpx
else:  # openai 3 speaks httpx2
    import httpx2 as httpx  # type: ignore[no-redef]
from openai import RequestOptions
from openai.types.chat import ChatCompletion, ChatCompletionChunk

CHAT_PATH = "/chat/completions"
AUTHORIZED: RequestOptions = {"security": {"bearer_auth": True}}
"""The request is posted as the plain JSON it already is: ``chat.completions.create`` would walk every message
and tool schema through the SDK's typed-parameter transform first (about 15 ms a call with a world's tools,
the whole cost of a call against a fast local server), which changes nothing in a plain-JSON body."""
PROBE_S = 5.0
"""Longest wait for the liveness probe's answer."""
CONNECT_S = 10.0
"""Longest wait to connect (a provider that cannot be reached in this time is down)."""
CUT_OFF_TOKENS = "cut_off_tokens"
CUT_OFF_TIME = "cut_off_time"


@dataclass
class ModelReply:
    """What the model replied (or the part of it read before it was cut off)."""

    text: str = ""
    """The assistant's text."""
    calls: list[dict[str, str]] = field(default_factory=list)
    """Tool calls in order: ``{"id", "name", "arguments"}`` (arguments as raw text)."""
    finish_reason: str | None = None
    """The provider's finish reason (``length``: it cut the reply at ``max_tokens`` itself)."""
    tokens: int | None = None
    """``usage.total_tokens`` the provider reported (None: none)."""
    input_tokens: int | None = None
    """``usage.prompt_tokens`` (None: not reported, or not adding up to ``tokens`` with the completion's)."""
    output_tokens: int | None = None
    """``usage.completion_tokens`` (None: as ``input_tokens``)."""
    chunks: int = 0
    """Streamed chunks with text or call content (0 when not streamed)."""
    cut: str | None = None
    """``cut_off_tokens`` or ``cut_off_time`` when we cut the reply off; None when it ended by itself."""
    choices: bool = True
    """Whether the reply had a choice at all."""


def _split(reply: ModelReply, usage: Any) -> None:
    """The reply's prompt and completion tokens, where they add up to its total."""
    prompt, completion = (getattr(usage, name, None) for name in ("prompt_tokens", "completion_tokens"))
    if reply.tokens is not None and isinstance(prompt, int) and isinstance(completion, int) and _count(prompt) \
            and _count(completion) and prompt + completion == reply.tokens:
        reply.input_tokens, reply.output_tokens = prompt, completion


def from_completion(completion: Any) -> ModelReply:
    """The reply in a (non-streamed) chat completion."""
    usage = getattr(completion, "usage", None)
    tokens = getattr(usage, "total_tokens", None) if usage is not None else None
    reply = ModelReply(tokens=tokens if _count(tokens) else None)
    _split(reply, usage)
    choices = getattr(completion, "choices", None) or []
    if not choices:
        reply.choices = False
        return reply
    choice = choices[0]
    reply.finish_reason = choice.finish_reason
    reply.text = choice.message.content or ""
    for call in choice.message.tool_calls or ():
        fn = getattr(call, "function", None)
        reply.calls.append({"id": getattr(call, "id", None) or "", "name": getattr(fn, "name", "") or "",
                            "arguments": getattr(fn, "arguments", "") or ""})
    return reply


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


class Accumulator:
    """Builds a :class:`ModelReply` from streamed chunks and says when to cut it off."""

    def __init__(self, max_tokens: int | None, max_call_s: float, started: float) -> None:
        self.reply = ModelReply()
        self.max_tokens = max_tokens
        self.deadline = started + max_call_s
        self.started_answering = False
        self._seen_choice = False

    def add(self, chunk: ChatCompletionChunk) -> bool:
        """Take one chunk; True when the reply must be cut off now (``reply.cut`` says why)."""
        self.started_answering = True
        reply = self.reply
        usage = getattr(chunk, "usage", None)
        if usage is not None and _count(getattr(usage, "total_tokens", None)):
            reply.tokens = usage.total_tokens
            _split(reply, usage)
        for choice in chunk.choices or ():
            self._seen_choice = True
            delta = choice.delta
            content = bool(delta.content)
            reply.text += delta.content or ""
            for part in delta.tool_calls or ():
                while len(reply.calls) <= part.index:
                    reply.calls.append({"id": "", "name": "", "arguments": ""})
                call = reply.calls[part.index]
                call["id"] = call["id"] or (part.id or "")
                if part.function is not None:
                    call["name"] += part.function.name or ""
                    call["arguments"] += part.function.arguments or ""
                    content = content or bool(part.function.arguments or part.function.name)
            if choice.finish_reason:
                reply.finish_reason = choice.finish_reason
            reply.chunks += content
        if self.max_tokens is not None and reply.chunks > self.max_tokens:
            reply.cut = CUT_OFF_TOKENS
        elif time.monotonic() > self.deadline:
            reply.cut = CUT_OFF_TIME
        return reply.cut is not None

    def timed_out(self) -> ModelReply:
        """The reply so far, cut off at the deadline."""
        self.reply.cut = CUT_OFF_TIME
        return self.done()

    def done(self) -> ModelReply:
        self.reply.choices = self._seen_choice or self.reply.cut is not None
        return self.reply


def request_timeout(max_call_s: float) -> Any:
    """The SDK's timeout for a call of at most ``max_call_s``, of the httpx the installed SDK speaks (chosen at
    import: ``httpx`` or ``httpx2``). Typed ``Any``, as :func:`_sdk_request`: a type checker sees one module only."""
    return httpx.Timeout(max_call_s, connect=min(max_call_s, CONNECT_S))


def _sdk_request() -> Any:
    """The request an SDK error made here carries, of the httpx the installed SDK speaks (:func:`request_timeout`)."""
    return httpx.Request("POST", CHAT_PATH)


def probe_s(max_call_s: float) -> float:
    """How long the liveness probe waits: :data:`PROBE_S`, less for a short call (at least 1 s)."""
    return min(PROBE_S, max(1.0, max_call_s))


def alive(base_url: str, timeout_s: float = PROBE_S) -> bool:
    """Whether the server at ``base_url`` answers HTTP at all (any status) within ``timeout_s``."""
    try:
        httpx.get(base_url, timeout=timeout_s)
    except httpx.HTTPError:
        return False
    return True


async def alive_async(base_url: str, timeout_s: float = PROBE_S) -> bool:
    """:func:`alive` without blocking the event loop."""
    try:
        async with httpx.AsyncClient(timeout=timeout_s) as client:
            await client.get(base_url)
    except httpx.HTTPError:
        return False
    return True


def _broken(exc: httpx.HTTPError) -> openai.APIConnectionError:
    request: Any = exc.request if getattr(exc, "_request", None) is not None else _sdk_request()
    return openai.APIConnectionError(message=f"the stream broke off ({type(exc).__name__}: {exc})", request=request)


def complete(client: openai.OpenAI, body: dict[str, Any], *, stream: bool, max_tokens: int | None,
             max_call_s: float) -> ModelReply:
    """One model call (see the module docstring); raises :class:`openai.APIError` for the provider's failures."""
    started = time.monotonic()
    options: RequestOptions = {**AUTHORIZED, "timeout": request_timeout(max_call_s)}
    acc = Accumulator(max_tokens, max_call_s, started)
    try:
        if not stream:
            return from_completion(client.post(CHAT_PATH, body=body, cast_to=ChatCompletion, options=options))
        chunks = client.post(CHAT_PATH, body={**body, "stream": True, "stream_options": {"include_usage": True}},
                             cast_to=ChatCompletion, options=options, stream=True,
                             stream_cls=openai.Stream[ChatCompletionChunk])
        try:
            for chunk in chunks:
                if acc.add(chunk):
                    break
        finally:
            chunks.close()
        return acc.done()
    except (openai.APITimeoutError, httpx.TimeoutException) as exc:
        if acc.started_answering or alive(str(client.base_url), probe_s(max_call_s)):
            return acc.timed_out()
        raise exc if isinstance(exc, openai.APIError) else _broken(exc) from exc
    except httpx.HTTPError as exc:
        raise _broken(exc) from exc


async def complete_async(client: openai.AsyncOpenAI, body: dict[str, Any], *, stream: bool,
                         max_tokens: int | None, max_call_s: float) -> ModelReply:
    """:func:`complete` with an async client; the deadline holds exactly (``asyncio.timeout``)."""
    started = time.monotonic()
    options: RequestOptions = {**AUTHORIZED, "timeout": request_timeout(max_call_s)}
    acc = Accumulator(max_tokens, max_call_s, started)
    try:
        async with asyncio.timeout(max_call_s):
            if not stream:
                return from_completion(await client.post(CHAT_PATH, body=body, cast_to=ChatCompletion,
                                                         options=options))
            chunks = await client.post(CHAT_PATH, body={**body, "stream": True,
                                                        "stream_options": {"include_usage": True}},
                                       cast_to=ChatCompletion, options=options, stream=True,
                                       stream_cls=openai.AsyncStream[ChatCompletionChunk])
            try:
                async for chunk in chunks:
                    if acc.add(chunk):
                        break
            finally:
                await chunks.close()
            return acc.done()
    except (TimeoutError, openai.APITimeoutError, httpx.TimeoutException) as exc:
        if acc.started_answering or await alive_async(str(client.base_url), probe_s(max_call_s)):
            return acc.timed_out()
        if isinstance(exc, openai.APIError):
            raise
        raise openai.APITimeoutError(request=_sdk_request()) from exc
    except httpx.HTTPError as exc:
        raise _broken(exc) from exc
