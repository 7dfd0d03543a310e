"""A minimal harness: a model over an OpenAI-compatible API playing an MCP episode, tool call by tool call.

What every harness does, with nothing of ours in between: the system message is the MCP server's
``instructions``, the user message the ``scenario`` prompt's request, the tools are ``tools/list`` in
function-calling form, and each tool call the model makes is sent as ``tools/call`` with the first text
block of the result as the tool message. Used by the tests and ``benchmarks/harness.py``; point its
client at the gateway (``base_url=GATEWAY/episodes/LINK/v1``) to have the episode's tokens measured.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import openai
from mcp import ClientSession

from ._mcp_episode import PROMPT


@dataclass
class Played:
    """What the harness did."""

    ended: dict[str, Any] | None = None
    """The last tool result's ``structured_content`` once the episode ended (None: the model stopped first)."""
    actions: list[tuple[str, Any]] = field(default_factory=list)
    """Every tool call sent, in order (name, arguments)."""
    model_calls: int = 0
    """Chat completions requested."""


async def drive(session: ClientSession, client: openai.AsyncOpenAI, model: str, *, instructions: str,
                max_calls: int = 30, **sampling: Any) -> Played:
    """Play the session's episode with ``model`` for at most ``max_calls`` model calls."""
    listed = (await session.list_tools()).tools
    tools: Any = [{"type": "function", "function": {"name": t.name, "description": t.description or "",
                                                    "parameters": t.input_schema}} for t in listed]
    prompt = await session.get_prompt(PROMPT)
    request = prompt.messages[-1].content
    messages: list[Any] = [{"role": "system", "content": instructions},
                           {"role": "user", "content": getattr(request, "text", str(request))}]
    played = Played()
    while played.model_calls < max_calls:
        played.model_calls += 1
        completion = await client.chat.completions.create(model=model, messages=messages, tools=tools, **sampling)
        message = completion.choices[0].message
        calls = message.tool_calls or []
        messages.append({"role": "assistant", "content": message.content or "",
                         **({"tool_calls": [c.model_dump() for c in calls]} if calls else {})})
        if not calls:
            return played  # the model stopped without an ending tool: the server settles the episode
        for call in calls:
            function = getattr(call, "function", None)
            if function is None:
                continue
            try:
                args = json.loads(function.arguments or "{}")
            except ValueError:
                args = None
            if not isinstance(args, dict):  # a harness sends only an object; it tells the model instead
                messages.append({"role": "tool", "tool_call_id": call.id,
                                 "content": "error: the arguments were not a JSON object; nothing was called"})
                continue
            played.actions.append((function.name, args))
            result = await session.call_tool(function.name, args)
            text = next((getattr(c, "text", "") for c in result.content), "")
            messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
            if result.structured_content and result.structured_content.get("ended"):
                played.ended = result.structured_content
                return played
    return played
