"""One episode's state machine: an action in, one tool call executed, an observation out.

This is the whole step contract, free of Gymnasium so the runner can drive it
directly. Per action, in order:

1. a change of request scheduled for this turn arrives (whatever the action);
2. the action is parsed and validated on the agent's side of the line
   (:mod:`._action`): anything malformed (not text, too long, too deep, not valid
   Unicode, wrong ``usage``), an unknown tool, a tool the role lacks or invalid
   arguments is a *rejected attempt* (counted, not executed, answered with what
   was wrong); the episode goes on;
3. the call is carried out (:mod:`._dispatch`: the events layer, the journal,
   one committed transaction); an application refusal is status ``error``, and
   so is anything the tool raises while handling the call: a *tool crash*
   (:mod:`._crash`), rolled back, returned to the agent as ``error``, its
   traceback kept (:attr:`Episode.tool_crashes`); the episode goes on;
4. a failure no agent input can cause ends the episode *not scored*, with its
   cause (:class:`~rehearsal_env.verdict.NotScoredCause`): a lost database is
   ``database``, a :class:`~rehearsal_env.verdict.NotScoredError` (a sandbox that
   died, a provider) names its own cause, the world's code failing outside any
   tool call (its customer script) is ``world``;
5. ``finish``/``give_up`` end the episode, the turn limit truncates it; then
   the checks decide the verdict and the run metrics are taken (:mod:`._metrics`).

Two more ways in, for whoever drives the agent (the runner):
:meth:`Episode.policy_failed` (the policy raised instead of acting: the agent's
bug, a rejected attempt that takes a turn) and :meth:`Episode.abort` (a part
other than the agent failed, e.g. the model provider: not scored with that cause).

Observation: ``{"turn", "turns_left", "messages", "tool_result"}`` where
``messages`` are the customer messages that arrived during the step and
``tool_result`` carries ``status`` (``ok``, ``error``, ``unknown`` or
``rejected``), and for a write its ``operation_id`` (not for a held write).
"""

from __future__ import annotations

import difflib
import json
import time
from dataclasses import dataclass
from typing import Any

from ..backends import Database, DatabaseError
from ..checks import CheckResult
from ..scenarios import Scenario
from ..services import duplicate_effects
from ..tools import ENDING_TOOLS, ToolInputError
from ..verdict import Ending, NotScoredCause, NotScoredError, Outcome, Snapshot, Verdict, judge
from ..worlds import World
from ._action import Rejected, action_text, parse_action, record_text
from ._crash import ToolCrash
from ._customer import Customer, ScriptedCustomer
from ._dispatch import Dispatcher
from ._events import Events
from ._lineage import Lineage
from ._metrics import Counters, episode_metrics

MAX_RESULT_CHARS = 20_000
FAILED = {"status": "error", "error": "the environment failed; this episode is not scored"}


@dataclass(frozen=True)
class TurnRecord:
    """One step of an episode, as recorded."""

    turn: int
    """1-based turn number."""
    action: str
    """The action text as the agent sent it (lone surrogates escaped, cut past 64 Ki characters; a
    non-text action as its type and repr; see :func:`~._action.action_text`)."""
    tool: str | None
    """The tool called (None when the action was malformed)."""
    status: str
    """``ok``, ``error``, ``unknown`` or ``rejected``."""
    observation: str
    """The observation returned."""
    fault: str | None
    """What the events layer did to this call: ``held``, ``stress_refusal``, ``refuse`` or
    ``unknown_outcome`` (None: nothing)."""
    latency_ms: float
    """Wall time to execute the step (diagnostic only; never part of an observation)."""
    crash: ToolCrash | None = None
    """The tool's crash on this call (its traceback), or None."""


def failure(exc: BaseException) -> tuple[NotScoredCause, str]:
    """The cause and reason of an exception raised by a part other than the agent."""
    if isinstance(exc, NotScoredError):
        return exc.cause, f"the environment failed ({exc.cause.value}): {exc}"
    if isinstance(exc, DatabaseError):
        return NotScoredCause.DATABASE, f"the database failed: {exc}"
    return NotScoredCause.WORLD, f"the world's code raised {type(exc).__name__}: {exc}"


class Episode:
    """One attempt at one scenario on one database (already reset)."""

    def __init__(
        self,
        world: World,
        scenario: Scenario,
        db: Database,
        *,
        stress: bool = True,
        customer: Customer | None = None,
        snapshot: Snapshot | None = None,
    ) -> None:
        self.world, self.scenario, self.db = world, scenario, db
        self._snapshot = snapshot
        self.tools = world.tools_for(scenario.role, offers_retry=scenario.offers_retry)
        self._all_tools = {t.name for t in world.tools} | set(self.tools)
        self.customer = customer or ScriptedCustomer(scenario)
        self.events = Events(scenario, self.customer, stress=stress)
        self._n = Counters()
        self._calls = Dispatcher(world, db, self.customer, self.events, self._n)
        self.journal = self._calls.journal
        self.turn = 0
        self.trace: list[TurnRecord] = []
        self.turn_rewards: list[float] = []
        """Each step's reward under a profile that pays one at every turn (the env appends them); empty otherwise."""
        self.verdict: Verdict | None = None
        self.id: str | None = None
        """The episode's id: given when it is first forked or checkpointed (or by whoever runs it); None until then."""
        self.lineage: Lineage | None = None
        """The episode this one was forked or restored from, and at which turn (None: it began at ``reset``)."""

    # -- the contract ------------------------------------------------------
    def start(self) -> str:
        """The first observation: the customer's request."""
        return self._observe([self.customer.opening()], None)

    def act(self, action: object) -> str:
        """Execute one action and return the observation (see the module docstring); never raises for
        anything the agent sends."""
        self._begin_turn()
        started = time.perf_counter()
        name: str | None = None
        fault: str | None = None
        ending: Ending | None = None
        crashed = len(self._calls.crashes)
        try:
            self.events.start_turn(self.turn)
            name, args = self._parse(action)
            result, fault = self._calls.dispatch(self.tools[name], args, self.turn)
            ending = Ending(ENDING_TOOLS[name]) if name in ENDING_TOOLS else None
        except Rejected as exc:
            self._n.rejected += 1
            result = {"status": "rejected", "error": str(exc)}
        except Exception as exc:  # what passed the tool-crash boundary: a failure no agent input can cause
            cause, reason = failure(exc)
            self._end(Ending.ERROR, not_scored=(cause, f"tool {name!r}: {reason}" if name else reason))
            result = dict(FAILED)
        crash = self._calls.crashes[-1] if len(self._calls.crashes) > crashed else None
        return self._finish_turn(action_text(action), name, result, fault, ending, started, crash)

    def policy_failed(self, error: BaseException) -> str:
        """The policy raised instead of acting (the agent's bug): a rejected attempt that takes a turn."""
        self._begin_turn()
        started = time.perf_counter()
        self._n.rejected += 1
        message = record_text(f"{type(error).__name__}: {error}", 2000)
        result = {"status": "rejected", "error": f"the agent raised instead of acting ({message}); "
                                                 "nothing was carried out"}
        return self._finish_turn(f"<the policy raised {message}>", None, result, None, None, started)

    def abort(self, cause: NotScoredCause, reason: str) -> None:
        """End the episode now, not scored, because ``cause`` failed (never for the agent's own doing)."""
        if self.verdict is None:
            self._end(Ending.ERROR, not_scored=(NotScoredCause(cause), record_text(reason, 2000)))

    @property
    def tool_crashes(self) -> tuple[ToolCrash, ...]:
        """Every exception a tool raised while handling the agent's calls (returned to it as errors)."""
        return tuple(self._calls.crashes)

    @property
    def ended(self) -> bool:
        return self.verdict is not None

    @property
    def truncated(self) -> bool:
        return self.verdict is not None and self.verdict.ending is Ending.TURN_LIMIT

    # -- steps -------------------------------------------------------------
    def _begin_turn(self) -> None:
        if self.verdict is not None:
            raise RuntimeError("the episode has ended; call reset() to start a new one")
        self.turn += 1

    def _finish_turn(self, action: str, name: str | None, result: dict[str, Any], fault: str | None,
                     ending: Ending | None, started: float, crash: ToolCrash | None = None) -> str:
        if ending is not None:
            self._end(ending)
        elif self.verdict is None and self.turn >= self.scenario.turn_limit:
            self._end(Ending.TURN_LIMIT)
        try:
            messages = self.events.drain()
        except Exception as exc:  # the world's customer script failed
            messages = []
            if self.verdict is None:
                self._end(Ending.ERROR, not_scored=failure(exc))
        observation = self._observe(messages, {"tool": name, **result})
        self.trace.append(TurnRecord(self.turn, action, name, result["status"], observation, fault,
                                     (time.perf_counter() - started) * 1000, crash))
        return observation

    def _parse(self, action: object) -> tuple[str, dict[str, Any]]:
        parsed = parse_action(action)
        if parsed.tokens is not None:
            self._n.tokens = (self._n.tokens or 0) + parsed.tokens
        if parsed.input_tokens is not None and parsed.output_tokens is not None:
            self._n.input_tokens = (self._n.input_tokens or 0) + parsed.input_tokens
            self._n.output_tokens = (self._n.output_tokens or 0) + parsed.output_tokens
        name = parsed.tool
        if not name:  # e.g. a model agent's stand-in for a reply it dropped (cut off, empty): no call was made
            dropped = parsed.args.get("dropped_reply") if isinstance(parsed.args, dict) else None
            kind = dropped.get("kind") if isinstance(dropped, dict) else None
            why = (f"no tool was called: the agent dropped its model's reply ({record_text(str(kind), 40)})"
                   if kind else "no tool was called: the action names none")
            raise Rejected(f"{why}; nothing ran. Your tools: {', '.join(sorted(self.tools))}")
        if name not in self.tools:
            shown = record_text(name, 80)
            if name in self._all_tools:
                raise Rejected(f"tool {shown!r} is not available to role {self.scenario.role!r}; "
                               f"your tools: {', '.join(sorted(self.tools))}")
            close = difflib.get_close_matches(name, list(self.tools), n=3)
            hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
            raise Rejected(f"this scenario has no tool {shown!r}.{hint} Your tools: {', '.join(sorted(self.tools))}")
        try:
            args = self.tools[name].validate(parsed.args)
        except ToolInputError as exc:
            raise Rejected(f"invalid arguments: {record_text(str(exc), 2000)}") from None
        return name, args

    def _observe(self, messages: list[str], tool_result: dict[str, Any] | None) -> str:
        obs = {
            "turn": self.turn,
            "turns_left": self.scenario.turn_limit - self.turn,
            "messages": list(messages),
            "tool_result": tool_result,
        }
        text = json.dumps(obs, sort_keys=True, default=str)
        if len(text) > MAX_RESULT_CHARS and tool_result is not None:
            cut = json.dumps(tool_result, sort_keys=True, default=str)[: MAX_RESULT_CHARS // 2]
            obs["tool_result"] = {"tool": tool_result.get("tool"), "status": tool_result.get("status"),
                                  "truncated": True, "partial": cut,
                                  "note": "the result was too long and was cut; narrow the query"}
            text = json.dumps(obs, sort_keys=True, default=str)
        return text

    # -- the end -------------------------------------------------------------
    def _end(self, ending: Ending, *, not_scored: tuple[NotScoredCause, str] | None = None) -> None:
        checks: tuple[CheckResult, ...] = ()
        cause: NotScoredCause | None = None
        reason: str | None = None
        duplicates = 0
        if not_scored is None:
            try:
                outcome, checks, reason = judge(self.db, self.scenario.goal_checks, self.scenario.hard_rules,
                                                  snapshot=self._snapshot)
                duplicates = duplicate_effects(self.db)
                cause = NotScoredCause.WORLD if outcome is Outcome.NOT_SCORED else None
            except Exception as exc:  # the checks could not run: the database (or the world's code) failed
                cause, reason = failure(exc)
                outcome, checks, duplicates, reason = Outcome.NOT_SCORED, (), 0, f"the checks could not run: {reason}"
        else:
            outcome, (cause, reason) = Outcome.NOT_SCORED, not_scored
        metrics = episode_metrics(self._n, ending=ending, outcome=outcome, checks=checks,
                                  duplicates=duplicates, turns=self.turn,
                                  allowed_contacts=self.scenario.max_customer_contacts)
        self.verdict = Verdict(outcome, ending, checks, metrics, reason, cause)
