"""Scenario specs (frozen dataclasses) and their loading from TOML."""

from ._load import load_scenarios
from ._spec import (
    SPLITS,
    Fault,
    RequestChange,
    Scenario,
    Solution,
    Split,
    ToolCall,
    scenario_dict,
)

__all__ = [
    "SPLITS",
    "Fault",
    "RequestChange",
    "Scenario",
    "Solution",
    "Split",
    "ToolCall",
    "load_scenarios",
    "scenario_dict",
]
