"""uvicorn's WebSocket protocol, without two system calls per frame (issue 37, round 3).

uvicorn's ``websockets-sansio`` protocol stops reading the socket after every message it hands to the app
and starts again when the app takes it: for a session that sends one frame and waits for its answer, that
is an ``epoll_ctl`` to remove the socket and one to add it back for every step (about 4% of a served step's
CPU at 100 sessions). :class:`QuietProtocol` stops reading only once :data:`QUEUED` messages wait unread,
which a client that waits for each answer never reaches; a client that sends frames faster than the app
reads them is still held back (its frames wait in the kernel's buffer, as before).

``PROTOCOL`` is what ``uvicorn.Config(ws=...)`` takes: this class, or ``"auto"`` on a uvicorn without the
sansio protocol.
"""

from __future__ import annotations

from typing import Any

QUEUED = 4
"""Messages that may wait unread for the app before the socket is no longer read."""

PROTOCOL: Any = "auto"
"""The WebSocket protocol for ``uvicorn.Config(ws=...)``."""

try:
    from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
except ImportError:  # an older uvicorn: its own protocol, pausing per message
    pass
else:

    class QuietProtocol(WebSocketsSansIOProtocol):
        """``websockets-sansio``, reading on while fewer than :data:`QUEUED` messages wait for the app."""

        def send_receive_event_to_app(self) -> None:
            paused = self.read_paused
            self.read_paused = True  # the parent pauses reading unless it is paused already
            try:
                super().send_receive_event_to_app()
            finally:
                self.read_paused = paused
            if not paused and self.queue.qsize() >= QUEUED and not self.transport.is_closing():
                self.read_paused = True  # receive() resumes once the app has read every message
                self.transport.pause_reading()

    PROTOCOL = QuietProtocol
