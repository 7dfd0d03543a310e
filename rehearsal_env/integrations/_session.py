"""One episode driven by tool name and arguments, as a trainer's environment drives it.

A :class:`Session` is a :class:`~rehearsal_env.RehearsalEnv` whose steps are tool calls:
``call(tool, args)`` sends ``{"tool": tool, "args": args}`` to ``env.step`` and returns the
env's observation text, so whatever a framework passes (unknown tools, wrong argument
types, extra arguments) is judged by the env on the agent's side of the line: a rejected
attempt, never a crash and never ``not_scored``.

A trainer's rollout can end without an ending tool (TRL's ends when the model stops
calling tools); :meth:`Session.settle` then ends the episode with ``give_up`` and
:data:`~._prompt.STOPPED_REASON`, one more step through the same contract, so the verdict
and reward are those of the Gymnasium env given the same actions followed by that
``give_up``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..backends import Database, open_database
from ..env import RehearsalEnv
from ..rewards import score
from ..scenarios import Scenario
from ..tools import Tool
from ..verdict import Outcome, Verdict
from ..worlds import World
from ._prompt import STOPPED_REASON

ENDED = {"status": "not_run", "error": "the episode has ended; this call was not carried out"}
"""The result of a call after the episode ended (e.g. a parallel call after ``finish``)."""


def tool_sets(world: World, scenarios: tuple[Scenario, ...]) -> dict[str, dict[str, Tool]]:
    """The distinct tool sets of ``scenarios`` by name (``ROLE`` or ``ROLE+retry``), in first-seen order."""
    out: dict[str, dict[str, Tool]] = {}
    for s in scenarios:
        name = f"{s.role}+retry" if s.offers_retry else s.role
        if name not in out:
            out[name] = world.tools_for(s.role, offers_retry=s.offers_retry)
    return out


class Session:
    """Episodes of one world on one database, one at a time, driven by tool calls.

    Args:
        world: The world.
        profile: The reward profile of :attr:`reward` (None: the outcome reward, 1 / 0 / -1).
        backend: ``sqlite`` (default) or ``postgres``.
        stress: Whether the stress layer is on.
        database: An open database of ``world`` to use (and not close); else one is opened on first use.
        backend_options: Passed to the backend (PostgreSQL: ``dsn``).
    """

    def __init__(self, world: World, *, profile: str | None = "rl", backend: str = "sqlite", stress: bool = True,
                 database: Database | None = None, **backend_options: Any) -> None:
        self.world = world
        self.profile = profile
        self.backend = backend
        self.stress = stress
        self._backend_options = backend_options
        self._db = database
        self._owns_db = database is None
        self.env: RehearsalEnv | None = None
        """The env of the current episode (None before :meth:`start`)."""
        self.info: dict[str, Any] = {}
        """``info`` of the env's reset: world, scenario, split, role, policies, tools, seed."""

    def start(self, scenario: str | Scenario, seed: int = 0) -> str:
        """Reset the database and start ``scenario``; return the first observation (the customer's request)."""
        if self._db is None:
            self._db = open_database(self.world, self.backend, **self._backend_options)
        chosen = scenario if isinstance(scenario, Scenario) else self.world.scenario(scenario)
        self.env = RehearsalEnv(chosen, self.world, backend=self.backend, stress=self.stress,
                                reward_profile=self.profile, database=self._db)
        observation, self.info = self.env.reset(seed=seed)
        return observation

    def _env(self) -> RehearsalEnv:
        if self.env is None:
            raise RuntimeError("no episode: call reset() (start) before calling tools or asking for the reward")
        return self.env

    @property
    def ended(self) -> bool:
        return self.env is not None and self.env.episode.ended

    @property
    def verdict(self) -> Verdict | None:
        """The episode's verdict (None while it runs)."""
        return self.env.episode.verdict if self.env is not None else None

    def call(self, tool: str, args: Mapping[str, Any] | Any, tokens: int | None = None) -> str:
        """One env step calling ``tool`` with ``args``: the observation text (JSON, ASCII).

        ``tokens``: the model's tokens to report with this action (``"usage"``; None: none, so the episode's
        efficiency is unmeasured, the external-mode caveat). After the episode ended, nothing runs and the
        answer is :data:`ENDED` (as JSON)."""
        env = self._env()
        if env.episode.ended:
            return json.dumps({"tool": tool, **ENDED}, sort_keys=True)
        body: dict[str, Any] = {"tool": tool, "args": dict(args) if isinstance(args, Mapping) else args}
        if tokens is not None:
            body["usage"] = {"tokens": tokens}
        action = json.dumps(body, default=str)
        observation, _, _, _, _ = env.step(action)
        return observation

    def settle(self) -> Verdict:
        """The verdict, ending a running episode first with ``give_up`` (:data:`~._prompt.STOPPED_REASON`)."""
        env = self._env()
        if not env.episode.ended:
            self.call("give_up", {"reason": STOPPED_REASON})
        verdict = env.episode.verdict
        if verdict is None:  # give_up is a built-in of every role and always ends the episode
            raise RuntimeError(f"give_up did not end scenario {env.scenario.id}; this is a bug of rehearsal_env")
        return verdict

    @property
    def reward(self) -> float | None:
        """The ended episode's reward under :attr:`profile` (None: not scored, or still running)."""
        verdict = self.verdict
        if verdict is None or verdict.outcome is Outcome.NOT_SCORED:
            return None
        if self.profile is None:
            return verdict.outcome_reward
        return score(self.profile, self._env().episode, verdict)

    def close(self) -> None:
        """Close the database this session opened."""
        if self._db is not None and self._owns_db:
            self._db.close()
        self._db = None
        self.env = None
