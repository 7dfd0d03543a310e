"""What an OpenEnv client reads: the observations of a reset and of a tool call, and the state."""

from __future__ import annotations

from typing import Any

from openenv.core.env_server import CallToolObservation, Observation, State
from pydantic import Field


class RehearsalObservation(Observation):
    """The observation of ``reset``: the customer's request and everything to start the episode."""

    text: str = Field(description="The env's first observation (JSON text): turn, turns_left, messages")
    world: str = Field(description="The world's name")
    scenario: str = Field(description="The scenario id")
    split: str = Field(description="train, dev or holdout")
    role: str = Field(description="The role the agent plays; it decides the tools")
    system_prompt: str = Field(description="The system message: role, how messages arrive, policies")
    tools: list[dict[str, Any]] = Field(default_factory=list, description="The role's tools (OpenAI format)")


class RehearsalToolObservation(CallToolObservation):
    """The observation of a tool call: the env's observation, and on the final step the verdict."""

    text: str = Field(default="", description="The env's observation (JSON text): messages, tool_result")
    verdict: dict[str, Any] | None = Field(
        default=None, description="On the final step: outcome, ending, metrics, reward (and the check results, "
        "except on holdout scenarios); null before")


class RehearsalState(State):
    """The session's state: the episode and, once it ended, its outcome."""

    scenario: str | None = Field(default=None, description="The scenario being played")
    outcome: str | None = Field(default=None, description="The outcome once the episode ended")
