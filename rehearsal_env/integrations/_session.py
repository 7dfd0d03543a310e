"""One episode driven by tool name and arguments, as a trainer's environment drives it, hosted on the episodes floor.

A :class:`Session` is a one-place :class:`~rehearsal_env.episodes.SessionTable` (the same table ``rehearsal serve``
and ``rehearsal mcp`` host episodes on) whose steps are tool calls: ``call(tool, args)`` sends
``{"tool": tool, "args": args}`` as one step and returns the env's observation text, so whatever a framework passes
(unknown tools, wrong argument types, extra arguments) is judged by the env on the agent's side of the line: a
rejected attempt, never a crash and never ``not_scored``. Its database comes from the floor's pool, always in the
world's snapshot state, and every episode that ends (however it ends) is recorded, sealed, into a run directory
``OUT/<world>-<profile>/`` that ``measure.py`` and ``rehearsal readiness`` read like any other (``out=None`` records
nothing, for a caller that records elsewhere).

A trainer's rollout can end without an ending tool (TRL's ends when the model stops calling tools);
:meth:`Session.settle` then ends the episode with ``give_up`` and :data:`~._prompt.STOPPED_REASON`, one more step
through the same contract, so the verdict and reward are those of the Gymnasium env given the same actions followed
by that ``give_up``. Starting another episode before one ended, closing the session, or the process exiting with a
session never closed ends the open one for its agent (``give_up``) and records it: leaving an episode open never
keeps it out of the numbers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..env import RehearsalEnv
from ..episodes import LOCAL, Principal, Scope, SessionTable, ending_view
from ..episodes import Session as Hosted
from ..scenarios import Scenario
from ..tools import Tool
from ..verdict import Verdict
from ..worlds import World
from ._prompt import STOPPED_REASON
from ._recording import closed, on_exit, recorder

ENDED = {"status": "not_run", "error": "the episode has ended; this call was not carried out"}
"""The result of a call after the episode ended (e.g. a parallel call after ``finish``)."""
TRAINER = Principal(LOCAL, Scope.BUILD_AND_EVALUATE)
"""Who plays a trainer's episodes: the local process (``key_id`` ``local`` on the records)."""
_NEVER = 10.0 ** 9
"""A trainer's episode is never reaped for idleness: the trainer decides when it ends."""


def tool_sets(world: World, scenarios: tuple[Scenario, ...]) -> dict[str, dict[str, Tool]]:
    """The distinct tool sets of ``scenarios`` by name (``ROLE`` or ``ROLE+retry``), in first-seen order."""
    out: dict[str, dict[str, Tool]] = {}
    for s in scenarios:
        name = f"{s.role}+retry" if s.offers_retry else s.role
        if name not in out:
            out[name] = world.tools_for(s.role, offers_retry=s.offers_retry)
    return out


class Session:
    """Episodes of one world, one at a time, driven by tool calls and recorded.

    Args:
        world: The world.
        profile: The reward profile of :attr:`reward` (None: the outcome reward, 1 / 0 / -1).
        backend: ``sqlite`` (default) or ``postgres``.
        stress: Whether the stress layer is on.
        out: Where the episodes are recorded (``OUT/<world>-<profile>/``); None records nothing.
        agent: The agent's name on the records (e.g. the trainer's run name).
        agent_version: The agent's version on the records (e.g. the checkpoint being trained).
        backend_options: Passed to the backend (PostgreSQL: ``dsn``).
    """

    def __init__(self, world: World, *, profile: str | None = "rl", backend: str = "sqlite", stress: bool = True,
                 out: str | Path | None = None, agent: str = "trainer", agent_version: str = "unversioned",
                 **backend_options: Any) -> None:
        self.world, self.profile, self.backend, self.stress = world, profile, backend, stress
        self.agent, self.agent_version = agent, agent_version
        self.out = Path(out) if out is not None else None
        self._table = SessionTable(backend=backend, backend_options=backend_options, stress=stress, max_sessions=1,
                                   idle_timeout=_NEVER, spare_databases=1,
                                   recorder=recorder(self.out, backend=backend, stress=stress) if self.out else None)
        self._hosted: Hosted | None = None
        self.env: RehearsalEnv | None = None
        """The env of the current episode (None before :meth:`start`); it stays readable after the episode ended."""
        self.last_reward = 0.0
        """The last step's reward as the floor shows it: a shaped profile's per-turn reward (``rl_turns``; 0 on a
        holdout episode's turns), the end of the episode's on its last step."""

    @property
    def shaped(self) -> bool:
        """Whether the profile pays a reward at every turn (``rl_turns``)."""
        return self.env is not None and self.env.shaped

    @property
    def info(self) -> dict[str, Any]:
        """``info`` of the episode's reset: world, scenario, split, role, policies, tools, seed."""
        return self._hosted.opening_info if self._hosted is not None else {}

    @property
    def episode_id(self) -> str | None:
        """The current episode's id (its record's ``episode_id``)."""
        return self._hosted.id if self._hosted is not None else None

    def start(self, scenario: str | Scenario, seed: int = 0) -> str:
        """Start ``scenario`` on a database in the snapshot state; return the first observation (the customer's
        request). An episode still open is ended first (``give_up``) and recorded."""
        chosen = scenario if isinstance(scenario, Scenario) else self.world.scenario(scenario)
        self.end_open("replaced")
        if self._table.recorder is not None:  # held until closed: at exit an episode still open is recorded
            on_exit(self)
        self._hosted = self._table.create(TRAINER, self.world, chosen, seed=seed, profile=self.profile,
                                          agent=self.agent, agent_version=self.agent_version)
        self.env, self.last_reward = self._hosted.env, 0.0
        return self._hosted.opening

    def end_open(self, by: str) -> None:
        """End the open episode for its agent (``give_up``, with the reason ``by`` names in
        :data:`~rehearsal_env.episodes.ENDINGS`), recorded; nothing when none is open."""
        if self._hosted is not None and self._hosted.env is not None:
            self._table.end(self._hosted, by)

    def _session(self) -> Hosted:
        if self._hosted is None:
            raise RuntimeError("no episode: call reset() (start) before calling tools or asking for the reward")
        return self._hosted

    @property
    def ended(self) -> bool:
        return self._hosted is not None and self._hosted.env is None

    @property
    def verdict(self) -> Verdict | None:
        """The episode's verdict (None while it runs)."""
        return self._hosted.verdict if self._hosted is not None else None

    def call(self, tool: str, args: Mapping[str, Any] | Any, tokens: int | None = None) -> str:
        """One env step calling ``tool`` with ``args``: the observation text (JSON, ASCII).

        ``tokens``: the model's tokens to report with this action (``"usage"``; None: none, so the episode's
        efficiency is unmeasured, the external-mode caveat). After the episode ended, nothing runs and the
        answer is :data:`ENDED` (as JSON)."""
        session = self._session()
        if session.env is None:
            return json.dumps({"tool": tool, **ENDED}, sort_keys=True)
        body: dict[str, Any] = {"tool": tool, "args": dict(args) if isinstance(args, Mapping) else args}
        if tokens is not None:
            body["usage"] = {"tokens": tokens}
        answer = self._table.step(session, session.steps, json.dumps(body, default=str))
        self.last_reward = float(answer["reward"])
        return str(answer["observation"])

    def settle(self) -> Verdict:
        """The verdict, ending a running episode first with ``give_up`` (:data:`~._prompt.STOPPED_REASON`)."""
        session = self._session()
        if session.env is not None:
            self.call("give_up", {"reason": STOPPED_REASON})
        if session.verdict is None:  # give_up is a built-in of every role and always ends the episode
            raise RuntimeError(f"give_up did not end scenario {session.scenario.id}; this is a bug of rehearsal_env")
        return session.verdict

    @property
    def reward(self) -> float | None:
        """The ended episode's reward under :attr:`profile` (None: not scored, or still running)."""
        return self._hosted.reward if self._hosted is not None else None

    def ending(self, who: Principal = TRAINER) -> dict[str, Any]:
        """The ending as ``who`` may read it (:func:`~rehearsal_env.episodes.ending_view`; a holdout episode's
        outcome, ending and reward only): what an adapter that answers an outside caller shows."""
        session = self._session()
        return ending_view(session, who)

    def close(self) -> None:
        """End an open episode (``give_up``, recorded), write the records still buffered, close the databases."""
        self.end_open("closed")  # the trainer's doing (the table's own close would say the server stopped)
        self._table.close()
        if self._table.recorder is not None:
            self._table.recorder.flush()
        closed(self)
