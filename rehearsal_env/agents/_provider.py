"""The model provider: where an OpenAI-compatible API is, how calls to it are retried, and how it fails.

A call is retried when the provider, not the request, failed: a timeout, a
broken connection, HTTP 408, 409, 429 or 5xx. Between tries it waits
``min(max_backoff_s, backoff_s * 2**try)`` times a jitter in [0.5, 1], or what the
provider's ``Retry-After`` / ``retry-after-ms`` header asks (capped at
``max_backoff_s``). When the retries run out, :class:`ProviderError` says so: it
is a :class:`~rehearsal_env.verdict.NotScoredError` with cause ``provider``, so
the episode is *not scored*, never scored against the agent.

A refusal that is the request's fault is never retried:

- 401, 403, 404 (bad key, no access, unknown model): :class:`ProviderRefused`, which
  stops the run: every episode would fail the same way. Fix the profile's model,
  ``--base-url`` or ``--api-key-env``.
- 400, 413, 422 (context too long, a parameter the model refuses): the agent
  profile's fault (its model's context, its parameters, its conversation), so the
  episode is scored: the agent gives up with the provider's message as the reason
  (see :mod:`._openai`). One exception (:func:`context_contradiction`): a refusal
  for the context of a request that the profile's declared ``context`` holds by an
  estimate erring high is the server counting tokens the request does not hold
  (llama-cpp-python's ``chatml-function-calling`` counts its own first, runaway
  completion "in the messages"), so the episode is not scored (cause ``provider``).
"""

from __future__ import annotations

import os
import random
import re
from dataclasses import dataclass
from typing import Any

import openai

from ..verdict import NotScoredCause, NotScoredError

RETRY_STATUSES = frozenset({408, 409, 429})
"""HTTP statuses retried besides every 5xx."""
PROFILE_STATUSES = frozenset({401, 403, 404})
"""HTTP statuses that stop the run (:class:`ProviderRefused`)."""
CONTEXT_REFUSAL = re.compile(r"context (length|window|size)|maximum context|exceeds? (the )?context", re.IGNORECASE)
"""What a provider's 400/413 message says when it refuses a request as longer than the model's context."""
LOCAL_API_KEY = "unused-by-local-server"
"""The key sent when ``--base-url`` is given and the key's variable is unset (local servers ignore it)."""


class ProviderError(NotScoredError):
    """The model provider failed after the retries ran out: the episode is not scored (cause ``provider``)."""

    def __init__(self, message: str, *, tries: int, status: int | None = None) -> None:
        super().__init__(NotScoredCause.PROVIDER, message)
        self.tries = tries
        """How many times the call was sent."""
        self.status = status
        """The last HTTP status (None: a timeout or a broken connection)."""


class ProviderRefused(ValueError):
    """The provider refused the request in a way every episode would repeat (401, 403, 404): stop the run."""


@dataclass(frozen=True)
class Endpoint:
    """Where the model is served and how calls to it are retried (not part of the agent profile)."""

    base_url: str | None = None
    """The API's base URL, e.g. ``http://127.0.0.1:8000/v1`` (None: the SDK's default, api.openai.com)."""
    api_key_env: str = "OPENAI_API_KEY"
    """The environment variable holding the API key."""
    timeout_s: float = 60.0
    """Seconds one try may take before it counts as a timeout."""
    max_retries: int = 4
    """Retries after the first try (so at most ``max_retries + 1`` tries per call)."""
    backoff_s: float = 0.5
    """The first wait between tries; it doubles per try."""
    max_backoff_s: float = 8.0
    """The longest wait between tries (also caps a provider's Retry-After)."""

    def __post_init__(self) -> None:
        if self.timeout_s <= 0 or self.max_retries < 0 or self.backoff_s < 0 or self.max_backoff_s < 0:
            raise ValueError(f"expected timeout_s > 0 and max_retries, backoff_s, max_backoff_s >= 0, got "
                             f"{self.timeout_s}, {self.max_retries}, {self.backoff_s}, {self.max_backoff_s}")

    def api_key(self) -> str:
        """The key from ``$api_key_env``; a placeholder for a local ``base_url`` when it is unset.

        Raises:
            ValueError: no key for the default (remote) provider.
        """
        key = os.environ.get(self.api_key_env)
        if key:
            return key
        if self.base_url is None:
            raise ValueError(f"no API key: set ${self.api_key_env}, or name another variable with --api-key-env, "
                             "or serve the model locally and pass --base-url")
        return LOCAL_API_KEY

    def client(self) -> openai.OpenAI:
        """A synchronous client (the SDK's own retries off: :func:`retry_delay` decides)."""
        return openai.OpenAI(base_url=self.base_url, api_key=self.api_key(), timeout=self.timeout_s, max_retries=0)

    def async_client(self) -> openai.AsyncOpenAI:
        """An asynchronous client (the SDK's own retries off)."""
        return openai.AsyncOpenAI(base_url=self.base_url, api_key=self.api_key(), timeout=self.timeout_s,
                                  max_retries=0)

    def where(self, model: str | None) -> str:
        return f"model {model!r} at {self.base_url or 'the default OpenAI endpoint'}"


def _status(exc: BaseException) -> int | None:
    return exc.status_code if isinstance(exc, openai.APIStatusError) else None


def is_retryable(exc: BaseException) -> bool:
    """Whether ``exc`` is the provider's failure (retry it), not the request's."""
    if isinstance(exc, openai.APITimeoutError | openai.APIConnectionError):
        return True
    status = _status(exc)
    return status is not None and (status in RETRY_STATUSES or status >= 500)


def retry_delay(endpoint: Endpoint, tries: int, exc: BaseException, rng: random.Random | None = None) -> float:
    """Seconds to wait after ``tries`` failed tries: the provider's Retry-After, else backoff with jitter."""
    headers: Any = getattr(getattr(exc, "response", None), "headers", None) or {}
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name) if hasattr(headers, "get") else None
        try:
            asked = float(value) * scale if value is not None else None
        except ValueError:
            asked = None
        if asked is not None and asked >= 0:
            return min(asked, endpoint.max_backoff_s)
    jitter = 0.5 + 0.5 * (rng or random).random()
    return min(endpoint.max_backoff_s, endpoint.backoff_s * 2 ** (tries - 1)) * jitter


def describe_failure(exc: BaseException) -> str:
    """``HTTP 429: <the provider's message>`` or ``timeout``/``connection error``: what the provider said."""
    if isinstance(exc, openai.APITimeoutError):
        return "the request timed out"
    if isinstance(exc, openai.APIConnectionError):
        return f"the connection failed ({exc})"
    status = _status(exc)
    body: Any = getattr(exc, "body", None)
    message = body.get("message") if isinstance(body, dict) else None
    if message is None and isinstance(body, dict) and isinstance(body.get("error"), dict):
        message = body["error"].get("message")
    return f"HTTP {status}: {message or exc}"


def exhausted(endpoint: Endpoint, model: str | None, exc: BaseException, tries: int) -> ProviderError:
    """The :class:`ProviderError` for a call whose ``tries`` all failed with retryable errors, the last ``exc``."""
    return ProviderError(f"the model provider failed: {endpoint.where(model)}: {describe_failure(exc)}, "
                         f"after {tries} tries; the episode is not scored", tries=tries, status=_status(exc))


def context_contradiction(endpoint: Endpoint, model: str | None, exc: BaseException, tries: int, *,
                          wanted: int, context: int | None) -> ProviderError | None:
    """A :class:`ProviderError` when the provider refused a request as over the model's context although the
    request (``wanted``: its prompt estimated erring high, plus ``max_tokens``) is within the profile's declared
    ``context``; None otherwise (no context declared, another refusal, or a request that does not fit)."""
    if _status(exc) not in (400, 413) or context is None or wanted > context:
        return None
    what = describe_failure(exc)
    if not CONTEXT_REFUSAL.search(what):
        return None
    return ProviderError(f"the model provider refused {endpoint.where(model)} as over the model's context ({what}), "
                         f"but the request holds about {wanted} tokens (its prompt estimated erring high, plus "
                         f"max_tokens), within the profile's context of {context}: the server counted tokens the "
                         "request does not hold (e.g. llama-cpp-python's chatml-function-calling counts its own "
                         "runaway first completion); the episode is not scored. Serve the model with `rehearsal "
                         "models serve`, which honours max_tokens", tries=tries, status=_status(exc))


def refusal(endpoint: Endpoint, model: str | None, exc: BaseException) -> ProviderRefused | str:
    """A non-retryable refusal: a :class:`ProviderRefused` (401/403/404) to raise, or the give-up reason (other 4xx)."""
    status = _status(exc)
    what = describe_failure(exc)
    if status in PROFILE_STATUSES:
        return ProviderRefused(f"the model provider refused {endpoint.where(model)}: {what}. Every episode would "
                            "fail the same way, so the run stops: fix the profile's model name, --base-url or "
                            "--api-key-env")
    return (f"the model provider refused the request ({what}); this is the agent profile's fault (its model's "
            "context, its parameters or its conversation), so the episode is scored as given up")
