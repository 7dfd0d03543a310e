"""The env: an episode's step contract and its Gymnasium wrapper."""

from ._action import MAX_ACTION_CHARS, MAX_DEPTH, MAX_TOKENS, action_text, parse_action, readable_action, record_text
from ._customer import Customer, ScriptedCustomer
from ._env import RehearsalEnv
from ._episode import Episode, TurnRecord, failure
from ._events import Events, WriteDecision
from ._registry import make, register_envs

__all__ = [
    "MAX_ACTION_CHARS",
    "MAX_DEPTH",
    "MAX_TOKENS",
    "Customer",
    "Episode",
    "Events",
    "RehearsalEnv",
    "ScriptedCustomer",
    "TurnRecord",
    "WriteDecision",
    "action_text",
    "failure",
    "make",
    "parse_action",
    "readable_action",
    "record_text",
    "register_envs",
]
