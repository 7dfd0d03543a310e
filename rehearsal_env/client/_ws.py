"""The WebSocket session of ``rehearsal serve`` (the ``websockets`` package): one connection, one frame
per step, the HTTP API's semantics (see ``rehearsal_env.serve._ws`` for the frames).

A frame whose answer is lost (the connection dropped, or no answer within ``timeout``) is sent again
on a new connection that first re-attaches the episode: a step carries its ``step_index`` and a start
its ``request_id``, so a retry is never applied twice. Refusals raise the same :class:`ApiError`
subclasses as :class:`~rehearsal_env.client.Client`.
"""

from __future__ import annotations

import inspect
import json
import time
import uuid
from typing import Any
from urllib.parse import urlencode

from websockets.exceptions import ConnectionClosed, InvalidHandshake
from websockets.sync.client import ClientConnection, connect

from ._client import ApiError, raise_status

_DIRECT: dict[str, Any] = {"legacy": True} if "legacy" in inspect.signature(connect).parameters else {}
"""websockets 17 warns when ``connect()`` is not a ``with`` block unless ``legacy=True`` asks for the connection
itself, which older versions always return; this session keeps its connection across calls."""

PATH = "/v1/ws"
MISDIRECTED = 421
"""A server's answer for an episode of another instance (``rehearsal serve --instance``)."""
POLICY_VIOLATION = 1008
"""The close code of a connection whose key the server refused (after one 401/403 answer frame)."""


def ws_url(url: str) -> str:
    """The WebSocket address of the server at ``url`` (``http://`` becomes ``ws://``, ``https://`` ``wss://``)."""
    url = url.rstrip("/")
    for http, ws in (("http://", "ws://"), ("https://", "wss://")):
        if url.startswith(http):
            return ws + url[len(http):] + PATH
    if url.startswith(("ws://", "wss://")):
        return url if url.endswith(PATH) else url + PATH
    raise ValueError(f"expected the server's address as http://HOST:PORT (or ws://, https://, wss://); got {url!r}")


class WebSocketSession:
    """One WebSocket connection to a ``rehearsal serve`` server; it plays one episode at a time.

    Args:
        url: The server, e.g. ``http://127.0.0.1:8000``.
        key: An API key (None: a server without keys, loopback only).
        timeout: Seconds to wait for one answer.
        retries: How often a frame whose answer was lost is sent again on a new connection.
    """

    def __init__(self, url: str, key: str | None = None, *, timeout: float = 60.0, retries: int = 3) -> None:
        self.url = ws_url(url)
        self.timeout, self.retries = timeout, retries
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.episode_id: str | None = None
        self._ws: ClientConnection | None = None
        self._ws = self._connect()

    def _connect(self) -> ClientConnection:
        # ?episode=ID changes nothing at the server; a reverse proxy in front of several servers routes on it
        url = self.url if self.episode_id is None else f"{self.url}?{urlencode({'episode': self.episode_id})}"
        ws = connect(url, additional_headers=self._headers, open_timeout=self.timeout, compression=None, max_size=None,
                     **_DIRECT)
        if self.episode_id is not None:  # a new connection after a lost one: the episode goes on
            self._exchange(ws, {"op": "attach", "episode_id": self.episode_id})
        return ws

    def _exchange(self, ws: ClientConnection, frame: dict[str, Any]) -> Any:
        try:
            ws.send(json.dumps(frame, separators=(",", ":")))
            answer = json.loads(ws.recv(timeout=self.timeout))
        except ConnectionClosed as closed:
            if closed.rcvd is None or closed.rcvd.code != POLICY_VIOLATION:
                raise
            # the server refused the key: its one answer frame may have arrived before the close
            raise_status(*self._refusal(ws, closed.rcvd.reason))
        code, body = int(answer["code"]), answer["body"]
        if code >= 400:
            retry_after = body.get("retry_after", 1) if isinstance(body, dict) else 1
            raise_status(code, body, float(retry_after))
        return body

    @staticmethod
    def _refusal(ws: ClientConnection, reason: str) -> tuple[int, Any]:
        """The server's answer frame to a refused key (401/403), else a 401 naming the close's reason."""
        try:
            answer = json.loads(ws.recv(timeout=0))
            return int(answer["code"]), answer["body"]
        except (ConnectionClosed, TimeoutError, ValueError, KeyError, TypeError):
            return 401, {"detail": reason or "the server closed the connection: the API key was refused"}

    def _call(self, frame: dict[str, Any]) -> dict[str, Any]:
        for attempt in range(self.retries + 1):
            try:
                if self._ws is None:
                    self._ws = self._connect()
                return dict(self._exchange(self._ws, frame))
            except (ConnectionClosed, InvalidHandshake, OSError, TimeoutError):
                self._drop()
                if attempt == self.retries:
                    raise
                time.sleep(min(2.0, 0.05 * 2**attempt))
        raise AssertionError("unreachable")

    def _drop(self) -> None:
        if self._ws is not None:
            self._ws.close()
        self._ws = None

    def start(self, world: str, scenario: str, *, seed: int = 0, profile: str | None = None,
              agent: str = "external", agent_version: str = "unversioned") -> dict[str, Any]:
        """Start an episode (it becomes this connection's); the answer is ``Client.start``'s."""
        started = self._call({"op": "start", "world": world, "scenario": scenario, "seed": seed, "profile": profile,
                              "agent": {"name": agent, "version": agent_version}, "request_id": uuid.uuid4().hex})
        self.episode_id = str(started["episode_id"])
        return started

    def attach(self, episode_id: str) -> dict[str, Any]:
        """Play an episode of this key started elsewhere; the answer is ``Client.episode``'s. A server that is not
        the episode's instance answers 421: the attach is sent again on a new connection that names the episode
        (``?episode=ID``), which a reverse proxy in front of several servers routes to the one holding it."""
        try:
            state = self._call({"op": "attach", "episode_id": episode_id})
        except ApiError as exc:
            if exc.status != MISDIRECTED:
                raise
            self._drop()
            self.episode_id = episode_id
            state = self._call({"op": "attach", "episode_id": episode_id})
        self.episode_id = episode_id
        return state

    def step(self, action: str, step_index: int) -> dict[str, Any]:
        """Take step ``step_index`` of this connection's episode; safe to retry."""
        return self._call({"action": action, "step_index": step_index})

    def end(self) -> dict[str, Any]:
        """End this connection's episode (gave up unless it had ended); safe to retry."""
        return self._call({"op": "end"})

    def close(self) -> None:
        """Close the connection (an open episode stays open until the server's idle timer ends it)."""
        self._drop()

    def __enter__(self) -> WebSocketSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
