"""verl: a world's scenarios as an agent loop (``AgentLoopBase``) for verl's ``AgentLoopWorker``
(``pip install 'rehearsal-env[verl]'``, then ``pip install --no-deps verl``: see docs/trainers.md).

Quick use::

    from rehearsal_env.integrations.verl import dataset_rows, register

    register(profile="rl_turns", out="runs/verl")    # agent_name "rehearsal" in the rows
    rows = dataset_rows("shop", "train")              # write them as verl's parquet dataset
"""

from ._loop import AGENT, DEFAULT_OUT, NAME, RehearsalAgentLoop, dataset_rows, register

__all__ = ["AGENT", "DEFAULT_OUT", "NAME", "RehearsalAgentLoop", "dataset_rows", "register"]
