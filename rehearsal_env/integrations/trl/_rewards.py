"""Per-turn rewards in the form TRL's ``GRPOTrainer`` takes: a reward function over the rollouts' environments.

What TRL 1.16 supports: a reward function gets the batch's ``environments`` (one instance per rollout) and returns
one float (or None) per rollout; ``GRPOTrainer`` weighs the functions (``reward_weights``), sums them into one reward
per rollout, normalises it within the prompt's group and gives that one advantage to every token of the rollout.
What it does not: a reward or an advantage per turn or per token; the model's turns share one advantage.

So per-turn rewards reach TRL in the one form that can change its gradient. Under a shaped profile (``rl_turns``)
the turns' rewards sum to the end reward by construction (potential-based shaping telescopes), so their sum alone
would be ``get_reward()`` again. What they add is the progress they paid before the last turn: the goal share the
episode's state reached, relative to its start, as the world's own checks read it. :func:`turn_progress` returns it:

* a function of the state reached, not of the path, so an undo-and-redo loop earns nothing net;
* 0 when a hard rule was broken (the safety gate ends the value of the episode, as in the profile);
* None when the episode was not scored (TRL leaves None out, as for ``get_reward``).

Pass it beside the environment's own ``get_reward`` (which TRL adds itself)::

    GRPOTrainer(..., environment_factory=environment_class(world, profile="rl_turns"),
                reward_funcs=[turn_progress], args=GRPOConfig(reward_weights=[0.5], ...))

(``reward_weights`` weighs ``reward_funcs`` only: TRL appends ``get_reward`` after them with weight 1.) A group
whose rollouts all fail then still has something to compare: how far each got. Each rollout's turn rewards also
go to TRL's completions table (``log_extra``, column ``turn_rewards``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ...rewards import load_profile
from ._environment import ToolEnvironment

SAFETY_OUTCOMES = frozenset({"rule_violated"})
"""Outcomes whose episodes earn no progress (the safety gate)."""


def turn_progress(environments: Sequence[Any] | None = None, log_extra: Callable[[str, list[Any]], None] | None = None,
                  **_: Any) -> list[float | None]:
    """TRL reward function: each rollout's progress paid before its last turn (see the module docstring).

    Raises:
        ValueError: no ``environments`` (TRL passes them only with ``environment_factory``), one that is not a
            rehearsal-env class, or a class whose profile pays no per-turn reward (use ``profile="rl_turns"``).
    """
    if environments is None:
        raise ValueError("turn_progress reads the rollouts' environments, which GRPOTrainer passes only with "
                         "environment_factory=environment_class(world, profile='rl_turns'); got none")
    out: list[float | None] = []
    for env in environments:
        if not isinstance(env, ToolEnvironment):
            raise ValueError(f"turn_progress reads rehearsal-env environments; got {type(env).__name__}. Pass "
                             "environment_factory=environment_class(world, profile='rl_turns')")
        if env.profile is None or load_profile(env.profile).shaping is None:
            raise ValueError(f"turn_progress needs per-turn rewards, but {type(env).__name__}'s profile "
                             f"{env.profile!r} pays one at the end only; make the class with profile='rl_turns'")
        verdict = env.verdict
        if verdict is None:  # the rollout was cut before get_reward settled it: settle it now
            env.get_reward()
            verdict = env.verdict
        turns = env.turn_rewards
        if verdict is None or verdict.outcome_reward is None:
            out.append(None)
        elif verdict.outcome.value in SAFETY_OUTCOMES:
            out.append(0.0)
        else:
            out.append(round(sum(turns[:-1]), 9))
    if log_extra is not None:
        log_extra("turn_rewards", [list(getattr(e, "turn_rewards", ())) for e in environments])
    return out
