"""Carrying out one validated tool call: the events layer, the journal, one committed transaction.

A write passes the events layer (:mod:`._events`: held because the customer's
new message arrived first, refused once by the stress layer, or hit by a
scenario fault: refused, or carried out with an unknown outcome);
``retry_operation`` re-sends a journaled operation instead (:mod:`._journal`).
The tool runs in one committed transaction; an application refusal is status
``error``. Anything else a tool raises while handling the call is *the tool's
crash* (:mod:`._crash`): the transaction is rolled back, the agent reads status
``error``, the traceback is kept in :attr:`Dispatcher.crashes` and the episode
goes on. Only a failure no agent input can cause (a lost database, a dead
sandbox, a :class:`~rehearsal_env.verdict.NotScoredError`) propagates: the
episode ends not scored (:mod:`._episode`).
"""

from __future__ import annotations

from typing import Any

from ..backends import ApplicationError, Database
from ..tools import Tool, ToolContext, ToolFailed
from ..verdict import NotScoredCause, NotScoredError, alive
from ..worlds import World
from ._crash import ToolCrash, crash_of, crash_result, infrastructure
from ._customer import Customer
from ._events import HELD_MESSAGE, REFUSE_MESSAGE, STRESS_MESSAGE, UNKNOWN_MESSAGE, Events, WriteDecision
from ._journal import Journal, Operation
from ._metrics import Counters

RETRY_TOOL = "retry_operation"


class Dispatcher:
    """Runs an episode's tool calls on its database (one per episode; it shares the episode's counters)."""

    def __init__(self, world: World, db: Database, customer: Customer, events: Events, counters: Counters) -> None:
        self.world, self.db, self.customer, self.events = world, db, customer, events
        self.journal = Journal()
        self._n = counters
        self.turn = 0
        self.crashes: list[ToolCrash] = []
        """Every tool crash of the episode, in order."""

    def dispatch(self, tool: Tool, args: dict[str, Any], turn: int) -> tuple[dict[str, Any], str | None]:
        """Carry out ``tool(**args)`` at ``turn``: (the tool result, the fault or event that hit it)."""
        self.turn = turn
        if tool.name == "ask_customer":
            self._n.contacts += 1
        if tool.name == RETRY_TOOL:
            if self._would_send(args["operation_id"]) and self.events.holds(turn):
                return {"status": "error", "error": HELD_MESSAGE}, "held"
            return self._retry(tool, args), None
        if tool.kind == "read":
            return self._run(tool, args, self._next_op()), None
        decision = self.events.before_write(tool.name, turn)
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
            self.events.after_write(turn, applied=True, seen_ok=False)
            return {"status": "unknown", "operation_id": op, "error": UNKNOWN_MESSAGE}, "unknown_outcome"
        self.events.after_write(turn, applied=applied, seen_ok=applied)
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
        except Exception as exc:  # the one boundary: anything a tool raises on an agent's call is its crash
            if infrastructure(exc, self.db, self.world):
                if isinstance(exc, NotScoredError) or not alive(self.db):
                    raise  # its own cause; or the database is gone (cause database)
                # the database answers but the sandboxed application does not: the sandbox died
                raise NotScoredError(NotScoredCause.SANDBOX,
                                     f"the sandbox's application stopped answering: {exc}") from exc
            crash = crash_of(exc, tool.name, self.turn)
            self.crashes.append(crash)
            out = crash_result(crash)
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
