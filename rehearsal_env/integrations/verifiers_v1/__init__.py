"""verifiers' current API (0.4, ``verifiers.v1``): a world's split as a taskset whose tools are an MCP toolset.

Needs ``pip install rehearsal-env[verifiers]`` (or ``[verifiers-v1]``, the same set), beside every other extra in
one environment: verifiers 0.4 pins ``mcp==2.0.0`` and ``openai<3``, which the ``mcp`` extra (SDK 2.x) and the core
dependencies allow. It succeeds the retired legacy adapter (:mod:`rehearsal_env.integrations.verifiers`, verifiers
0.3's ``MultiTurnEnv``). verifiers finds the taskset by the top-level module ``rehearsal_verifiers`` (verifiers
imports a taskset id as a top-level name)::

    vf-eval rehearsal-verifiers --env.taskset.world shop --env.taskset.split dev \\
        --env.agent.harness.id null -m MODEL --client.base-url URL

Each rollout's episode is an MCP server (:class:`RehearsalToolset`), played by the harness with its own
loop, recorded like a served episode, and scored by our verdict (:class:`RehearsalTask`'s reward).
"""

import re as _re
from importlib.metadata import PackageNotFoundError as _Missing
from importlib.metadata import version as _version

try:
    _found = _version("verifiers")
except _Missing:
    _found = "none"
_release = _re.match(r"(\d+)\.(\d+)", _found)
if _release is None or (int(_release[1]), int(_release[2])) < (0, 4):
    # verifiers 0.3 (the retired legacy extra) ships an early preview of verifiers.v1 with another API: not this one
    raise ModuleNotFoundError(f"rehearsal_env.integrations.verifiers_v1 needs verifiers>=0.4,<0.5 (installed: "
                              f"{_found}): pip install 'rehearsal-env[verifiers]'", name="verifiers.v1")

from ._taskset import (  # noqa: E402  (after the version check)
    RehearsalTask,
    RehearsalTaskConfig,
    RehearsalTaskData,
    RehearsalTaskset,
    RehearsalTasksetConfig,
)
from ._toolset import AGENT, RehearsalState, RehearsalToolset, RehearsalToolsetConfig  # noqa: E402

__all__ = [
    "AGENT",
    "RehearsalState",
    "RehearsalTask",
    "RehearsalTaskConfig",
    "RehearsalTaskData",
    "RehearsalTaskset",
    "RehearsalTasksetConfig",
    "RehearsalToolset",
    "RehearsalToolsetConfig",
]
