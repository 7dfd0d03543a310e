"""How a server runs: :class:`ServeConfig` (the ``rehearsal serve`` options), JSON for ``--workers``."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from ..env import MAX_ACTION
from ._ids import check_instance

MAX_BODY_BYTES = 2 * MAX_ACTION + (1 << 16)
"""The default bound on a request body: the longest action the action space allows, every character of it
escaped in JSON (two bytes), plus room for the rest of the request."""

CONFIG_ENV = "REHEARSAL_SERVE_CONFIG"
"""The environment variable that carries a :class:`ServeConfig` (JSON) to ``--workers`` processes."""


@dataclass(frozen=True)
class ServeConfig:
    """How a server runs (``rehearsal serve`` options)."""

    worlds: tuple[str, ...] = ()
    """Worlds served (empty: every registered world)."""
    backend: str = "sqlite"
    """sqlite or postgres."""
    backend_options: dict[str, Any] = field(default_factory=dict)
    """Backend options (PostgreSQL: ``dsn``)."""
    max_sessions: int = 1000
    """Live sessions one process holds; one more is answered 429 with Retry-After."""
    idle_timeout: float = 300.0
    """Seconds without a step (reads do not count) after which a session is ended (gave up) and recorded."""
    out: str | None = None
    """Where served episodes are recorded (``OUT/<world>-<profile>/`` run directories); None: not recorded."""
    keys: str | None = None
    """The keys file (``rehearsal keys create``); None: no keys, loopback clients only."""
    stress: bool = True
    """Whether the stress layer is on."""
    flush_every: int = 128
    """Most records per part file; buffered records are also written about every second, so a part holds at most
    this many or about a second's episodes. (32 until issue 37, round 3: a part's fixed cost (its file, the repeat
    counters, the summary, the seal, four fsyncs) paid every 32 episodes was most of what recording cost a served
    step, and the step that ended the 32nd episode waited for it.)"""
    threads: int = 8
    """Worker threads for database work."""
    max_sessions_per_key: int | None = None
    """Live sessions one key may hold (None: a quarter of ``max_sessions``, at least 1)."""
    threads_per_key: int | None = None
    """Worker threads one key's requests may hold at once (None: a quarter of ``threads``, at least 1)."""
    max_body_bytes: int = MAX_BODY_BYTES
    """Largest request body; a longer one is refused with 413 before it is read further."""
    instance: str | None = None
    """This server's name among several behind one reverse proxy (``--instance``): the prefix of its episode
    ids, which the proxy routes on (None: none)."""
    peers: str | None = None
    """The folder where the processes of one ``--workers N`` server find each other (``run_server`` sets it;
    None: the process serves alone)."""

    def __post_init__(self) -> None:
        checks = (("max_sessions", self.max_sessions, 1), ("threads", self.threads, 1),
                  ("max_sessions_per_key", self.max_sessions_per_key, 1),
                  ("threads_per_key", self.threads_per_key, 1), ("max_body_bytes", self.max_body_bytes, 1024),
                  ("flush_every", self.flush_every, 1))
        for name, value, least in checks:
            if value is not None and value < least:
                raise ValueError(f"expected {name} >= {least}, got {value}")
        if not self.idle_timeout > 0:
            raise ValueError(f"expected idle_timeout > 0 seconds, got {self.idle_timeout}")
        if self.instance is not None:
            check_instance(self.instance)

    @property
    def key_sessions(self) -> int:
        """Live sessions one key may hold."""
        return self.max_sessions_per_key or max(1, self.max_sessions // 4)

    @property
    def key_threads(self) -> int:
        """Worker threads one key's requests may hold at once."""
        return min(self.threads, self.threads_per_key or max(1, self.threads // 4))

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ServeConfig:
        raw: dict[str, Any] = json.loads(text)
        known = {f.name for f in fields(cls)}
        values: dict[str, Any] = {k: tuple(v) if k == "worlds" else v for k, v in raw.items() if k in known}
        return cls(**values)
