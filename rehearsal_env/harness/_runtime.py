"""An episode server with its session table and recorder: what ``rehearsal mcp --scenario`` runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp.server.lowlevel import Server

from ..episodes import Recorder, SessionTable
from ..gateway import KEPT_FOLDER, keep_calls
from ._episode import HostedEpisode
from ._mcp_episode import EpisodeServerConfig, episode_server

GATEWAY_FOLDER = KEPT_FOLDER
"""The folder of a run directory holding each gateway episode's model calls (``<episode id>.jsonl``)."""


@dataclass(frozen=True)
class Storage:
    """Where episodes run and are recorded."""

    out: str | Path = "runs/mcp"
    """Recorded into ``OUT/<world>-<profile>/`` run directories, like served episodes."""
    backend: str = "sqlite"
    """sqlite or postgres."""
    backend_options: dict[str, Any] = field(default_factory=dict)
    """Backend options (PostgreSQL: ``dsn``)."""
    stress: bool = True
    """Whether the stress layer is on."""
    max_sessions: int = 64
    """Episodes live at once (one per MCP session)."""


@dataclass
class EpisodeRuntime:
    """The MCP server, its table and recorder; :meth:`close` records what is left and closes the databases."""

    server: Server[Any]
    table: SessionTable
    recorder: Recorder

    def close(self) -> None:
        self.table.close()
        self.recorder.flush()


def _keep_calls(episode: HostedEpisode) -> None:
    """Copy the gateway's calls of an ended episode into its run directory, beside its records, with which step
    reported which call."""
    run_dir = episode.session.run_dir
    if episode.ledger is None or run_dir is None:
        return
    keep_calls(run_dir.path, episode.id, episode.ledger.read(episode.link)[:episode.counted], episode.calls_per_turn)


def episode_runtime(config: EpisodeServerConfig, storage: Storage | None = None) -> EpisodeRuntime:
    """The episode server of ``config``, recording into ``storage.out`` (each episode written as it ends)."""
    storage = storage or Storage()
    recorder = Recorder(storage.out, backend=storage.backend, stress=storage.stress, flush_every=1)
    table = SessionTable(backend=storage.backend, backend_options=storage.backend_options, stress=storage.stress,
                         max_sessions=storage.max_sessions, idle_timeout=config.idle_timeout, recorder=recorder)

    def ended(episode: HostedEpisode) -> None:
        recorder.flush()
        _keep_calls(episode)

    return EpisodeRuntime(episode_server(config, table, on_end=ended), table, recorder)
