"""The gateway's ledger: every model call of an episode, one JSON line each, in ``LEDGER/<link>.jsonl``.

The gateway appends a line per call (usage, latency, token ids and logprobs where the provider
returned them, or the provider's failure); the episode's MCP server reads the lines it has not yet
counted before each step and reports their tokens with that step's action. The two may be separate
processes: lines are appended under a file lock and read whole.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from filelock import FileLock

LINK = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
"""What a link (the key that ties a harness's model calls to its episode) may look like."""
PROVIDER_FAILED = "provider_failed"
"""A call's status when the provider failed (timeout, broken connection, 408, 409, 429, 5xx)."""
REFUSED = "refused"
"""A call's status when the provider refused the request itself (4xx other than 408, 409, 429)."""
OK = "ok"
"""A call's status when the provider answered."""
HARNESS_CLOSED = "harness_closed"
"""A call's status when the harness hung up a stream the provider was still sending: the harness's doing, never the
provider's failure (its tokens are counted where the provider sent usage before the hang-up, else it is unmeasured)."""


def check_link(link: str) -> str:
    """``link`` if it is a valid link, else ValueError saying what one looks like."""
    if not isinstance(link, str) or not LINK.match(link):
        raise ValueError(f"expected a link of 1 to 128 letters, digits, '_', '-' or '.', got {str(link)[:80]!r}")
    return link


@dataclass(frozen=True)
class Tally:
    """What a step reports from the calls not yet counted."""

    tokens: int
    """Total tokens of the newly counted calls that answered."""
    counted: int
    """Calls counted so far (the next step starts after these)."""
    unmeasured: int
    """Newly counted calls that answered without usage (their tokens are unknown)."""
    provider_failed: dict[str, Any] | None
    """The last newly counted call if the provider failed it and no call answered or was hung up by the harness
    after it."""


def _started_since(call: dict[str, Any], since: datetime) -> bool:
    """Whether ``call`` started at or after ``since`` (to the millisecond its line holds; a line without a readable
    time did not)."""
    try:
        started = datetime.fromisoformat(str(call.get("started_at")))
    except ValueError:
        return False
    if started.tzinfo is None:
        return False
    return started >= since.replace(microsecond=since.microsecond // 1000 * 1000)


class Ledger:
    """The folder of per-link call logs."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def path(self, link: str) -> Path:
        return self.root / f"{check_link(link)}.jsonl"

    def append(self, link: str, call: dict[str, Any]) -> None:
        """Add one call's line to ``link``'s log."""
        line = json.dumps(call, sort_keys=True, separators=(",", ":"), default=str) + "\n"
        path = self.path(link)
        with FileLock(str(path) + ".lock"), path.open("a", encoding="utf-8") as f:
            f.write(line)

    def read(self, link: str) -> list[dict[str, Any]]:
        """Every call logged for ``link`` (empty when none)."""
        path = self.path(link)
        if not path.exists():
            return []
        with FileLock(str(path) + ".lock"):
            text = path.read_text(encoding="utf-8")
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def tally(self, link: str, counted: int, *, since: datetime | None = None) -> Tally:
        """The calls of ``link`` after the first ``counted``: their tokens, and a provider failure left standing.

        Only a call the provider failed (``provider_failed``) stands as a provider failure; a stream the harness
        closed (``harness_closed``) is the harness's act and clears any failure before it, like an answer. Calls
        that started before ``since`` (an aware datetime: when the caller's episode began) are counted past but
        are not the caller's: neither their tokens nor their failure are reported (a link reused, or calls logged
        under it before the episode holding it began)."""
        calls = self.read(link)[counted:]
        tokens = unmeasured = 0
        failed: dict[str, Any] | None = None
        for call in calls:
            if since is not None and not _started_since(call, since):
                continue
            if call.get("status") in (OK, HARNESS_CLOSED):  # answered, or the harness cut the answer off itself
                failed = None
                total = (call.get("usage") or {}).get("total_tokens")
                if isinstance(total, int) and not isinstance(total, bool) and total >= 0:
                    tokens += total
                else:
                    unmeasured += 1
            elif call.get("status") == PROVIDER_FAILED:
                failed = call
        return Tally(tokens, counted + len(calls), unmeasured, failed)
