"""What one server process shares between requests (``app.state.serve``): the served worlds, the
keys, the session table, the recorder, the fair worker-thread limiter and what is computed once."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import httpx
from gymnasium import spaces as gym_spaces

from ..env import CHARSET, MAX_ACTION, MAX_OBSERVATION
from ..episodes import CheckpointSeal, KeyStore, NotFound, Recorder, SessionTable
from ..provenance import provenance_of
from ..scenarios import Scenario
from ..verdict import NotScoredCause
from ..worlds import World, load_world, world_names
from ._config import ServeConfig
from ._fair import FairLimiter
from ._ids import Identity
from ._peers import Peers

T = TypeVar("T")
MAX_NAME = 200
"""Longest world or scenario name a request may carry; a longer one is refused unread."""
ECHO = 80
"""Most characters of a name an error repeats back."""


def echo(name: str) -> str:
    """``name`` as an error may repeat it: quoted, at most :data:`ECHO` characters, ASCII only."""
    short = name[:ECHO].encode("ascii", "backslashreplace").decode()
    return repr(short) + (f" (and {len(name) - ECHO} more characters)" if len(name) > ECHO else "")


def space(kind: gym_spaces.Text) -> dict[str, Any]:
    return {"max_length": kind.max_length, "charset": "".join(sorted(kind.character_set))}


@dataclass
class ServerState:
    """The server's shared state, built once per process (``create_app``)."""

    config: ServeConfig
    worlds: dict[str, World]
    keys: KeyStore | None
    table: SessionTable
    recorder: Recorder | None
    limiter: FairLimiter | None = None
    """Made in the lifespan (it belongs to the event loop that serves)."""
    identity: Identity = field(default_factory=Identity)
    """This process's instance name and worker tag (the prefix of the episode ids it issues)."""
    peers: Peers | None = None
    """The other workers of a ``--workers N`` server (None: this process serves alone)."""
    private_port: int | None = None
    """This worker's own port on 127.0.0.1 (forwarded requests come in there; set in the lifespan)."""
    http: httpx.AsyncClient | None = None
    """The client that forwards requests to the other workers (made in the lifespan)."""
    provenance: dict[tuple[str, str | None], dict[str, Any]] = field(default_factory=dict)
    tools: dict[tuple[str, str, bool], list[dict[str, Any]]] = field(default_factory=dict)
    spaces: dict[str, Any] = field(default_factory=lambda: {
        "observation_space": space(gym_spaces.Text(max_length=MAX_OBSERVATION, charset=CHARSET)),
        "action_space": space(gym_spaces.Text(max_length=MAX_ACTION, charset=CHARSET))})

    @classmethod
    def build(cls, config: ServeConfig, worlds: Sequence[World] = ()) -> ServerState:
        served: dict[str, World] = {w.name: w for w in worlds}
        for name in config.worlds or ([] if worlds else world_names()):
            served.setdefault(name, load_world(name))
        keys = KeyStore(config.keys) if config.keys is not None else None
        if keys is not None and not keys.path.exists():
            raise FileNotFoundError(f"expected a keys file at {keys.path}; create keys with "
                                    f"`rehearsal keys create --scope evaluate --file {keys.path}`")
        recorder = (Recorder(config.out, backend=config.backend, stress=config.stress, flush_every=config.flush_every)
                    if config.out is not None else None)
        # without keys there is one client (loopback): no other key to be fair to
        per_key = config.key_sessions if keys is not None else config.max_sessions
        table = SessionTable(backend=config.backend, backend_options=config.backend_options, stress=config.stress,
                             max_sessions=config.max_sessions, idle_timeout=config.idle_timeout, recorder=recorder,
                             per_key=per_key, seal=CheckpointSeal.shared(config.peers) if config.peers else None)
        identity = Identity.of(config.instance, config.peers is not None)
        peers = Peers(config.peers, identity.worker or "") if config.peers is not None else None
        table.new_id, table.journal = identity.new_id, peers
        return cls(config, served, keys, table, recorder, identity=identity, peers=peers)

    def start(self) -> None:
        """Make the worker-thread limiter (in the serving event loop)."""
        per_key = self.config.key_threads if self.keys is not None else self.config.threads
        self.limiter = FairLimiter(self.config.threads, per_key)

    def flush(self) -> None:
        """Write the buffered records, then drop the journal entries of the episodes they hold."""
        ended = self.peers.take_ended() if self.peers is not None else []
        if self.recorder is not None:
            self.recorder.flush()
        if self.peers is not None:
            self.peers.forget(ended)

    def sweep(self) -> int:
        """Record the open episodes of workers that died (see :class:`Peers`); how many workers were found dead."""
        try:
            died = self.peers.sweep(self.record_lost) if self.peers is not None else 0
        except OSError:  # the shared folder is unreadable now: the next tick tries again
            return 0
        if died and self.recorder is not None:
            self.recorder.flush()
        return died

    def record_lost(self, item: dict[str, Any], reason: str) -> str | None:
        """Record an episode of a dead worker's journal ``not_scored`` (cause ``worker``) unless its record was
        written; the run directory it went to (None: it was recorded before, or nothing is recorded)."""
        world = self.worlds.get(str(item.get("world")))
        if self.recorder is None or world is None:
            return None
        run_dir = self.recorder.run_dir(world.name, provenance_of(world, item.get("profile")))
        if item["episode_id"] in self.recorder.recorded(run_dir.path):
            return None
        stamp = self.recorder.stamp(run_dir, str(item["agent"]), str(item["agent_version"]))
        record = stamp.not_played(world.scenario(str(item["scenario"])), repeat=0, seed=int(item["seed"]),
                                  reason=reason, cause=NotScoredCause.WORKER)
        self.recorder.add(run_dir, replace(record, key_id=str(item["key_id"]), episode_id=str(item["episode_id"])))
        return str(run_dir.path)

    async def off_loop(self, key: str, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in a worker thread, within ``key``'s share of them."""
        assert self.limiter is not None, "the app's lifespan has not started"
        return await self.limiter.run(key, fn, *args)

    def world(self, name: str) -> World:
        """A served world by name (:class:`NotFound` names the served ones)."""
        world = self.worlds.get(name) if len(name) <= MAX_NAME else None
        if world is None:
            raise NotFound(f"this server does not serve world {echo(name)}; it serves: "
                           f"{', '.join(sorted(self.worlds))}")
        return world

    def find(self, world: str, scenario_id: str) -> tuple[World, Scenario]:
        """The served world and scenario of these names (:class:`NotFound` as :meth:`world` and :meth:`scenario`)."""
        served = self.world(world)
        return served, self.scenario(served, scenario_id)

    def scenario(self, world: World, scenario_id: str) -> Scenario:
        """A scenario of ``world`` by id (:class:`NotFound` with a did-you-mean, never the whole id)."""
        if len(scenario_id) > MAX_NAME:
            raise NotFound(f"expected a scenario id of world {world.name!r} (at most {MAX_NAME} characters); got "
                           f"{echo(scenario_id)}; list them with GET /v1/worlds/{world.name}/scenarios")
        try:
            return world.scenario(scenario_id)
        except KeyError as exc:
            raise NotFound(str(exc.args[0]) if exc.args else str(exc)) from None

    def blob(self, world: str, profile: str | None) -> dict[str, Any]:
        """The provenance blob of ``world`` under ``profile`` (computed once)."""
        if (world, profile) not in self.provenance:
            self.provenance[(world, profile)] = provenance_of(self.worlds[world], profile).to_dict()
        return self.provenance[(world, profile)]

    def tools_of(self, scenario: Scenario) -> list[dict[str, Any]]:
        """The role's tools in OpenAI format (what the env's reset info holds), computed once per role."""
        key = (scenario.world, scenario.role, scenario.offers_retry)
        if key not in self.tools:
            tools = self.worlds[scenario.world].tools_for(scenario.role, offers_retry=scenario.offers_retry)
            self.tools[key] = [t.schema() for t in tools.values()]
        return self.tools[key]
