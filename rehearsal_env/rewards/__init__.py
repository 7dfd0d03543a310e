"""Rewards: an episode's outcome turned into the scalar an RL loop or a leaderboard consumes.

The outcome (verified / not achieved / rule violated / not scored) stays what
the checks decided. A reward profile adds a scalar in [0, 1] made of
profile-independent *components* (:mod:`.components`), each computed from
stored data only (the trace, the check results, the metrics and the database
changes: :mod:`.inputs`), and combined by a pure function of the components
and a versioned profile file (:mod:`.profiles`).

Quick use::

    from rehearsal_env.rewards import evaluate, score
    result = evaluate("rl", env.episode, verdict)   # RewardResult: reward, components, gates, caveats
    value = score("benchmark", env.episode, verdict)  # float, or None when not scored

    env = rehearsal_env.make("analytics/revenue-0001", reward_profile="rl")  # env rewards under a profile
"""

from __future__ import annotations

from ..verdict import Outcome, Verdict
from .components import COMPONENTS, EXTERNAL_MODE, Components, compute_components
from .grounding import MAX_RESULT_VALUES, METHODS, runtime_grounding
from .inputs import ComponentInputs, FinishedEpisode, TurnInput, inputs_for, inputs_from_episode
from .profiles import (
    Profile,
    ProfileError,
    RewardResult,
    UnknownProfileError,
    apply_profile,
    load_profile,
    profile_names,
    profiles_dir,
)


def components_of(episode: FinishedEpisode, verdict: Verdict) -> Components:
    """The reward components of a finished episode (all unmeasured when it was not scored)."""
    if verdict.outcome is Outcome.NOT_SCORED:
        return Components.unmeasured()
    return compute_components(inputs_from_episode(episode, verdict))


def evaluate(profile_name: str, episode: FinishedEpisode, verdict: Verdict) -> RewardResult:
    """The episode's reward under ``profile_name``, with its components, gates and caveats.

    Raises:
        UnknownProfileError: naming the known profiles.
    """
    profile = load_profile(profile_name)
    if verdict.outcome is Outcome.NOT_SCORED:
        return RewardResult(profile.name, profile.reward_version, None, Components.unmeasured(), (),
                            (f"not scored: {verdict.reason}",))
    return apply_profile(profile, components_of(episode, verdict))


def score(profile_name: str, episode: FinishedEpisode, verdict: Verdict) -> float | None:
    """The scalar reward under ``profile_name`` (None: not scored). The env's ``reward()`` calls this."""
    return evaluate(profile_name, episode, verdict).reward


__all__ = [
    "COMPONENTS",
    "EXTERNAL_MODE",
    "MAX_RESULT_VALUES",
    "METHODS",
    "ComponentInputs",
    "Components",
    "FinishedEpisode",
    "Profile",
    "ProfileError",
    "RewardResult",
    "TurnInput",
    "UnknownProfileError",
    "apply_profile",
    "components_of",
    "compute_components",
    "evaluate",
    "inputs_for",
    "inputs_from_episode",
    "load_profile",
    "profile_names",
    "profiles_dir",
    "runtime_grounding",
    "score",
]
