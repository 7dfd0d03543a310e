"""What one server process shares between requests (``app.state.serve``): the served worlds, the
keys, the session table, the recorder, the fair worker-thread limiter and what is computed once."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from gymnasium import spaces as gym_spaces

from ..env import CHARSET, MAX_ACTION, MAX_OBSERVATION
from ..provenance import provenance_of
from ..scenarios import Scenario
from ..worlds import World, load_world, world_names
from ._config import ServeConfig
from ._fair import FairLimiter
from ._keys import KeyStore
from ._recorder import Recorder
from ._session import NotFound
from ._sessions import SessionTable

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
                             per_key=per_key)
        return cls(config, served, keys, table, recorder)

    def start(self) -> None:
        """Make the worker-thread limiter (in the serving event loop)."""
        per_key = self.config.key_threads if self.keys is not None else self.config.threads
        self.limiter = FairLimiter(self.config.threads, per_key)

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
