"""What a caller may see of an episode's ending: the one place every transport asks.

Every key reads a holdout episode's outcome, ending and reward, nothing else (no check, no scope, no reward
component or note: a component's note such as "1 of 2 goal checks passed" would tell what the scenario checks;
no per-turn reward of a shaped profile, which would tell which turn moved a goal check: a holdout episode's turns
earn 0 and its last turn the episode's reward).
Of any other episode, a build-and-evaluate key reads the whole verdict; an evaluate key reads it without its check
results. HTTP, WebSocket, MCP (stdio and HTTP), the trainers' adapters and the pool all answer with
:func:`ending_view`; none cuts a verdict by itself.
"""

from __future__ import annotations

from typing import Any

from ..verdict import Verdict
from ._keys import Scope
from ._session import Principal, Session

HOLDOUT_FIELDS = ("outcome", "ending", "reward")
"""All that any key reads of a holdout episode's verdict: no check, scope or reward-component detail."""


def verdict_view(verdict: Verdict | None, reward: float | None, scope: Scope, split: str) -> dict[str, Any] | None:
    """The verdict as ``scope`` may read it: a holdout episode's outcome, ending and reward only (for every
    key); otherwise the whole verdict, its check results only for build-and-evaluate."""
    if verdict is None:
        return None
    body = verdict.to_dict()
    body["reward"] = reward
    if split == "holdout":
        return {k: body[k] for k in HOLDOUT_FIELDS}
    if scope is not Scope.BUILD_AND_EVALUATE:
        body.pop("checks")
    return body


def detail_view(detail: dict[str, Any] | None, split: str) -> dict[str, Any] | None:
    """A reward profile's detail (components, notes, gates) as a key may read it: never for holdout."""
    return None if split == "holdout" else detail


def ending_view(session: Session, who: Principal) -> dict[str, Any]:
    """The ending of ``session`` as ``who`` may read it: ``verdict``, ``reward`` and ``reward_detail`` (each None
    while the episode is open)."""
    split = session.scenario.split
    return {"verdict": verdict_view(session.verdict, session.reward, who.scope, split),
            "reward": session.reward, "reward_detail": detail_view(session.reward_detail, split)}


def end_reward(reward: float, info: dict[str, Any]) -> float:
    """The episode's reward from its final step's ``reward`` and ``info``: under a shaped profile the final step pays
    the end reward less what earlier turns were paid, and ``info["end_reward"]`` is the episode's reward."""
    return float(info["end_reward"]) if info.get("end_reward") is not None else reward


def step_reward_view(reward: float, info: dict[str, Any], split: str) -> float:
    """A step's reward as any key may read it: a shaped profile's per-turn reward, except on holdout, whose turns
    read 0 and whose final step reads the episode's reward."""
    if split != "holdout" or "potential" not in info:
        return reward
    return end_reward(0.0, info) if "verdict" in info else 0.0
