"""What a model agent is given: its system prompt, the tools it is offered, and how big that is.

The system prompt holds only what every scenario of a world's role shares, so that a server's prompt
cache (llama.cpp reuses the longest prefix the last prompt shares with the next) reuses it across
scenarios and across episodes in flight; what differs per episode starts with the customer's first
message:

1. how the agent works (the same for every world), the world and the role;
2. the world's policies;
3. the profile's instructions.

No scenario id is in it: chat templates such as llama-cpp-python's ``chatml-function-calling`` put the
tool list *after* the system message's text, so anything per episode there would end the shared prefix
before the tools (measured: 132 tokens shared of 1,539, against 1,543 with it left out). The tools (the
request's ``tools``) are the role's, the same for every scenario of that role.

What a model was given is stored by content hash: a record names its system message and its tools by
hash (``system_prompt_sha``, ``tools_sha``), and the run directory holds each text once, as
``prompts/<hash>.txt`` and ``prompts/<hash>.json`` (:func:`store_given`).

Sizes are *estimated* without the model's tokenizer: :func:`prompt_tokens` counts one token per
:data:`CHARS_PER_TOKEN` characters of JSON-encoded messages and tools plus :data:`MESSAGE_OVERHEAD` per
message. Tool schemas, ids and JSON punctuation tokenize at about 3 characters a token on the small
models' tokenizers (English prose at about 4), so the estimate errs high: a prompt it lets through fits.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .._atomic import write_atomic
from ..scenarios import Scenario
from ..worlds import World

CHARS_PER_TOKEN = 3.0
"""Characters per token assumed by :func:`prompt_tokens` (low, so the estimate errs high)."""
MESSAGE_OVERHEAD = 8
"""Tokens a chat template adds around each message (role markers), assumed by :func:`prompt_tokens`."""
TOOLS_OVERHEAD = 64
"""Tokens a chat template adds around the tool list (its instructions), assumed by :func:`prompt_tokens`."""

PREAMBLE = ("You are a support agent. The customer's messages arrive as user messages; act with the tools, one "
            "call at a time, and end the conversation with finish (or give_up when the request cannot be done).")


def system_prompt(instructions: str, info: Mapping[str, Any]) -> str:
    """The system message for an episode whose reset ``info`` is given: the same for every scenario of the
    world's role (see the module docstring)."""
    lines = [PREAMBLE, f"You work in world {info.get('world')}, as the role {info.get('role')}."]
    policies = info.get("policies") or []
    if policies:
        lines += ["", "Policies:"] + [f"- {p}" for p in policies]
    if instructions:
        lines += ["", instructions]
    return "\n".join(lines)


def tool_content(result: Mapping[str, Any] | None, turns_left: Any) -> str:
    """The tool message a model reads for a call's result (the observation's ``tool_result``): the result without
    its tool name, and the turns left, as canonical JSON. The ``openai`` agent and the trainers' adapters (TRL)
    both show a result this way, so a policy trains on the text it is evaluated on."""
    body = dict(result or {})
    body.pop("tool", None)
    body["turns_left"] = turns_left
    return json.dumps(body, sort_keys=True, default=str)


def tools_text(tools: Sequence[Mapping[str, Any]]) -> str:
    """The tools offered, as canonical JSON text (what :func:`content_hash` of the tools hashes)."""
    return json.dumps(list(tools), sort_keys=True, separators=(",", ":"))


def content_hash(text: str) -> str:
    """SHA-256 of ``text`` (UTF-8), the first 16 hex digits: the name its text is stored under."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def prompt_tokens(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] = ()) -> int:
    """An estimate, erring high, of the prompt tokens of a request with ``messages`` and ``tools``."""
    chars = sum(len(json.dumps(m.get("content") or "")) + len(json.dumps(m.get("tool_calls") or ""))
                for m in messages)
    tokens = math.ceil(chars / CHARS_PER_TOKEN) + MESSAGE_OVERHEAD * len(messages)
    if tools:
        tokens += math.ceil(len(tools_text(tools)) / CHARS_PER_TOKEN) + TOOLS_OVERHEAD
    return tokens


def episode_info(world: World, scenario: Scenario) -> dict[str, Any]:
    """The parts of an episode's reset ``info`` the prompt is made of (as :class:`~rehearsal_env.env.RehearsalEnv`
    gives them): world, scenario, role, policies and the role's tools."""
    tools = world.tools_for(scenario.role, offers_retry=scenario.offers_retry)
    return {"world": world.name, "scenario": scenario.id, "role": scenario.role,
            "policies": [p.text for p in world.policies], "tools": [t.schema() for t in tools.values()]}


def given(system: str, tools: Sequence[Mapping[str, Any]]) -> dict[str, tuple[str, str]]:
    """``{"system": (hash, text), "tools": (hash, JSON text)}``: what a model was given, by content hash."""
    text = tools_text(tools)
    return {"system": (content_hash(system), system), "tools": (content_hash(text), text)}


def given_for(instructions: str, world: World, scenario: Scenario) -> dict[str, tuple[str, str]]:
    """What a model agent with ``instructions`` is given in an episode of ``scenario`` (see :func:`given`)."""
    info = episode_info(world, scenario)
    return given(system_prompt(instructions, info), info["tools"])


def store_given(run_dir: str | Path, parts: Mapping[str, tuple[str, str]]) -> list[Path]:
    """Write each text of :func:`given` once into ``run_dir/prompts/`` (``<hash>.txt`` for the system message,
    ``<hash>.json`` for the tools); a file already there is kept. Returns the paths."""
    folder = Path(run_dir) / "prompts"
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name, (sha, text) in parts.items():
        path = folder / f"{sha}.{'json' if name == 'tools' else 'txt'}"
        out.append(path)
        if path.exists():
            continue
        write_atomic(path, text)
    return out


def prompt_size(world: World, scenario: Scenario, instructions: str = "") -> dict[str, int]:
    """The size of what a model agent is given for ``scenario``: characters of the system message and of
    the tool schemas, the number of tools, and the estimated prompt tokens of the first request (with the
    opening message)."""
    info = episode_info(world, scenario)
    system = system_prompt(instructions, info)
    messages = [{"role": "system", "content": system}, {"role": "user", "content": scenario.request}]
    return {"system_chars": len(system), "tools": len(info["tools"]), "tools_chars": len(tools_text(info["tools"])),
            "tokens": prompt_tokens(messages, info["tools"])}
