"""The journal of write operations behind ``retry_operation``.

Every write the agent sends that is not held gets an operation id
(``op-NNNN``, from its turn) and a journal entry. The operation id is also the
idempotency key the outside-service emulators see, so the same operation can
never reach a service twice as two requests.

``retry_operation(operation_id)`` re-sends an operation safely, by its state:

``applied``
    The application carried it out (the agent may have seen ``ok`` or
    ``unknown``): nothing is sent again; the original result comes back.
``refused``
    The application refused it (bad arguments, wrong state): nothing is sent
    again; the same refusal comes back as an error, since the same request
    would get the same answer. Fix the arguments and send a new call.
``not_sent``
    It never reached the application (the stress layer's refusal or a
    ``refuse`` fault): it is sent now, once, under its original id, and becomes
    ``applied`` or ``refused``; later retries return that.

A retry is not a new write: it is never stress-refused or faulted, and it does
not count as a call of the tool for fault numbering. A retry of a ``not_sent``
operation is held, like a first write, when the customer's change of request
arrives in the same step (see :mod:`._events`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from ..backends import ApplicationError
from ..tools import Tool, ToolFailed

OpState = Literal["not_sent", "applied", "refused"]


@dataclass(frozen=True)
class Operation:
    """One write the agent sent, as the journal keeps it."""

    id: str
    """The operation id the agent was given (also the idempotency key)."""
    tool: Tool
    """The write tool."""
    args: Mapping[str, Any]
    """The validated arguments."""
    state: OpState
    """``not_sent``, ``applied`` or ``refused`` (see the module docstring)."""
    result: Any = None
    """The application's result when applied; its error message when refused."""


class Journal:
    """The operations of one episode, by id."""

    def __init__(self) -> None:
        self._ops: dict[str, Operation] = {}

    def record(self, op: Operation) -> None:
        """Add or update an operation."""
        self._ops[op.id] = op

    def operations(self) -> list[Operation]:
        """Every operation, in the order they were first recorded."""
        return list(self._ops.values())

    def get(self, op_id: str) -> Operation:
        """The operation ``op_id``; a :class:`ToolFailed` naming the known ids otherwise."""
        if op_id not in self._ops:
            known = ", ".join(self._ops) or "none yet"
            raise ToolFailed(f"no operation {op_id!r} in this episode; retry_operation takes the "
                             f"operation_id of an earlier change (operations so far: {known})")
        return self._ops[op_id]

    def replay(self, op_id: str, send: Callable[[Operation], Any]) -> dict[str, Any]:
        """Re-send ``op_id`` safely; ``send(op)`` runs the tool under the operation's own id.

        Returns ``{"operation_id", "tool", "applied": "earlier"|"now", "result"}``.

        Raises:
            ToolFailed: an unknown id, or an operation the application refused (then or now).
        """
        op = self.get(op_id)
        if op.state == "refused":
            raise ToolFailed(f"operation {op_id} ({op.tool.name}) was refused by the application and nothing "
                             f"was changed: {op.result}. Re-sending it would get the same answer; fix the "
                             "arguments and send a new call instead")
        applied = "earlier"
        if op.state == "not_sent":
            try:
                value = send(op)
            except (ToolFailed, ApplicationError) as exc:
                self.record(replace(op, state="refused", result=str(exc)))
                raise ToolFailed(str(exc)) from None
            op = replace(op, state="applied", result=value)
            self.record(op)
            applied = "now"
        return {"operation_id": op_id, "tool": op.tool.name, "applied": applied, "result": op.result}
