"""Is every fact the agent needs reachable through its role's tools? Read from the reference's trace.

A scenario is unfair when its reference solution only works because its
author knew something the agent cannot find out. The reference's trace shows
what the agent would have seen: the request, then each turn's observation
(tool results and customer messages). Every *key* the reference passes (an
argument named ``id``, ``*_id``, ``email`` or ``sku``) must appear in what
was seen before the turn that uses it, or in a fact the simulated customer
gives when asked. Every tool the reference calls must belong to the role.
Free text (messages, reasons, amounts worked out from a result) is the
agent's own writing and is not looked up.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from ..env import TurnRecord
from ..scenarios import Scenario
from ..worlds import World
from ._manifest import Finding

KEY_ARGUMENT = re.compile(r"(^|_)(id|email|sku)$")
"""Argument names whose values are keys the agent must have been shown."""


def is_key(name: str, value: Any) -> bool:
    """Whether argument ``name=value`` is a key to look up (0 and empty text mean "none" and are not)."""
    if not KEY_ARGUMENT.search(name) or isinstance(value, bool):
        return False
    if isinstance(value, int):
        return value > 0
    return isinstance(value, str) and value != ""


def shows(text: str, value: Any) -> bool:
    """Whether ``text`` shows ``value``: a whole number, or the text (raw or JSON-escaped)."""
    if isinstance(value, int):
        return re.search(rf"(?<![\d.]){value}(?!\d)", text) is not None
    escaped = json.dumps(value, ensure_ascii=True)[1:-1]
    return value in text or escaped in text


def facts_reachable(world: World, scenario: Scenario, trace: Sequence[TurnRecord]) -> Finding:
    """Check the reference's trace (see the module docstring)."""
    role_tools = world.tools_for(scenario.role, offers_retry=scenario.offers_retry)
    problems = [f"the reference calls {c.tool!r}, which role {scenario.role!r} does not have "
                f"(it has {', '.join(sorted(role_tools))})"
                for c in scenario.reference.calls if c.tool not in role_tools]
    seen: list[tuple[str, str]] = [("the request", scenario.request)]
    seen += [("a customer fact", answer) for _, answer in scenario.facts]
    sources: dict[str, int] = {}
    missing: set[tuple[str, str]] = set()
    keys = 0
    for turn in trace:
        tool, args = _call(turn.action)
        for name, value in args.items():
            if not is_key(name, value):
                continue
            keys += 1
            source = next((where for where, text in seen if shows(text, value)), None)
            if source is None and (name, repr(value)) not in missing:
                missing.add((name, repr(value)))
                problems.append(f"turn {turn.turn} calls {tool}({name}={value!r}), but no tool result, "
                                f"the request or a customer fact shows {value!r} before it")
            elif source is not None:
                kind = "a tool result" if source.startswith("turn ") else source
                sources[kind] = sources.get(kind, 0) + 1
        seen.append((f"turn {turn.turn} ({tool})", _shown(turn.observation)))
    if problems:
        return Finding(False, "; ".join(problems))
    if not keys:
        return Finding(True, "the reference passes no ids; nothing to look up")
    where = ", ".join(f"{n} from {k}" for k, n in sorted(sources.items()))
    return Finding(True, f"{keys} id(s) used by the reference, each shown before use ({where})")


def _shown(observation: str) -> str:
    """What an observation shows the agent: messages and the tool result (not the turn counters)."""
    try:
        data = json.loads(observation)
    except ValueError:
        return observation
    if not isinstance(data, dict):
        return observation
    return json.dumps([data.get("messages"), data.get("tool_result")], ensure_ascii=True, default=str)


def _call(action: str) -> tuple[str, dict[str, Any]]:
    try:
        data = json.loads(action)
    except ValueError:
        return "?", {}
    if not isinstance(data, dict):
        return "?", {}
    args = data.get("args", {})
    return str(data.get("tool", "?")), args if isinstance(args, dict) else {}
