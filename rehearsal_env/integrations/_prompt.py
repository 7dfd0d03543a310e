"""What a trainer's model reads: exactly what the ``openai`` agent sends for the same episode.

A policy trained through an adapter must read the text it will be evaluated on: the same system message
(:func:`rehearsal_env.agents.system_prompt`: the world, the role, the policies, the profile's instructions; no
scenario id, so a prompt cache shares it), the customer's opening words as the user message, the role's tool schemas
(``Tool.schema()``; TRL derives the same from each method), and each tool result as the agent's tool message
(:func:`rehearsal_env.agents.tool_content`). One difference is the trainers' own: a customer message that arrives
during a call is a user message after the tool message for the agent, and inside the tool message (``messages``)
for a trainer whose loop appends tool results only (TRL).
"""

from __future__ import annotations

import json

from ..agents import system_prompt as agent_system_prompt
from ..agents import tool_content
from ..scenarios import Scenario
from ..worlds import World

STOPPED_REASON = "the agent stopped calling tools without calling finish or give_up"
"""The ``give_up`` reason sent for a model that ended its rollout without an ending tool (see
:meth:`~rehearsal_env.integrations.Session.settle`)."""


def system_prompt(world: World, scenario: Scenario, instructions: str = "") -> str:
    """The system message of one scenario, byte for byte the ``openai`` agent's (with the agent profile's
    ``instructions``)."""
    return agent_system_prompt(instructions, {"world": world.name, "role": scenario.role,
                                              "policies": [p.text for p in world.policies]})


def opening_text(observation: str) -> str:
    """The customer's messages of an observation (the env's JSON text), one paragraph each."""
    return "\n\n".join(str(m) for m in json.loads(observation).get("messages") or ())


def tool_text(observation: str) -> str:
    """The tool message of a step's observation (the env's JSON text) as the ``openai`` agent shows it, with the
    customer's messages of that step inside (``messages``) where there are any."""
    obs = json.loads(observation)
    if "tool_result" not in obs and "turns_left" not in obs:  # not an observation: a call after the end
        return tool_content(obs, None)
    result = dict(obs.get("tool_result") or {"status": obs.get("status"), "error": obs.get("error")})
    said = [str(m) for m in obs.get("messages") or ()]
    if said:
        result["messages"] = said
    return tool_content(result, obs.get("turns_left"))
