"""The HTTP client of ``rehearsal serve`` (httpx): one method per endpoint, safe retries.

A step carries its ``step_index``, so a step whose response was lost (a timeout, a dropped
connection) is sent again with the same index and the server answers the stored response:
it is never applied twice and replies never shift by one. Starting an episode carries a
``request_id`` for the same reason.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx


class ApiError(Exception):
    """The server refused a request; ``status`` is the HTTP status and ``detail`` its words."""

    def __init__(self, status: int, detail: str, body: dict[str, Any] | None = None) -> None:
        super().__init__(f"HTTP {status}: {detail}")
        self.status, self.detail, self.body = status, detail, body or {}


class AtCapacity(ApiError):
    """429: every session is in use; ``retry_after`` is the server's Retry-After in seconds."""

    def __init__(self, status: int, detail: str, body: dict[str, Any] | None, retry_after: float) -> None:
        super().__init__(status, detail, body)
        self.retry_after = retry_after


class StepConflict(ApiError):
    """409: the step's index is not the next one; ``expected`` is the one the server expects (None: ended)."""

    @property
    def expected(self) -> int | None:
        value = self.body.get("expected_step_index")
        return int(value) if value is not None else None


def _raise_for(response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    try:
        body = response.json()
    except ValueError:
        body = {"detail": response.text}
    raise_status(response.status_code, body, float(response.headers.get("retry-after", "1")))


def raise_status(status: int, body: Any, retry_after: float = 1.0) -> None:
    """Raise the :class:`ApiError` for an answer of ``status`` (at least 400) with ``body``."""
    detail = body.get("detail") if isinstance(body, dict) else None
    detail = detail if isinstance(detail, str) else str(detail or body)
    if status == 429:
        raise AtCapacity(429, detail, body, retry_after)
    if status == 409:
        raise StepConflict(409, detail, body)
    raise ApiError(status, detail, body)


class Client:
    """A client of one ``rehearsal serve`` server.

    Args:
        url: The server, e.g. ``http://127.0.0.1:8000``.
        key: An API key (``rehearsal keys create``); None for a server without keys (loopback only).
        timeout: Seconds to wait for one response.
        retries: How often a request that got no response (a timeout or connection error) is sent
            again; only idempotent requests are retried (steps carry ``step_index``).
    """

    def __init__(self, url: str, key: str | None = None, *, timeout: float = 60.0, retries: int = 3,
                 transport: httpx.BaseTransport | None = None) -> None:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.url = url.rstrip("/")
        self.retries = retries
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout, transport=transport)

    def _call(self, method: str, path: str, *, raw: bool = False, once: bool = False, **kwargs: Any) -> Any:
        """The response's JSON (``raw``: its bytes); ``once``: never sent again (a retry would act twice)."""
        for attempt in range(self.retries + 1):
            try:
                response = self._http.request(method, path, **kwargs)
                break
            except httpx.TransportError:
                if once or attempt == self.retries:
                    raise
                time.sleep(min(2.0, 0.05 * 2**attempt))
        _raise_for(response)
        return response.content if raw else response.json()

    # -- the endpoints ----------------------------------------------------------
    def health(self, world: str | None = None, profile: str | None = None) -> dict[str, Any]:
        """The provenance blob (of ``world`` under ``profile``) and the server's capabilities."""
        params = {k: v for k, v in (("world", world), ("profile", profile)) if v is not None}
        return dict(self._call("GET", "/health", params=params))

    def worlds(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "/v1/worlds"))

    def scenarios(self, world: str, split: str | None = None) -> list[dict[str, Any]]:
        params = {"split": split} if split else {}
        return list(self._call("GET", f"/v1/worlds/{world}/scenarios", params=params))

    def checks(self, world: str, scenario: str) -> dict[str, Any]:
        """A scenario's checks and solutions (needs a build-and-evaluate key; never a holdout scenario)."""
        return dict(self._call("GET", f"/v1/worlds/{world}/scenarios/{scenario}/checks"))

    def start(self, world: str, scenario: str, *, seed: int = 0, profile: str | None = None,
              agent: str = "external", agent_version: str = "unversioned") -> dict[str, Any]:
        """Start an episode; the response has ``episode_id``, ``observation``, ``tools``, ``policies``."""
        body = {"world": world, "scenario": scenario, "seed": seed, "profile": profile,
                "agent": {"name": agent, "version": agent_version}, "request_id": uuid.uuid4().hex}
        return dict(self._call("POST", "/v1/episodes", json=body))

    def step(self, episode_id: str, action: str, step_index: int) -> dict[str, Any]:
        """Take step ``step_index`` (0, 1, ...) of the episode; safe to retry."""
        return dict(self._call("POST", f"/v1/episodes/{episode_id}/step",
                               json={"action": action, "step_index": step_index}))

    def fork(self, episode_id: str) -> dict[str, Any]:
        """Fork the episode at its current turn: a new episode (``episode_id``, ``observation``, ``step_index``,
        ``parent``) of this key; both go on independently."""
        return dict(self._call("POST", f"/v1/episodes/{episode_id}/fork", once=True))

    def checkpoint(self, episode_id: str) -> bytes:
        """The episode's checkpoint bytes (restore them with :meth:`restore`, or ``rehearsal_env.restore``)."""
        data: bytes = self._call("GET", f"/v1/episodes/{episode_id}/checkpoint", raw=True)
        return data

    def restore(self, data: bytes) -> dict[str, Any]:
        """A new episode of this key from checkpoint bytes (the response is :meth:`fork`'s)."""
        return dict(self._call("POST", "/v1/episodes/restore", once=True, content=data,
                               headers={"content-type": "application/octet-stream"}))

    def episode(self, episode_id: str) -> dict[str, Any]:
        return dict(self._call("GET", f"/v1/episodes/{episode_id}"))

    def end(self, episode_id: str) -> dict[str, Any]:
        """End the episode (gave up unless it had ended) and free its session; safe to retry."""
        return dict(self._call("DELETE", f"/v1/episodes/{episode_id}"))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
