"""Retired: verifiers 0.3's legacy ``MultiTurnEnv`` adapter (``load_environment``, ``RehearsalVerifiersEnv``).

verifiers 0.4 removed the legacy API this adapter stood on, and the one environment (every extra side by side)
installs verifiers 0.4. Its successor is :mod:`rehearsal_env.integrations.verifiers_v1`: a world's split as a
``verifiers.v1`` taskset (``rehearsal-verifiers``) whose episode is a per-rollout MCP toolset::

    vf-eval rehearsal-verifiers --env.taskset.world shop --env.taskset.split dev \\
        --env.agent.harness.id null -m MODEL --client.base-url URL

Importing this module (what ``vf.load_environment("rehearsal_env.integrations.verifiers", ...)`` did) raises
:class:`ImportError` with that pointer; see docs/harnesses.md, "verifiers' current API".
"""

RETIRED = (
    "rehearsal_env.integrations.verifiers (verifiers 0.3's MultiTurnEnv: load_environment, RehearsalVerifiersEnv) is "
    "retired: verifiers 0.4 removed that API. Use rehearsal_env.integrations.verifiers_v1, the verifiers.v1 taskset "
    "'rehearsal-verifiers' (vf-eval rehearsal-verifiers --env.taskset.world shop --env.taskset.split dev ...; "
    "pip install 'rehearsal-env[verifiers]'); see docs/harnesses.md, \"verifiers' current API\""
)
"""What importing this module says."""

raise ImportError(RETIRED, name=__name__)
