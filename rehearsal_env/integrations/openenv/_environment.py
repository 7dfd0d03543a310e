"""A world as an openenv-core ``MCPEnvironment``: each tool an MCP tool, one database per session.

openenv-core's ``HTTPEnvServer`` (``create_app``) makes one environment per WebSocket
session (``/ws``) with the factory it was given, and routes ``CallToolAction(tool_name,
arguments)`` through ``MCPEnvironment`` to the FastMCP server the environment holds. Here
every environment owns a :class:`~rehearsal_env.integrations.Session` (its own database,
reset per episode) and a FastMCP server whose tools are :class:`WorldTool` objects: they
carry our JSON schema as the MCP ``inputSchema`` and hand the arguments, unvalidated, to the
env (a wrong argument is the agent's rejected attempt, recorded in the episode and answered
in the observation, as in the Gymnasium env).

All database work of one environment runs on its own single thread (the server calls
``reset`` on a session thread and tools on its event loop), so the event loop never waits
for a query and a session's database is used from one thread at a time.

Under a shaped profile (``rl_turns``) every step's ``reward`` is that turn's, as the Gymnasium env gives it (they
sum to the episode's reward; a holdout episode's turns read 0 and its last the episode's reward). Otherwise the
final step's observation has ``reward``, the episode's under the profile (None when not scored). The final step has
``done`` and ``verdict`` as :func:`~rehearsal_env.episodes.ending_view` shows it (a holdout
episode's outcome, ending and reward only; which the improvement of an agent must never read).
Every episode is recorded, sealed, into ``OUT/<world>-<profile>/`` (``make_app(out=...)``,
default ``runs/openenv``).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fastmcp import FastMCP
from fastmcp.tools import Tool as McpTool
from fastmcp.tools.base import ToolResult
from mcp.types import TextContent
from openenv.core.env_server import CallToolObservation, MCPEnvironment, Observation
from pydantic import PrivateAttr

from ...scenarios import Split
from ...tools import Tool
from ...worlds import World
from .._prompt import system_prompt
from .._session import Session, tool_sets
from ._models import RehearsalObservation, RehearsalState, RehearsalToolObservation

DEFAULT_OUT = "runs/openenv"
"""Where the episodes are recorded unless ``out=`` names another place."""
AGENT = "openenv"
"""The agent name on the records unless ``agent=`` names another."""


class WorldTool(McpTool):
    """One world tool as an MCP tool: our schema is its ``inputSchema``; ``run`` is one env step."""

    _environment: WorldEnvironment = PrivateAttr()

    @classmethod
    def of(cls, tool: Tool, environment: WorldEnvironment) -> WorldTool:
        made = cls(name=tool.name, description=tool.description, parameters=dict(tool.parameters))
        made._environment = environment
        return made

    async def run(self, arguments: dict[str, Any]) -> ToolResult:
        text = await self._environment._in_thread(self._environment.session.call, self.name, arguments)
        return ToolResult(content=[TextContent(type="text", text=text)], structured_content=json.loads(text))


class WorldEnvironment(MCPEnvironment):
    """One session's environment of :attr:`world` (set on the class :func:`environment_factory` makes)."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    world: World
    split: Split | None = None
    profile: str | None = "rl"
    stress: bool = True
    out: str | None = DEFAULT_OUT
    agent: str = AGENT
    agent_version: str = "unversioned"

    def __init__(self) -> None:
        server = FastMCP(f"rehearsal-{self.world.name}")
        self.session = Session(self.world, profile=self.profile, stress=self.stress, out=self.out, agent=self.agent,
                               agent_version=self.agent_version)
        self._scenarios = self.world.scenarios(self.split)
        if not self._scenarios:
            raise ValueError(f"world {self.world.name!r} has no scenarios in split {self.split!r}")
        union: dict[str, Tool] = {}
        for tools in tool_sets(self.world, self._scenarios).values():
            union.update(tools)
        for tool in union.values():
            server.add_tool(WorldTool.of(tool, self))
        super().__init__(server)
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"rehearsal-{self.world.name}")
        self._episode_id: str | None = None

    async def _in_thread(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._thread, fn, *args)

    def reset(self, seed: int | None = None, episode_id: str | None = None, scenario: str | None = None,
              **kwargs: Any) -> Observation:
        """Start ``scenario`` (default: the split's scenario number ``seed`` modulo their count)."""
        seed = 0 if seed is None else int(seed)
        if scenario is None:
            chosen = self._scenarios[seed % len(self._scenarios)]
        else:
            chosen = self.world.scenario(scenario.rpartition("/")[2])
            if self.split is not None and chosen.split != self.split:
                raise ValueError(f"scenario {chosen.id!r} is in split {chosen.split!r}; this server serves "
                                 f"split {self.split!r}")
        text = self._thread.submit(self.session.start, chosen, seed).result()
        self._episode_id = episode_id or str(uuid.uuid4())
        info = self.session.info
        return RehearsalObservation(text=text, world=self.world.name, scenario=chosen.id, split=chosen.split,
                                    role=chosen.role, system_prompt=system_prompt(self.world, chosen),
                                    tools=list(info["tools"]), done=False, reward=None)

    def _terminal(self, observation: Observation) -> Observation:
        """The tool call's observation with the env's text, and ``done``/``reward``/``verdict`` at the end."""
        if not isinstance(observation, CallToolObservation):
            return observation
        result = observation.result
        content = getattr(result, "content", None) or []
        text = next((c.text for c in content if getattr(c, "type", None) == "text"), "")
        view = self.session.ending()["verdict"] if self.session.ended else None
        if self.session.shaped:  # each turn's reward, as the Gymnasium env gives it: they sum to the episode's
            reward: float | None = self.session.last_reward
        else:
            reward = view["reward"] if view is not None else None
        return RehearsalToolObservation(tool_name=observation.tool_name, result=result, error=observation.error,
                                        text=text, verdict=view, done=view is not None, reward=reward)

    def step(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        return self._terminal(super().step(action, timeout_s=timeout_s, **kwargs))

    async def step_async(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        return self._terminal(await super().step_async(action, timeout_s=timeout_s, **kwargs))

    def _step_impl(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        raise ValueError(f"expected a CallToolAction or ListToolsAction, got {type(action).__name__}; call a "
                         "tool with CallToolAction(tool_name=..., arguments={...})")

    @property
    def state(self) -> RehearsalState:
        env = self.session.env
        verdict = self.session.verdict
        return RehearsalState(episode_id=self._episode_id, step_count=env.episode.turn if env else 0,
                              scenario=env.scenario.id if env else None,
                              outcome=verdict.outcome.value if verdict else None)

    def close(self) -> None:
        try:
            self._thread.submit(self.session.close).result()
        finally:
            self._thread.shutdown(wait=False)
            super().close()


def environment_factory(world: World, split: Split | None = None, profile: str | None = "rl", *,
                        stress: bool = True, out: str | None = DEFAULT_OUT, agent: str = AGENT,
                        agent_version: str = "unversioned") -> type[WorldEnvironment]:
    """The environment class of ``world`` for ``create_app`` (openenv-core makes one per session); its episodes are
    recorded into ``out`` (None: not recorded) as ``agent`` at ``agent_version``."""
    name = "".join(w[:1].upper() + w[1:] for w in world.name.replace("-", "_").split("_") if w) + "OpenEnv"
    return type(name, (WorldEnvironment,), {"world": world, "split": split, "profile": profile, "stress": stress,
                                             "out": out, "agent": agent, "agent_version": agent_version})


__all__ = ["WorldEnvironment", "WorldTool", "environment_factory"]
