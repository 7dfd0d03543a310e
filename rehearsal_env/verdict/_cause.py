"""Why an episode was not scored: the part that failed, never the agent.

``not_scored`` means the instrument failed, so measure and readiness leave the
episode out of every rate. That is safe only if nothing an agent sends can
cause it: whatever comes from the agent (action text, its JSON, arguments,
answers, token counts) is validated on the agent's side and a malformed one is
a *rejected attempt*. Only the parts named here can make an episode not scored,
and the record names which.
"""

from __future__ import annotations

from enum import StrEnum


class NotScoredCause(StrEnum):
    """The part whose failure made an episode not scored."""

    WORLD = "world"
    """The world's own code failed where no agent input reaches: a check that cannot be evaluated on the
    untouched snapshot, the world's customer script. (A tool that raises while handling an agent's call is
    a *tool crash*: the agent's error, recorded for the world's author, never ``not_scored``.)"""
    DATABASE = "database"
    """The database failed: the server died, a connection broke, a reset could not complete."""
    PROVIDER = "provider"
    """The model provider failed after its retries ran out (timeouts, 429, 5xx)."""
    SANDBOX = "sandbox"
    """The sandbox failed: a container or its network went away."""
    WORKER = "worker"
    """The worker process playing the episode died, on every try."""


class NotScoredError(Exception):
    """Raised by a part other than the agent when it fails: the episode is not scored.

    A policy raises it (through a subclass such as a provider error) to say the model provider
    failed; a backend or sandbox raises it for its own failures. The runner records the episode
    ``not_scored`` with :attr:`cause` and the message as its reason.
    """

    def __init__(self, cause: NotScoredCause, message: str) -> None:
        super().__init__(message)
        self.cause = NotScoredCause(cause)
        """The part that failed."""
