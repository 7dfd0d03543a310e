"""The env: an episode's step contract and its Gymnasium wrapper."""

from ._action import (
    MAX_ACTION_CHARS,
    MAX_DEPTH,
    MAX_TOKENS,
    action_text,
    parse_action,
    readable_action,
    record_text,
    reported_tokens,
)
from ._chain import FULL_EVERY, CheckpointChain
from ._checkpoint import CheckpointError, Served, open_served, read_header, wrap_served
from ._crash import ToolCrash
from ._customer import Customer, ScriptedCustomer
from ._env import CHARSET, MAX_ACTION, MAX_OBSERVATION, RehearsalEnv
from ._episode import Episode, TurnRecord, failure
from ._events import Events, WriteDecision
from ._fork import close_spares, prepare_spares
from ._lineage import Lineage
from ._registry import make, register_envs
from ._restore import restore
from ._state import NotForkable

__all__ = [
    "CHARSET",
    "MAX_ACTION",
    "MAX_ACTION_CHARS",
    "MAX_DEPTH",
    "MAX_OBSERVATION",
    "MAX_TOKENS",
    "CheckpointChain",
    "CheckpointError",
    "FULL_EVERY",
    "Customer",
    "Episode",
    "Events",
    "Lineage",
    "NotForkable",
    "RehearsalEnv",
    "ScriptedCustomer",
    "ToolCrash",
    "TurnRecord",
    "WriteDecision",
    "action_text",
    "close_spares",
    "failure",
    "make",
    "parse_action",
    "prepare_spares",
    "Served",
    "open_served",
    "read_header",
    "wrap_served",
    "readable_action",
    "record_text",
    "reported_tokens",
    "register_envs",
    "restore",
]
