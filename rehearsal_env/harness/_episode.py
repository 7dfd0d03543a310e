"""One episode played by a harness's tool calls, on the served-episode machinery.

A :class:`HostedEpisode` is a session of :class:`~rehearsal_env.episodes.SessionTable`: the same
reset, step contract, reaping and recording as an episode served over the HTTP API (run
directory, records, whatever the served path stamps on them). A tool call becomes the action
``{"tool": NAME, "args": ARGS}``, one env step; the env judges it (a tool the role lacks, or
arguments that do not fit the schema, is a rejected attempt, and the episode goes on).

With a :class:`~rehearsal_env.gateway.Ledger`, every step also reports the tokens of the harness's model calls
that went through the gateway since the last step (``"usage": {"tokens": N}``), so the episode's
tokens are measured and its efficiency scored. An episode that ends without the agent ending it
(the harness disconnected, or sent nothing for the idle timeout) is settled as ``gave_up``, unless
the model provider's failure is the last thing the gateway saw: then it is ``not_scored`` with cause
``provider``, as for the ``openai`` agent.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ..episodes import Principal, SessionTable, ending_view
from ..gateway import Ledger, check_link
from ..scenarios import Scenario
from ..verdict import NotScoredCause
from ..worlds import World

DISCONNECTED = "the harness disconnected before the episode ended"
"""The ``give_up`` reason of an episode whose harness closed its connection mid-episode."""


@dataclass(frozen=True)
class EpisodeSpec:
    """Which episode a harness plays."""

    world: World
    """The world."""
    scenario: Scenario
    """The scenario."""
    seed: int = 0
    """The reset seed."""
    reward_profile: str | None = None
    """The reward profile (None: the outcome reward)."""
    agent: str = "mcp-harness"
    """The agent's name on the record."""
    agent_version: str = "unversioned"
    """The agent's version on the record."""


class HostedEpisode:
    """One live episode of ``table`` started for ``who``; calls are serialized by the session's lock."""

    def __init__(self, table: SessionTable, who: Principal, spec: EpisodeSpec, *, ledger: Ledger | None = None,
                 link: str | None = None) -> None:
        self.table, self.who, self.spec, self.ledger = table, who, spec, ledger
        self.session = table.create(who, spec.world, spec.scenario, seed=spec.seed, profile=spec.reward_profile,
                                    agent=spec.agent, agent_version=spec.agent_version)
        self.link = check_link(link) if link is not None else f"link_{secrets.token_urlsafe(24)}"
        """The gateway key of this episode's model calls. The default is a fresh 192-bit secret shown only to the
        episode's own client (its opening), never the episode id, which records and other keys' reads show: a call
        logged under a link must come from whoever was handed it. A chosen link (``--link``) is as secret as the
        operator keeps it."""
        self.counted = 0
        """Gateway calls already reported with a step."""
        self.unmeasured = 0
        """Gateway calls that answered without usage."""
        self.calls_per_turn: list[int] = []
        """How many gateway calls each step reported, in step order (kept beside the records)."""
        self._lock = threading.Lock()

    @property
    def id(self) -> str:
        return self.session.id

    @property
    def ended(self) -> bool:
        return self.session.env is None

    def opening(self) -> dict[str, Any]:
        """The first observation, the role, the policies and how to reach the gateway for this episode."""
        return {"episode_id": self.id, "world": self.spec.world.name, "scenario": self.spec.scenario.id,
                "split": self.spec.scenario.split, "role": self.spec.scenario.role, "link": self.link,
                "observation": json.loads(self.session.opening),
                "policies": [p.text for p in self.spec.world.policies]}

    def call(self, tool: str, args: Any) -> dict[str, Any]:
        """One env step calling ``tool`` with ``args``; the step's result (the verdict once it ended)."""
        with self._lock:
            if self.session.env is None:
                return {"status": "not_run", "episode_id": self.id, "ended_by": self.session.ended_by,
                        "error": "the episode has ended; this call was not carried out", **self.ending()}
            body: dict[str, Any] = {"tool": tool, "args": args}
            if self.ledger is not None:
                tally = self.ledger.tally(self.link, self.counted)
                self.counted, self.unmeasured = tally.counted, self.unmeasured + tally.unmeasured
                body["usage"] = {"tokens": tally.tokens}
            action = json.dumps(body, default=str)
            result = self.table.step(self.session, self.session.steps, action)
            self._reported()
            out = {"episode_id": self.id, "status": result["status"], "turn": result["turn"],
                   "observation": json.loads(result["observation"]), "ended": self.session.env is None,
                   "caveats": result["caveats"]}
            if self.session.env is None:
                out.update(self.ending())
            return out

    def settle(self, by: str) -> dict[str, Any]:
        """End a running episode the agent did not end (``disconnect`` or ``idle_timeout``): ``gave_up`` (its
        checks still decide), or not scored when the model provider's failure was the last thing the gateway saw.
        The give_up step reports the gateway calls not yet reported. Only this episode's calls count: the gateway
        logs a stream the harness hung up as the harness's (never a provider failure), and with no step taken the
        calls logged under the link before the episode began are not its client's (a reused or borrowed link).
        Returns the ending."""
        with self._lock:
            if self.session.env is not None:
                since = None
                if self.session.steps == 0:  # no step yet: the session's clock still reads when the episode began
                    since = datetime.now(UTC) - timedelta(seconds=time.monotonic() - self.session.last_step)
                tally = self.ledger.tally(self.link, self.counted, since=since) if self.ledger is not None else None
                if tally is not None and tally.provider_failed is not None:
                    failed = tally.provider_failed
                    self.table.abort(self.session, NotScoredCause.PROVIDER,
                                     f"the model provider failed the harness's last model call "
                                     f"({failed.get('error') or failed.get('http_status')}) and the harness "
                                     f"stopped; the gateway logged it under link {self.link}")
                else:
                    reason = DISCONNECTED if by == "disconnect" else (
                        f"the harness sent nothing for {self.table.idle_timeout:g} s; the server ended the episode")
                    body: dict[str, Any] = {"tool": "give_up", "args": {"reason": reason}}
                    if tally is not None:
                        self.counted, self.unmeasured = tally.counted, self.unmeasured + tally.unmeasured
                        body["usage"] = {"tokens": tally.tokens}
                    self.table.step(self.session, self.session.steps, json.dumps(body))
                    self._reported()
                self.session.ended_by = by if tally is None or tally.provider_failed is None else "provider"
            return self.ending()

    def _reported(self) -> None:
        """Note the calls the step just taken reported (those a failed step tallied go with the next one)."""
        if self.ledger is not None:
            self.calls_per_turn.append(self.counted - sum(self.calls_per_turn))

    def ending(self) -> dict[str, Any]:
        s = self.session
        return {"ended_by": s.ended_by, **ending_view(s, self.who),
                "run_dir": str(s.run_dir.path) if s.run_dir else None, "caveats": s.caveats,
                "gateway": None if self.ledger is None else {"link": self.link, "calls": self.counted,
                                                            "unmeasured_calls": self.unmeasured}}
