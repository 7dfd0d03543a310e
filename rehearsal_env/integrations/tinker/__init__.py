"""The Tinker cookbook: a world's scenarios as its ``Env``, ``EnvGroupBuilder`` and ``RLDataset``
(``pip install 'rehearsal-env[tinker]'``).

Quick use, with the cookbook's renderer of the policy's model::

    from tinker_cookbook import renderers, tokenizer_utils
    from rehearsal_env.integrations.tinker import RehearsalDataset

    renderer = renderers.get_renderer("qwen3_instruct", tokenizer_utils.get_tokenizer(model_name))
    dataset = RehearsalDataset("shop", "train", renderer, batch_size=8, group_size=4, profile="rl_turns")
"""

from ._environment import AGENT, DEFAULT_OUT, RehearsalDataset, RehearsalEnvGroupBuilder, RehearsalMessageEnv

__all__ = ["AGENT", "DEFAULT_OUT", "RehearsalDataset", "RehearsalEnvGroupBuilder", "RehearsalMessageEnv"]
