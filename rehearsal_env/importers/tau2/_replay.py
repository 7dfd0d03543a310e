"""Replay a list of tool calls straight on a world's database and diff the end state against the snapshot."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...backends import ApplicationError, Database, changes
from ...scenarios import ToolCall
from ...tools import Tool, ToolContext, ToolFailed

Diff = dict[str, dict[str, list[tuple[Any, ...]]]]


@dataclass(frozen=True)
class Replayed:
    """What replaying some calls did."""

    diff: Diff
    """Rows inserted, updated and deleted against the snapshot (logs and framework tables left out)."""
    applied: tuple[int, ...]
    """Indexes of the write calls that succeeded."""
    errors: tuple[str, ...]
    """``"i tool: message"`` for each write call the application refused."""
    touched: tuple[tuple[str, int], ...] = ()
    """Every (table, row id) a write changed on the way, even when a later write changed it back."""
    failed_reads: tuple[int, ...] = ()
    """Indexes of the read calls the application refused (only when the replay ran the reads)."""

    @property
    def key(self) -> str:
        """The end state in one text: equal keys, equal end states."""
        return json.dumps(self.diff, sort_keys=True, default=str)


def _no_customer(question: str) -> str:
    return ""


def _no_replay(operation_id: str) -> Any:
    raise ToolFailed("no operations to retry in a replay")


def replay(db: Database, tools: Mapping[str, Tool], calls: Sequence[ToolCall], snapshot: Mapping[str, Any],
           now: str, *, reads: bool = False) -> Replayed:
    """Reset ``db``, run the write calls of ``calls`` (and the reads, with ``reads``) and diff the end state."""
    db.reset()
    applied, errors, failed_reads = [], [], []
    for i, call in enumerate(calls):
        tool = tools.get(call.tool)
        if tool is None or (tool.kind != "write" and not reads):
            continue
        ctx = ToolContext(db=db, now=now, operation_id=f"replay-{i}", ask=_no_customer, replay=_no_replay)
        try:
            with db.transaction():
                tool.fn(ctx, **dict(call.args))
        except (ToolFailed, ApplicationError) as exc:
            if tool.kind == "write":
                errors.append(f"{i} {call.tool}: {exc}")
            else:
                failed_reads.append(i)
        else:
            if tool.kind == "write":
                applied.append(i)
    diff = {t: part for t, part in changes(db, snapshot).items() if t not in ("row_changes", "final_answers")}
    touched = tuple(sorted({(t, int(i)) for t, i in db.query("SELECT tbl, row_id FROM row_changes")}))
    return Replayed(diff, tuple(applied), tuple(errors), touched, tuple(failed_reads))
