"""The verifiers v1 taskset ``rehearsal-verifiers``: :mod:`rehearsal_env.integrations.verifiers_v1`, top-level.

verifiers 0.4 imports a taskset by a top-level module name (``--env.taskset.id NAME``, ``-`` read as ``_``);
a dotted id does not resolve there, so this module re-exports the taskset under one::

    vf-eval rehearsal-verifiers --env.taskset.world shop --env.taskset.split dev --env.agent.harness.id null ...

Needs ``pip install rehearsal-env[verifiers]`` (verifiers 0.4; ``[verifiers-v1]`` is the same set).
"""

from rehearsal_env.integrations.verifiers_v1 import (
    RehearsalState,
    RehearsalTask,
    RehearsalTaskConfig,
    RehearsalTaskData,
    RehearsalTaskset,
    RehearsalTasksetConfig,
    RehearsalToolset,
    RehearsalToolsetConfig,
)

__all__ = [
    "RehearsalTaskset",
    "RehearsalTasksetConfig",
    "RehearsalTask",
    "RehearsalTaskConfig",
    "RehearsalTaskData",
    "RehearsalState",
    "RehearsalToolset",
    "RehearsalToolsetConfig",
]
