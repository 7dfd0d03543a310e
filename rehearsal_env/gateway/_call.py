"""One model call through the gateway: what is recorded of it, and whose failure it was.

A provider failure is what the ``openai`` agent retries and, when retries run out, scores
``not_scored`` (cause ``provider``): a timeout, a broken connection, HTTP 408, 409, 429 or any 5xx.
Any other refusal (400, 401, 403, 404, 413, 422, ...) is the request's: the harness's conversation,
parameters, model name or key. A stream the harness hangs up before the provider ended it is the harness's too
(``harness_closed``): only what the provider did (its status, a timeout, a connection that broke on its side) is
ever its failure.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ._ledger import HARNESS_CLOSED, OK, PROVIDER_FAILED, REFUSED

RETRY_STATUSES = frozenset({408, 409, 429})
"""HTTP statuses that are the provider's failure besides every 5xx (the ``openai`` agent retries the same ones;
tests/test_gateway.py checks that the two agree)."""

TOKEN_FIELDS = ("token_ids", "prompt_token_ids")
"""Fields holding token ids that providers add (vLLM with ``return_token_ids``); recorded where present."""


def status_of(http_status: int | None) -> str:
    """``ok``, ``provider_failed`` or ``refused`` for a provider's answer (None: no answer at all)."""
    if http_status is None or http_status >= 500 or http_status in RETRY_STATUSES:
        return PROVIDER_FAILED
    return OK if http_status < 400 else REFUSED


@dataclass
class Call:
    """A model call being recorded (one line of the ledger once done)."""

    stream: bool
    """Whether the harness asked for a stream."""
    model: str | None
    """The model the harness asked for."""
    started: float = field(default_factory=time.perf_counter)
    """``perf_counter`` when it was sent."""
    started_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="milliseconds"))
    """When it was sent (ISO 8601, UTC)."""
    first_byte_s: float | None = None
    """Seconds until the answer's headers (a stream: its first line)."""
    usage: dict[str, Any] | None = None
    """The provider's ``usage`` (None: it sent none)."""
    finish_reasons: list[str | None] = field(default_factory=list)
    """Each choice's finish reason."""
    logprobs: list[Any] = field(default_factory=list)
    """Each choice's (or chunk's) ``logprobs``, as the provider sent them."""
    token_ids: dict[str, Any] = field(default_factory=dict)
    """Token id fields the provider sent (``token_ids``, ``prompt_token_ids``)."""
    text_chars: int = 0
    """Characters of content generated."""

    def elapsed(self) -> float:
        """Seconds since the call was sent."""
        return time.perf_counter() - self.started

    def take(self, body: dict[str, Any]) -> None:
        """Collect what a completion (or one stream chunk) says: usage, finish reasons, logprobs, token ids."""
        if isinstance(body.get("usage"), dict):
            self.usage = body["usage"]
        for name in TOKEN_FIELDS:
            if name in body:
                self.token_ids.setdefault(name, []).append(body[name])
        for choice in body.get("choices") or ():
            if not isinstance(choice, dict):
                continue
            if choice.get("finish_reason") is not None:
                self.finish_reasons.append(choice["finish_reason"])
            if choice.get("logprobs") is not None:
                self.logprobs.append(choice["logprobs"])
            for name in TOKEN_FIELDS:
                if name in choice:
                    self.token_ids.setdefault(name, []).append(choice[name])
            message = choice.get("message") or choice.get("delta") or {}
            if isinstance(message, dict) and isinstance(message.get("content"), str):
                self.text_chars += len(message["content"])

    def line(self, index: int, http_status: int | None, error: str | None = None, *,
             status: str | None = None) -> dict[str, Any]:
        """The ledger line of the finished call. Its status is ``status`` when given (the gateway names
        ``harness_closed`` itself), else what ``http_status`` says (no status and an error: the provider failed)."""
        if status is None:
            status = status_of(http_status) if error is None or http_status is not None else PROVIDER_FAILED
        elif status not in (OK, REFUSED, PROVIDER_FAILED, HARNESS_CLOSED):
            raise ValueError(f"expected a call status of {OK!r}, {REFUSED!r}, {PROVIDER_FAILED!r} or "
                             f"{HARNESS_CLOSED!r}, got {status!r}; leave status out to derive it from the HTTP status")
        return {"call": index, "started_at": self.started_at, "latency_s": round(time.perf_counter() - self.started, 6),
                "first_byte_s": None if self.first_byte_s is None else round(self.first_byte_s, 6),
                "status": status,
                "http_status": http_status, "stream": self.stream, "model": self.model, "usage": self.usage,
                "finish_reasons": self.finish_reasons, "logprobs": self.logprobs or None,
                "token_ids": self.token_ids or None, "text_chars": self.text_chars, "error": error}
