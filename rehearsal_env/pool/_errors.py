"""What the pool tells a caller instead of hanging: a typed refusal when full, a session it could not save."""

from __future__ import annotations

from ..records import EpisodeRecord


class PoolFull(RuntimeError):
    """The pool refused a call now (backpressure): every session slot is taken, or the caller is at its share.

    Nothing was started or changed; try again after :attr:`retry_after_s` (or close sessions first).
    """

    def __init__(self, message: str, *, caller: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.caller = caller
        """The caller the refusal is for."""
        self.retry_after_s = retry_after_s
        """A hint: seconds after which the call may succeed."""

    def __reduce__(self) -> tuple[object, ...]:
        return _pool_full, (str(self), self.caller, self.retry_after_s)


def _pool_full(message: str, caller: str, retry_after_s: float) -> PoolFull:
    return PoolFull(message, caller=caller, retry_after_s=retry_after_s)


class SessionLost(RuntimeError):
    """A session's actor died before the session had a checkpoint, so it could not be continued elsewhere.

    The episode is recorded ``not_scored`` with cause ``worker`` (:attr:`record`, also in the pool's run
    directory); the session is gone. A session that had a checkpoint is never lost: it goes on on another
    actor and the caller only sees its next observation.
    """

    def __init__(self, message: str, record: EpisodeRecord) -> None:
        super().__init__(message)
        self.record = record
        """The episode's not-scored record (cause ``worker``)."""

    def __reduce__(self) -> tuple[object, ...]:
        return type(self), (str(self), self.record)


class SessionClosed(KeyError):
    """A call named a session the pool does not hold (never opened, or already ended and closed)."""
