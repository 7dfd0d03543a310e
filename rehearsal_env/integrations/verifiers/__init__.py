"""verifiers: ``load_environment(world=..., split=...)``, a ``MultiTurnEnv`` whose rubric is our reward.

Needs ``pip install rehearsal-env[verifiers]`` (verifiers 0.3, whose legacy stack has
``MultiTurnEnv``). verifiers finds it by module name::

    import verifiers as vf
    env = vf.load_environment("rehearsal_env.integrations.verifiers", world="shop", split="dev")
    results = env.evaluate_sync(client=vf.ClientConfig(...), model="...", num_examples=5)

The environment class is :class:`RehearsalVerifiersEnv` (``RehearsalEnv`` is the Gymnasium env of
:mod:`rehearsal_env`; the old name here still works for one release, with a warning).
"""

from ._environment import RehearsalVerifiersEnv, load_environment, rows

__all__ = ["RehearsalVerifiersEnv", "load_environment", "rows"]


def __getattr__(name: str) -> object:
    """``RehearsalEnv``: the old name of :class:`RehearsalVerifiersEnv`."""
    if name == "RehearsalEnv":
        import warnings

        warnings.warn("rehearsal_env.integrations.verifiers.RehearsalEnv is now RehearsalVerifiersEnv; the old "
                      "name goes in the next release", DeprecationWarning, stacklevel=2)
        return RehearsalVerifiersEnv
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
