"""One hosted episode (:class:`Session`), who asks for it (:class:`Principal`) and the errors the session table
answers with (each carries the HTTP status a transport answers with; MCP and the trainers' adapters raise them as they
are)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from ..env import RehearsalEnv
from ..rewards import EXTERNAL_MODE
from ..scenarios import Scenario
from ..verdict import Verdict
from ..worlds import World
from ._keys import Scope
from ._recorder import RunDir


class SessionError(Exception):
    """A request the session table refuses; ``status`` is the HTTP status to answer with."""

    status = 400

    def __init__(self, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.extra = extra


class Unauthorized(SessionError):
    """401: no credential, or one this server does not know."""

    status = 401


class NotFound(SessionError):
    status = 404


class Forbidden(SessionError):
    status = 403


class StepConflict(SessionError):
    status = 409


class AtCapacity(SessionError):
    """429; ``retry_after`` is when a session may free, in seconds."""

    status = 429

    def __init__(self, message: str, retry_after: int = 1, **extra: Any) -> None:
        super().__init__(message, **extra)
        self.retry_after = retry_after


class Refused(SessionError):
    """422: a request that names something this server will not take (a checkpoint it did not issue)."""

    status = 422


class EnvironmentFailed(SessionError):
    status = 503


@dataclass(frozen=True)
class Principal:
    """Who sends a request: a key's id and scope (``local`` without keys)."""

    key_id: str
    """The key's id; the owner of the episodes it starts, and recorded on them (``key_id``)."""
    scope: Scope
    """What it may do."""
    agents: tuple[str, ...] = ()
    """The agent names the key may play as (empty: any)."""


@dataclass
class Session:
    """One episode over the API."""

    id: str
    owner: str
    world: World
    scenario: Scenario
    seed: int
    profile: str | None
    agent: str
    agent_version: str
    env: RehearsalEnv | None
    db: Any
    run_dir: RunDir | None
    last_step: float
    """When the session last started or stepped (monotonic); the idle timer runs from here, reads do not
    reset it."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    opening: str = ""
    """The first observation (answered again to a retried create)."""
    opening_info: dict[str, Any] = field(default_factory=dict)
    """The reset's ``info`` (world, scenario, split, role, policies, tools, seed); empty for a fork or restore."""
    steps: int = 0
    """Steps taken; the next step's index."""
    last_response: dict[str, Any] | None = None
    """The last step's response body (answered again to a retry of that step)."""
    tokens_reported: bool = False
    verdict: Verdict | None = None
    reward: float | None = None
    reward_detail: dict[str, Any] | None = None
    ended_by: str | None = None

    @property
    def caveats(self) -> list[str]:
        """The external-mode caveat, until the agent reports tokens."""
        return [] if self.tokens_reported else [EXTERNAL_MODE]

    @property
    def last_used(self) -> float:
        """When the idle timer started: the last step (the name the MCP harness reads)."""
        return self.last_step
