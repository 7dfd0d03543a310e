"""rehearsal-env: practice worlds where tool-using AI agents are evaluated and trained.

Data flows one way::

    world (schema, seed data, tools, roles, policies, outside-service emulators)
      -> scenario (request, events, faults, goal checks, hard rules, solutions)
      -> env.reset / env.step       (one Gymnasium env per scenario; a tool call per step)
      -> verdict                    (read-only SQL checks: verified / not_achieved /
                                     rule_violated / not_scored, each check's result)
      -> reward under a profile     (outcome reward; ``benchmark`` / ``rl`` profiles)
      -> episode record -> run summary -> measure.py -> readiness

Quick use::

    import rehearsal_env
    env = rehearsal_env.make("shop/refund-item-0001")
    obs, info = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step('{"tool": "get_order", "args": {"order_id": 1}}')
"""

from ._version import __version__
from .checks import Check, CheckResult
from .env import RehearsalEnv, make, register_envs, restore
from .scenarios import Scenario
from .verdict import Ending, Outcome, Verdict
from .worlds import World, load_world, world_names

register_envs(builtin_only=True)  # no I/O at import: `rehearsal_env.register_envs()` adds folder and imported worlds

__all__ = [
    "Check",
    "CheckResult",
    "Ending",
    "Outcome",
    "RehearsalEnv",
    "Scenario",
    "Verdict",
    "World",
    "__version__",
    "load_world",
    "make",
    "register_envs",
    "restore",
    "world_names",
]
