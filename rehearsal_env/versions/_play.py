"""Validation episodes: play a policy to its verdict, replay recorded actions, say what happened in words."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..agents import Policy
from ..backends import digest
from ..env import RehearsalEnv, TurnRecord
from ..scenarios import ToolCall
from ..verdict import Outcome, Verdict


class BuildAborted(RuntimeError):
    """An episode raised: the environment or the world's code failed, not a scenario. Nothing is published."""


@dataclass(frozen=True)
class ValidationEpisode:
    """One validation episode."""

    verdict: Verdict
    """The verdict."""
    trace: tuple[TurnRecord, ...]
    """Every turn."""
    digest: str | None
    """SHA-256 of the database at the end (when asked for)."""

    @property
    def outcome(self) -> Outcome:
        return self.verdict.outcome


class ReplayAgent:
    """Sends recorded actions in order, then gives up."""

    def __init__(self, actions: Sequence[str]) -> None:
        self._actions = list(actions)

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        if self._actions:
            return self._actions.pop(0)
        return ToolCall("give_up", {"reason": "the replay has no more actions"}).to_action()


def play_validation(env: RehearsalEnv, agent: Policy, seed: int, who: str, *,
                    want_digest: bool = False) -> ValidationEpisode:
    """Play one episode to its verdict.

    Raises:
        BuildAborted: the episode raised (a bug in the environment or the world's tools, not an unfair job).
    """
    try:
        observation, info = env.reset(seed=seed)
        while True:
            observation, _, terminated, truncated, info = env.step(agent(observation, info))
            if terminated or truncated:
                break
        return ValidationEpisode(info["verdict"], tuple(env.episode.trace), digest(env.db) if want_digest else None)
    except Exception as exc:
        raise BuildAborted(
            f"scenario {env.scenario.id!r}: the {who} episode raised {type(exc).__name__}: {exc}. The "
            "environment or the world's code failed, not the scenario; nothing was published. Fix it and "
            "build again") from exc


def describe(p: ValidationEpisode) -> str:
    """The outcome and what decided it, in words."""
    v = p.verdict
    if v.outcome is Outcome.NOT_SCORED:
        return f"not scored ({v.reason})"
    text = f"{v.outcome.value} in {v.metrics.turns} turn(s), ending {v.ending.value}"
    failed = [c for c in v.checks if not c.passed]
    if failed:
        text += "; failed: " + "; ".join(
            f"{'hard rule' if c.kind == 'hard_rule' else 'goal check'} {c.name!r} wanted {c.op} {c.want!r}, "
            f"held {c.held!r}" for c in failed)
    rejected = [t for t in p.trace if t.status == "rejected"]
    if rejected:
        text += "; rejected: " + "; ".join(f"turn {t.turn} {t.tool or '?'}" for t in rejected[:3])
    return text
