"""A WebSocket session whose episode another worker holds: its frames are relayed to that worker.

An ``attach`` frame naming another worker's episode opens a WebSocket to the owner's private address
(with the client's ``Authorization``), sends the frame there, and, when the owner accepts it, relays
every later frame of the connection as it is, answer for answer, until the client leaves. A relay
that breaks (the owner died or stopped) answers the frame it was relaying with the refusal an HTTP
request would get (``410`` with the cause) and the connection has no episode again.
"""

from __future__ import annotations

import asyncio
import json

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import InvalidHandshake, WebSocketException

from ._ids import owner_of
from ._route import FORWARD_TIMEOUT, Refusal, gone
from ._state import ServerState

PATH = "/v1/ws"


def _refused(refusal: Refusal) -> str:
    return json.dumps({"code": refusal.status, "body": refusal.body}, separators=(",", ":"), ensure_ascii=True)


class Relay:
    """The connection to the worker holding the episode, for one client connection."""

    def __init__(self, state: ServerState, episode_id: str, connection: ClientConnection) -> None:
        self.state, self.episode_id, self.connection = state, episode_id, connection

    @classmethod
    async def open(cls, state: ServerState, url: str, episode_id: str, authorization: str | None,
                   frame: str | bytes) -> tuple[Relay | None, str]:
        """Attach ``episode_id`` at its owner (``url``: its private address) with the client's ``frame``: the
        relay (None when the owner refused it or cannot be reached) and the answer for the client."""
        headers = {"Authorization": authorization} if authorization else {}
        try:
            connection = await connect("ws" + url[len("http"):] + PATH, additional_headers=headers, max_size=None,
                                       compression=None, open_timeout=FORWARD_TIMEOUT.connect)
        except (OSError, InvalidHandshake, TimeoutError):
            return None, await cls._gone(state, episode_id)
        relay = cls(state, episode_id, connection)
        answer = await relay.exchange(frame)
        if json.loads(answer).get("code") != 200:
            await relay.close()
            return None, answer
        return relay, answer

    async def exchange(self, frame: str | bytes) -> str:
        """Relay one frame; the owner's answer, or the refusal when the owner is gone (see :attr:`broken`)."""
        try:
            await self.connection.send(frame)
            answer = await asyncio.wait_for(self.connection.recv(), FORWARD_TIMEOUT.read)
        except TimeoutError:
            return _refused(Refusal(504, {"detail": f"the server process holding episode {self.episode_id} did not "
                                                    f"answer in time; retry (a step with the same step_index is never "
                                                    f"applied twice)", "retry_after": 1}))
        except (OSError, WebSocketException):
            await self.close()
            return await self._gone(self.state, self.episode_id)
        return answer if isinstance(answer, str) else answer.decode()

    @property
    def broken(self) -> bool:
        return self.connection.close_code is not None

    @staticmethod
    async def _gone(state: ServerState, episode_id: str) -> str:
        owner = owner_of(episode_id)
        assert owner is not None and owner.worker is not None and state.peers is not None
        state.peers.forget_url(owner.worker)
        return _refused(await state.off_loop("housekeeping", gone, state, episode_id, owner.worker))

    async def close(self) -> None:
        await self.connection.close()
