"""Agents: a policy is any callable ``(observation, info) -> action``; built-ins play scripts."""

from ._scripted import BUILTIN_AGENTS, NullAgent, Policy, ScriptedAgent, make_agent

__all__ = ["BUILTIN_AGENTS", "NullAgent", "Policy", "ScriptedAgent", "make_agent"]
