"""What a trainer's model reads: the system prompt of a scenario, and the customer's opening words."""

from __future__ import annotations

import json

from ..scenarios import Scenario
from ..worlds import World

STOPPED_REASON = "the agent stopped calling tools without calling finish or give_up"
"""The ``give_up`` reason sent for a model that ended its rollout without an ending tool (see
:meth:`~rehearsal_env.integrations.Session.settle`)."""


def system_prompt(world: World, scenario: Scenario, instructions: str = "") -> str:
    """The system message of one scenario: who the agent is, how messages arrive, the policies and
    the agent profile's ``instructions``.

    The first line is the one the ``openai`` agent writes (``scenario ID of world W, as the role R``),
    so the scripted OpenAI-protocol test server can play the scenario's reference from it.
    """
    lines = [f"You are working on scenario {scenario.id} of world {world.name}, as the role {scenario.role}. "
             "The customer's first message is the user message; later customer messages arrive inside tool "
             'results, under "messages". Act with the tools, one call at a time. End with finish (put the answer '
             "to a question in its answer argument), or give_up when the request cannot be done."]
    if world.policies:
        lines += ["", "Policies:"] + [f"- {p.text}" for p in world.policies]
    if instructions:
        lines += ["", instructions]
    return "\n".join(lines)


def opening_text(observation: str) -> str:
    """The customer's messages of an observation (the env's JSON text), one paragraph each."""
    return "\n\n".join(str(m) for m in json.loads(observation).get("messages") or ())
