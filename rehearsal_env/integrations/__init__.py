"""Integrations: our worlds as environments of the trainers researchers use.

Each framework has its own subpackage, imported on its own so that a missing
extra costs nothing elsewhere:

- :mod:`rehearsal_env.integrations.trl`: a TRL ``environment_factory`` class per world
  (``GRPOTrainer(environment_factory=...)``), one method per tool, and its dataset.
  Needs no extra itself; training needs ``pip install rehearsal-env[trl]``.
- :mod:`rehearsal_env.integrations.openenv`: the worlds served through openenv-core's
  ``create_app`` as an MCP environment (``[openenv]``).
- :mod:`rehearsal_env.integrations.verifiers_v1`: a world's split as a verifiers 0.4 taskset
  (``rehearsal-verifiers``) whose episode is an MCP toolset (``[verifiers]``); the legacy
  :mod:`rehearsal_env.integrations.verifiers` (verifiers 0.3) is retired.
- :mod:`rehearsal_env.integrations.skyrl`: a SkyRL-Gym ``BaseTextEnv`` (``[skyrl]``).
- :mod:`rehearsal_env.integrations.tinker`: the Tinker cookbook's ``Env``, ``EnvGroupBuilder`` and ``RLDataset``
  (``[tinker]``).
- :mod:`rehearsal_env.integrations.nemo_gym`: a NeMo Gym resources server (the base install).
- :mod:`rehearsal_env.integrations.verl`: a verl agent loop, ``AgentLoopBase`` (``[verl]``).

Every adapter plays the episode through the same :class:`~rehearsal_env.RehearsalEnv`
step contract (:class:`Session`), so a tool call is one env step, its result is the
env's observation, and the verdict and reward are the ones the Gymnasium env gives
for the same actions.
"""

from ._prompt import STOPPED_REASON, opening_text, system_prompt, tool_text
from ._session import ENDED, Session, tool_sets

__all__ = ["ENDED", "STOPPED_REASON", "Session", "opening_text", "system_prompt", "tool_sets", "tool_text"]
