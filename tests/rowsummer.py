"""A policy that reads raw rows page by page and adds them up itself: the model, not the database, aggregates."""

from __future__ import annotations

import json
from typing import Any

from rehearsal_env.scenarios import ToolCall


class RowSummer:
    """Reads the raw rows 100 at a time and adds up the last column itself, then answers the total."""

    def __init__(self, raw_sql: str, money: bool) -> None:
        self.raw, self.money, self.offset, self.total, self.done = raw_sql, money, 0, 0.0, False

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        result = json.loads(observation).get("tool_result") or {}
        if result.get("tool") == "run_sql" and result.get("status") == "ok":
            rows = result["result"]["rows"]
            self.total += sum(float(r[-1]) for r in rows)
            self.done = len(rows) < 100
        if self.done:
            answer = f"{self.total:.2f}" if self.money else str(round(self.total))
            return ToolCall("finish", {"message": "Done.", "answer": answer}).to_action()
        sql = f"SELECT * FROM ({self.raw}) AS q ORDER BY 1 LIMIT 100 OFFSET {self.offset}"
        self.offset += 100
        return ToolCall("run_sql", {"sql": sql}).to_action()
