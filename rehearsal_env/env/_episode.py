"""One episode's state machine: an action in, one tool call executed, an observation out.

This is the whole step contract, free of Gymnasium so the runner can drive it
directly. Per action, in order:

1. a change of request scheduled for this turn arrives (whatever the action);
2. parse ``{"tool": NAME, "args": {...}}``; a malformed action, an unknown tool,
   a tool the role lacks or invalid arguments is a *rejected attempt* (counted,
   not executed, answered with what was wrong);
3. a write passes the events layer (:mod:`._events`: held because the
   customer's new message arrived first, refused once by the stress layer, or
   hit by a scenario fault: refused, or carried out with an unknown outcome);
   ``retry_operation`` re-sends a journaled operation instead (:mod:`._journal`);
4. the tool runs in one committed transaction; an application refusal is status
   ``error``; a database failure, or a tool that raises anything else (a bug in the
   world's code), ends the episode *not scored* with the reason;
5. ``finish``/``give_up`` end the episode, the turn limit truncates it; then
   the checks decide the verdict and the run metrics are taken.

Observation: ``{"turn", "turns_left", "messages", "tool_result"}`` where
``messages`` are the customer messages that arrived during the step and
``tool_result`` carries ``status`` (``ok``, ``error``, ``unknown`` or
``rejected``), and for a write its ``operation_id`` (not for a held write).

The run metrics are taken at the end (:mod:`._metrics`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from ..backends import ApplicationError, Database, DatabaseError
from ..checks import CheckResult
from ..scenarios import Scenario
from ..services import duplicate_effects
from ..tools import ENDING_TOOLS, Tool, ToolContext, ToolFailed, ToolInputError
from ..verdict import Ending, Outcome, Verdict, judge
from ..worlds import World
from ..worlds._world import _unknown
from ._customer import Customer, ScriptedCustomer
from ._events import HELD_MESSAGE, REFUSE_MESSAGE, STRESS_MESSAGE, UNKNOWN_MESSAGE, Events, WriteDecision
from ._journal import Journal, Operation
from ._metrics import Counters, episode_metrics

MAX_RESULT_CHARS = 20_000
RETRY_TOOL = "retry_operation"


@dataclass(frozen=True)
class TurnRecord:
    """One step of an episode, as recorded."""

    turn: int
    """1-based turn number."""
    action: str
    """The action text as the agent sent it."""
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


class Rejected(Exception):
    """An action that is not carried out; the message tells the agent what to fix."""


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
    ) -> None:
        self.world, self.scenario, self.db = world, scenario, db
        self.tools = world.tools_for(scenario.role, offers_retry=scenario.offers_retry)
        self._all_tools = {t.name for t in world.tools} | set(self.tools)
        self.customer = customer or ScriptedCustomer(scenario)
        self.events = Events(scenario, self.customer, stress=stress)
        self.journal = Journal()
        self.turn = 0
        self.trace: list[TurnRecord] = []
        self.verdict: Verdict | None = None
        self._n = Counters()

    # -- the contract ------------------------------------------------------
    def start(self) -> str:
        """The first observation: the customer's request."""
        return self._observe([self.customer.opening()], None)

    def act(self, action: str) -> str:
        """Execute one action and return the observation (see the module docstring)."""
        if self.verdict is not None:
            raise RuntimeError("the episode has ended; call reset() to start a new one")
        self.turn += 1
        started = time.perf_counter()
        name: str | None = None
        fault: str | None = None
        ending: Ending | None = None
        self.events.start_turn(self.turn)
        try:
            name, args = self._parse(action)
            result, fault = self._dispatch(self.tools[name], args)
            ending = Ending(ENDING_TOOLS[name]) if name in ENDING_TOOLS else None
        except Rejected as exc:
            self._n.rejected += 1
            result = {"status": "rejected", "error": str(exc)}
        except DatabaseError as exc:
            self._end(Ending.ERROR, not_scored=f"the environment failed: {exc}")
            result = {"status": "error", "error": "the environment failed; this episode is not scored"}
        except Exception as exc:  # a bug in a tool or the world's code: the environment failed, not the agent
            self._end(Ending.ERROR, not_scored=f"the environment failed: tool {name!r} raised "
                                               f"{type(exc).__name__}: {exc}")
            result = {"status": "error", "error": "the environment failed; this episode is not scored"}
        if ending is not None:
            self._end(ending)
        elif self.verdict is None and self.turn >= self.scenario.turn_limit:
            self._end(Ending.TURN_LIMIT)
        observation = self._observe(self.events.drain(), {"tool": name, **result})
        self.trace.append(
            TurnRecord(self.turn, action, name, result["status"], observation, fault,
                       (time.perf_counter() - started) * 1000)
        )
        return observation

    @property
    def ended(self) -> bool:
        return self.verdict is not None

    @property
    def truncated(self) -> bool:
        return self.verdict is not None and self.verdict.ending is Ending.TURN_LIMIT

    # -- steps -------------------------------------------------------------
    def _parse(self, action: str) -> tuple[str, dict[str, Any]]:
        try:
            data = json.loads(action)
        except (TypeError, ValueError) as exc:
            raise Rejected(f'malformed action: expected JSON {{"tool": NAME, "args": {{...}}}}, '
                           f"got {action[:80]!r} ({exc})") from None
        if not isinstance(data, dict) or not isinstance(data.get("tool"), str):
            raise Rejected(
                f'malformed action: expected a JSON object with a string "tool", got {action[:80]!r}'
            )
        extra = sorted(set(data) - {"tool", "args", "usage"})
        if extra:
            raise Rejected(
                f'malformed action: unexpected key(s) {extra}; send "tool", "args" and optionally "usage"'
            )
        self._count_usage(data.get("usage"))
        name = data["tool"]
        if name not in self.tools:
            if name in self._all_tools:
                raise Rejected(
                    f"tool {name!r} is not available to role {self.scenario.role!r}; "
                    f"your tools: {', '.join(sorted(self.tools))}"
                )
            raise Rejected(_unknown("tool", name, self.tools, "this scenario"))
        try:
            args = self.tools[name].validate(data.get("args", {}))
        except ToolInputError as exc:
            raise Rejected(f"invalid arguments: {exc}") from None
        return name, args

    def _count_usage(self, usage: Any) -> None:
        """Add the tokens an agent reports with an action: ``"usage": {"tokens": N}``."""
        if usage is None:
            return
        tokens = usage.get("tokens") if isinstance(usage, dict) else None
        if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0:
            raise Rejected(f'malformed action: "usage" must be {{"tokens": N}} with N >= 0, got {usage!r}')
        self._n.tokens = (self._n.tokens or 0) + tokens

    def _dispatch(self, tool: Tool, args: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
        if tool.name == "ask_customer":
            self._n.contacts += 1
        if tool.name == RETRY_TOOL:
            if self._would_send(args["operation_id"]) and self.events.holds(self.turn):
                return {"status": "error", "error": HELD_MESSAGE}, "held"
            return self._retry(tool, args), None
        if tool.kind == "read":
            return self._run(tool, args, self._next_op()), None
        decision = self.events.before_write(tool.name, self.turn)
        if decision is WriteDecision.HOLD:
            return {"status": "error", "error": HELD_MESSAGE}, "held"
        op = self._next_op()
        if decision in (WriteDecision.STRESS_REFUSE, WriteDecision.REFUSE):
            self.journal.record(Operation(op, tool, args, "not_sent"))
            stressed = decision is WriteDecision.STRESS_REFUSE
            if stressed:
                self._n.stress += 1
            else:
                self._n.faults += 1
            refusal = {"status": "error", "retryable": True, "operation_id": op,
                       "error": STRESS_MESSAGE if stressed else REFUSE_MESSAGE}
            return refusal, "stress_refusal" if stressed else "refuse"
        result = self._run(tool, args, op)
        applied = result["status"] == "ok"
        self.journal.record(Operation(op, tool, args, "applied" if applied else "refused",
                                      result["result"] if applied else result["error"]))
        if decision is WriteDecision.UNKNOWN and applied:
            self._n.faults += 1
            self.events.after_write(self.turn, applied=True, seen_ok=False)
            return {"status": "unknown", "operation_id": op, "error": UNKNOWN_MESSAGE}, "unknown_outcome"
        self.events.after_write(self.turn, applied=applied, seen_ok=applied)
        return result, None

    def _would_send(self, operation_id: str) -> bool:
        """Whether retrying ``operation_id`` would carry it out now (it never reached the application)."""
        try:
            return self.journal.get(operation_id).state == "not_sent"
        except ToolFailed:
            return False

    def _retry(self, tool: Tool, args: dict[str, Any]) -> dict[str, Any]:
        result = self._run(tool, args, self._next_op())
        if result["status"] == "ok":
            self.events.after_write(self.turn, applied=result["result"]["applied"] == "now", seen_ok=True)
        return result

    def _run(self, tool: Tool, args: dict[str, Any], op: str) -> dict[str, Any]:
        self._n.tool_calls += 1
        ctx = self._context(op)
        try:
            with self.db.transaction():
                value = tool.fn(ctx, **args)
        except (ToolFailed, ApplicationError) as exc:
            out: dict[str, Any] = {"status": "error", "error": str(exc)}
        else:
            out = {"status": "ok", "result": value}
        if tool.kind == "write" and tool.name != RETRY_TOOL:
            out["operation_id"] = op
        return out

    def _context(self, op: str) -> ToolContext:
        return ToolContext(db=self.db, now=self.world.now, operation_id=op, ask=self.customer.answer,
                           replay=self._replay)

    def _replay(self, operation_id: str) -> Any:
        return self.journal.replay(operation_id, lambda op: op.tool.fn(self._context(op.id), **op.args))

    def _next_op(self) -> str:
        return f"op-{self.turn:04d}"

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
    def _end(self, ending: Ending, *, not_scored: str | None = None) -> None:
        checks: tuple[CheckResult, ...] = ()
        reason = not_scored
        if not_scored is None:
            try:
                outcome, checks, reason = judge(self.db, self.scenario.goal_checks, self.scenario.hard_rules)
                duplicates = duplicate_effects(self.db)
            except DatabaseError as exc:
                outcome, reason, duplicates = Outcome.NOT_SCORED, f"the checks could not run: {exc}", 0
        else:
            outcome, duplicates = Outcome.NOT_SCORED, 0
        metrics = episode_metrics(self._n, ending=ending, outcome=outcome, checks=checks,
                                  duplicates=duplicates, turns=self.turn,
                                  allowed_contacts=self.scenario.max_customer_contacts)
        self.verdict = Verdict(outcome, ending, checks, metrics, reason)
