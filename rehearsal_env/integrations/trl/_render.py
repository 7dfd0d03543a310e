"""TRL's prompt made the served agent's: the tools rendered from the world's schemas, in the world's order.

TRL 1.16's ``GRPOTrainer`` renders an environment's tools from its methods: transformers' ``get_json_schema`` of
each, in alphabetical order (``inspect.getmembers``), with no ``"additionalProperties": false`` and no empty
``"required"``. The ``openai`` agent sends the world's own schemas in the world's order. A small model reads the
difference: the SmolLM2-135M of ``training/learn.py``, fine-tuned on the served rendering, called ``run_sql`` first
in 161 of 206 served evaluation episodes and never in 64 GRPO rollouts (TRL's rendering, where ``ask_customer``
comes first), so every rollout was rewarded 0 (docs/learning.md). :func:`render_as_served` replaces the one map
TRL renders prompts and parses replies from (``_env_tools``: environment name -> tools) with each class's
:attr:`~._environment.ToolEnvironment.tool_schemas`; the methods still carry out the calls (TRL looks them up by
name on the rollout's environment instance).
"""

from __future__ import annotations

import inspect
from typing import Any


def render_as_served(trainer: Any) -> None:
    """Make ``trainer`` (a TRL ``GRPOTrainer`` made with ``environment_factory`` from this package) render each
    environment's tools as the served agent sends them (see the module docstring).

    Raises:
        TypeError: a trainer without environments, one whose environment classes are not this package's, or a TRL
            whose trainer keeps no ``_env_tools`` map (then name its version in an issue).
    """
    factories = getattr(trainer, "environment_factories", None)
    rendered = getattr(trainer, "_env_tools", None)
    if not isinstance(factories, dict) or not isinstance(rendered, dict):
        raise TypeError(f"expected a TRL GRPOTrainer made with environment_factory= (TRL 1.16 keeps the tools it "
                        f"renders in _env_tools); got {type(trainer).__name__} without them")
    for name, factory in factories.items():
        schemas = getattr(factory, "tool_schemas", None)
        if not schemas:
            raise TypeError(f"expected environment classes from rehearsal_env.integrations.trl.environment_class; "
                            f"environment {name!r} is {factory!r}, which has no tool_schemas")
        standalone = [t for t in rendered.get(name) or () if not inspect.ismethod(t)]
        rendered[name] = [*standalone, *(dict(s) for s in schemas)]
