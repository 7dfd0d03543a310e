"""The env: an episode's step contract and its Gymnasium wrapper."""

from ._customer import Customer, ScriptedCustomer
from ._env import RehearsalEnv
from ._episode import Episode, TurnRecord
from ._events import Events, WriteDecision
from ._registry import make, register_envs

__all__ = [
    "Customer",
    "Episode",
    "Events",
    "RehearsalEnv",
    "ScriptedCustomer",
    "TurnRecord",
    "WriteDecision",
    "make",
    "register_envs",
]
