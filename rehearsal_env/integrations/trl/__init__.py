"""TRL: a world as a ``GRPOTrainer(environment_factory=...)`` class, and its dataset.

Quick use (training needs ``pip install rehearsal-env[trl]``)::

    from trl import GRPOConfig, GRPOTrainer
    from rehearsal_env.integrations.trl import dataset, environment_class, render_as_served

    trainer = GRPOTrainer(model="Qwen/Qwen3-0.6B", args=GRPOConfig(...),
                          train_dataset=dataset("shop", "train"),
                          environment_factory=environment_class("shop", split="train", profile="rl"))
    render_as_served(trainer)  # the tools as the served agent sends them, not TRL's rendering of the methods

The class needs nothing from TRL: it is plain Python that TRL inspects.
"""

from ._dataset import dataset, dataset_rows
from ._environment import ToolEnvironment, environment_class, environment_classes
from ._methods import RESERVED, docstring, python_type, tool_method
from ._render import render_as_served
from ._rewards import turn_progress

__all__ = ["RESERVED", "ToolEnvironment", "dataset", "dataset_rows", "docstring", "environment_class",
           "environment_classes", "python_type", "render_as_served", "tool_method", "turn_progress"]
