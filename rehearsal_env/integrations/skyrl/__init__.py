"""SkyRL: a world's scenarios as a SkyRL-Gym text environment (``pip install 'rehearsal-env[skyrl]'``).

Quick use: register the env, give SkyRL the rows of :func:`dataset_rows` (their ``env_class`` is ``rehearsal``),
and set ``environment.skyrl_gym.rehearsal`` (``profile``, ``out``, ``agent``...) in SkyRL's config::

    from rehearsal_env.integrations.skyrl import dataset_rows, register

    register()                               # skyrl_gym.make("rehearsal", env_config=..., extras=row)
    rows = dataset_rows("shop", "train")     # write them as SkyRL's parquet dataset
"""

from ._environment import AGENT, DEFAULT_OUT, ENV_CLASS, RehearsalTextEnv, dataset_rows, register

__all__ = ["AGENT", "DEFAULT_OUT", "ENV_CLASS", "RehearsalTextEnv", "dataset_rows", "register"]
