"""Serving a world through openenv-core's own ``create_app``, and a client that reads our observations."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from openenv.core.client_types import StepResult
from openenv.core.env_server import CallToolAction, ConcurrencyConfig, create_app
from openenv.core.mcp_client import MCPToolClient

from ...scenarios import Split
from ...worlds import World, load_world
from ._environment import AGENT, DEFAULT_OUT, environment_factory
from ._models import RehearsalObservation, RehearsalState, RehearsalToolObservation

DEFAULT_SESSIONS = 64
"""Default ``max_concurrent_envs``: it must be at least the trainer's generation batch size."""


def make_app(world: str | World, split: Split | None = None, profile: str | None = "rl", *,
             max_concurrent_envs: int = DEFAULT_SESSIONS, session_timeout: float | None = 600.0,
             stress: bool = True, out: str | None = DEFAULT_OUT, agent: str = AGENT,
             agent_version: str = "unversioned") -> FastAPI:
    """The FastAPI app of ``world`` made by openenv-core's ``create_app``: ``/ws`` (sessions), ``/mcp``,
    ``/reset``, ``/step``, ``/health``, ``/schema``; one environment and database per WebSocket session.

    Args:
        world: A world name or :class:`~rehearsal_env.World`.
        split: The split whose scenarios ``reset`` plays (None: every scenario).
        profile: The reward profile of the final step's reward (None: the outcome reward 1 / 0 / -1).
        max_concurrent_envs: Sessions at once (at least the trainer's generation batch size).
        session_timeout: Seconds a session may stay idle before the server closes it (None: never).
        stress: Whether the stress layer is on.
        out: Where every episode is recorded, sealed (``OUT/<world>-<profile>/``; None: not recorded).
        agent: The agent's name on the records.
        agent_version: The agent's version on the records.
    """
    w = load_world(world) if isinstance(world, str) else world
    factory = environment_factory(w, split, profile, stress=stress, out=out, agent=agent, agent_version=agent_version)
    return create_app(factory, CallToolAction, RehearsalToolObservation, env_name=f"rehearsal-{w.name}",
                      concurrency_config=ConcurrencyConfig(max_concurrent_envs=max_concurrent_envs,
                                                           session_timeout=session_timeout))


class RehearsalClient(MCPToolClient):
    """openenv-core's ``MCPToolClient`` that keeps our fields: the reset observation (request, tools, system
    prompt) and each tool call's ``text`` and final ``verdict``.

    Example::

        async with RehearsalClient(base_url=url) as env:
            first = await env.reset(scenario="refund-item-0001")
            step = await env.step(CallToolAction(tool_name="get_order", arguments={"order_id": 3294}))
            step.observation.text, step.done, step.reward, step.observation.verdict
    """

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[Any]:
        data = payload.get("observation", {})
        done, reward = payload.get("done", False), payload.get("reward")
        if "scenario" in data and "tool_name" not in data:
            return StepResult(observation=RehearsalObservation(**data, done=done, reward=reward), reward=reward,
                              done=done)
        if "tool_name" in data and "text" in data:
            observation = RehearsalToolObservation(**data, done=done, reward=reward)
            return StepResult(observation=observation, reward=reward, done=done)
        return super()._parse_result(payload)

    def _parse_state(self, payload: dict[str, Any]) -> RehearsalState:
        return RehearsalState(**payload)
