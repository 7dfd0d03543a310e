"""The agent's side of the line: an action is parsed and validated here, and anything malformed is
a *rejected attempt*, never an environment failure.

Attribution is a contract (:mod:`rehearsal_env.verdict`): whatever comes from an agent (the action,
its JSON, the arguments, the answer, the reported usage) is checked before any of it reaches the
world's code or a database, so that no action can make its own episode ``not_scored``:

- an action that is not a ``str`` (``None``, an int, a dict: a custom policy's bug) is rejected;
- an action longer than :data:`MAX_ACTION_CHARS` is rejected unread;
- the JSON is parsed with a nesting limit of :data:`MAX_DEPTH` (deeper is rejected; the parser's own
  ``RecursionError`` is caught here, where it happens);
- text must be valid Unicode: a lone surrogate, raw in the action text or escaped in its JSON
  (``"\\ud800"``), is rejected (an escaped *pair* is one character and is fine);
- ``"usage": {"tokens": N}`` needs an int ``0 <= N <=`` :data:`MAX_TOKENS`; anything else rejects the
  action (its tool is not called), so a wrong usage never reaches the records; it may split N into
  ``"input_tokens"`` and ``"output_tokens"`` (both, ints that add up to N, or neither), which records
  carry so that a profile with different input and output prices is costed;
- ``finish`` always ends the episode when its arguments are an object with a ``message``: an answer
  (or message) that is not valid text is recorded as given, as text (JSON of a number or a list, a lone
  surrogate or NUL as its ``\\u`` escape, cut at 4000 characters) and judged as any wrong answer is.

Recorded text (the action in the trace, a reason) goes through :func:`record_text`, so a record never
fails to encode whatever the agent sent.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

MAX_ACTION_CHARS = 1 << 17
"""Longest action text parsed (128 Ki characters, far past any tool call's arguments); a longer one is rejected
unread. The action space states the same bound, and Gymnasium's checker samples texts up to it (at 16 Mi a sample
took 6 s), so it is kept to what an action needs."""
MAX_DEPTH = 32
"""Deepest nesting of arrays and objects in an action's JSON (the action object itself is depth 1)."""
MAX_TOKENS = 10**9
"""Most tokens one action may report in ``usage``."""
MAX_RECORDED_CHARS = 1 << 16
"""Longest action text kept in the trace; a longer one is cut, saying how long it was."""
MAX_ANSWER_CHARS = 4000
"""Longest ``finish`` text argument kept (the tool schema's string limit)."""
FINISH = "finish"

_SURROGATE = re.compile("[\ud800-\udfff]")


class Rejected(Exception):
    """An action that is not carried out; the message tells the agent what to fix."""


@dataclass(frozen=True)
class Action:
    """A parsed action, not yet checked against its tool's schema."""

    tool: str
    """The tool's name."""
    args: Any
    """The ``args`` value as sent (``{}`` when absent)."""
    tokens: int | None
    """Tokens reported in ``usage`` (None: no usage)."""
    input_tokens: int | None = None
    """Of ``tokens``, the input (prompt) tokens, when ``usage`` splits them."""
    output_tokens: int | None = None
    """Of ``tokens``, the output (completion) tokens, when ``usage`` splits them."""


def record_text(text: str, limit: int | None = None) -> str:
    """``text`` safe to store: lone surrogates as ``\\uXXXX`` escapes, cut at ``limit`` characters."""
    cut = limit is not None and len(text) > limit
    shown = text[:limit] if cut else text
    if _SURROGATE.search(shown):
        shown = _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", shown)
    return f"{shown}...[cut: {len(text)} characters in all]" if cut else shown


def readable_action(text: str) -> str:
    """A recorded action as safe to parse again (rewards read the tool and args back from it): the text,
    or a marker that is not JSON when the text is nested too deeply for a parser."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return text
    try:
        json.loads(text)
    except RecursionError:
        return f"<an action nested deeper than {MAX_DEPTH} levels>"
    except ValueError:
        pass
    return text


def action_text(action: object) -> str:
    """The action as recorded in the trace: the text as sent (made safe, see :func:`record_text`), or the
    type and repr of a non-text action."""
    if isinstance(action, str):
        return record_text(action, MAX_RECORDED_CHARS)
    try:
        shown = repr(action)
    except Exception as exc:  # a policy's object whose repr fails is still recorded
        shown = f"(repr failed: {type(exc).__name__})"
    return record_text(f"<not text: {type(action).__name__}> {shown}", MAX_RECORDED_CHARS)


def _shown(action: str) -> str:
    return repr(record_text(action[:80]))


_last: tuple[str, int | None] = ("", None)
"""The last action text parsed (the object itself) and its reported tokens: :func:`reported_tokens` of the
action a step just parsed is not parsed again (a served step asked it of every action, a second parse)."""


def reported_tokens(action: str) -> int | None:
    """The tokens ``action`` reports in ``usage`` (None: none); the action must parse (raises :class:`Rejected`
    otherwise). The action the env parsed last (this very object) is not parsed again."""
    text, tokens = _last
    return tokens if text is action else parse_action(action).tokens


def parse_action(action: object) -> Action:
    """The action's tool, arguments and usage; raises :class:`Rejected` saying what was wrong."""
    global _last
    if not isinstance(action, str):
        raise Rejected(f'malformed action: expected text (a str holding JSON {{"tool": NAME, "args": {{...}}}}), '
                       f"got {type(action).__name__}; a policy returns the JSON as a string")
    if len(action) > MAX_ACTION_CHARS:
        raise Rejected(f"malformed action: expected at most {MAX_ACTION_CHARS} characters, got {len(action)}; "
                       "send a shorter action")
    if _SURROGATE.search(action):
        raise Rejected("malformed action: the text holds a lone surrogate (not valid Unicode), e.g. at "
                       f"position {_SURROGATE.search(action).start()}; send valid UTF-8 text")  # type: ignore[union-attr]
    try:
        data = json.loads(action)
    except RecursionError:
        raise Rejected(f"malformed action: JSON nested deeper than {MAX_DEPTH} levels; "
                       'send {"tool": NAME, "args": {...}} with flat arguments') from None
    except ValueError as exc:
        raise Rejected(f'malformed action: expected JSON {{"tool": NAME, "args": {{...}}}}, '
                       f"got {_shown(action)} ({exc})") from None
    if _depth(data) > MAX_DEPTH:
        raise Rejected(f"malformed action: JSON nested deeper than {MAX_DEPTH} levels; "
                       'send {"tool": NAME, "args": {...}} with flat arguments')
    if not isinstance(data, dict) or not isinstance(data.get("tool"), str):
        raise Rejected(f'malformed action: expected a JSON object with a string "tool", got {_shown(action)}')
    extra = sorted(set(data) - {"tool", "args", "usage"})
    if extra:
        raise Rejected(f'malformed action: unexpected key(s) {record_text(str(extra), 200)}; send "tool", '
                       '"args" and optionally "usage"')
    tokens, split = _tokens(data.get("usage")) if "usage" in data else (None, None)
    name: str = data["tool"]
    args = data.get("args", {})
    if name == FINISH and isinstance(args, dict):
        args = {k: _as_answer(v) if k in ("message", "answer") else v for k, v in args.items()}
    if _has_surrogate(name) or _has_surrogate(args):
        raise Rejected("malformed action: a text value holds a lone surrogate (an unpaired \\ud800-\\udfff "
                       "escape is not valid Unicode); send valid text")
    _last = (action, tokens)
    return Action(name, args, tokens, *(split or (None, None)))


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKENS


def _tokens(usage: Any) -> tuple[int, tuple[int, int] | None]:
    """(tokens, (input, output) or None) of a ``usage`` object; Rejected when it is malformed."""
    tokens = usage.get("tokens") if isinstance(usage, dict) else None
    parts = (usage.get("input_tokens"), usage.get("output_tokens")) if isinstance(usage, dict) else (None, None)
    given = [p is not None for p in parts]
    split_ok = not any(given) or (all(given) and all(map(_count, parts)) and sum(parts) == tokens)  # type: ignore[arg-type]
    if not _count(tokens) or not split_ok:
        shown = record_text(json.dumps(usage, default=str), 120)
        raise Rejected(f'malformed action: "usage" must be {{"tokens": N}} with an integer 0 <= N <= '
                       f'{MAX_TOKENS}, optionally split as "input_tokens" and "output_tokens" adding up to N, got '
                       f"{shown}; the call was not carried out")
    return tokens, (parts if all(given) else None)  # type: ignore[return-value]


def _as_answer(value: Any) -> str:
    """A ``finish`` text argument as text, whatever arrived (see the module docstring)."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return record_text(text.replace("\x00", "\\u0000"))[:MAX_ANSWER_CHARS]


def _depth(value: Any) -> int:
    """Nesting depth of parsed JSON, without recursion (a scalar is 0)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, level)
        if deepest > MAX_DEPTH:
            return deepest
        stack.extend((child, level + 1) for child in children)
    return deepest


def _has_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False
