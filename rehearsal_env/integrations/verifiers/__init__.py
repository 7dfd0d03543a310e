"""verifiers: ``load_environment(world=..., split=...)``, a ``MultiTurnEnv`` whose rubric is our reward.

Needs ``pip install rehearsal-env[verifiers]`` (verifiers 0.3, whose legacy stack has
``MultiTurnEnv``). verifiers finds it by module name::

    import verifiers as vf
    env = vf.load_environment("rehearsal_env.integrations.verifiers", world="shop", split="dev")
    results = env.evaluate_sync(client=vf.ClientConfig(...), model="...", num_examples=5)
"""

from ._environment import RehearsalEnv, load_environment, rows

__all__ = ["RehearsalEnv", "load_environment", "rows"]
