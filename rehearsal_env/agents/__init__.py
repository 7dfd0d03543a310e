"""Agents: a policy is any callable ``(observation, info) -> action``.

Built-ins play scripts (``reference``, ``null``, ``wrong:<name>``); the ``openai``
agent is a model over an OpenAI-compatible API; agent profiles name and version
what was evaluated. :mod:`rehearsal_env.agents.testing` serves scripted
completions over the OpenAI protocol for tests.
"""

from ._chatml import parse_reply, tools_block
from ._conversation import NOTE_PREFIX, REJECTED_KINDS, Conversation
from ._customer import ModelCustomer
from ._openai import AsyncOpenAIAgent, ModelAgents, ModelStats, OpenAIAgent, record_fields
from ._profile import (
    DEFAULT_INSTRUCTIONS,
    PROFILES_ENV,
    AgentProfile,
    Price,
    Provider,
    Sampling,
    builtin_profile,
    is_builtin,
    model_profile,
)
from ._profile_file import load_profile_file, parse_profile
from ._profile_store import ProfileStore, resolve_agent
from ._prompt import given_for, prompt_size, prompt_tokens, store_given, system_prompt, tool_content
from ._provider import Endpoint, ProviderError, ProviderRefused
from ._scripted import BUILTIN_AGENTS, NullAgent, Policy, ScriptedAgent, make_agent

__all__ = [
    "BUILTIN_AGENTS",
    "DEFAULT_INSTRUCTIONS",
    "NOTE_PREFIX",
    "PROFILES_ENV",
    "REJECTED_KINDS",
    "AgentProfile",
    "AsyncOpenAIAgent",
    "Conversation",
    "Endpoint",
    "ModelAgents",
    "ModelCustomer",
    "ModelStats",
    "NullAgent",
    "OpenAIAgent",
    "Policy",
    "ProfileStore",
    "Provider",
    "ProviderError",
    "ProviderRefused",
    "Price",
    "Sampling",
    "ScriptedAgent",
    "builtin_profile",
    "given_for",
    "is_builtin",
    "load_profile_file",
    "make_agent",
    "model_profile",
    "parse_profile",
    "parse_reply",
    "prompt_size",
    "prompt_tokens",
    "record_fields",
    "resolve_agent",
    "store_given",
    "system_prompt",
    "tool_content",
    "tools_block",
]


def __getattr__(name: str) -> object:
    """``ProfileError``: the old name of :class:`ProviderRefused` (kept for one release, with a warning)."""
    if name == "ProfileError":
        import warnings

        warnings.warn("rehearsal_env.agents.ProfileError is now ProviderRefused (the provider refused the model "
                      "or key); the old name goes in the next release", DeprecationWarning, stacklevel=2)
        return ProviderRefused
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
