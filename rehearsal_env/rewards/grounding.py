"""Grounding: is the final answer backed by evidence the agent actually collected in tool results?

Evidence is every value in the result of a successful call to one of the
world's own tools (numbers, text, and the length of every list, so a listed
set of rows grounds its count). An answer is *grounded* when it matches a
value of one result (within the scenario's tolerance for numbers,
case-insensitively for text) such that:

- the result is small: a result with more than :data:`MAX_RESULT_VALUES`
  values is a dump, and dumps ground nothing, so flooding the evidence with
  whole tables does not buy grounding;
- the call did not put the answer there itself: a value that is a literal of
  the call's own arguments (``SELECT 1234.56``) is an echo, not evidence;
- a text answer (a choice among labels) in a tabular result (a ``rows`` list
  of lists, as ``run_sql`` returns) is grounded only by the first row: listing
  every candidate (``SELECT * FROM regions``) does not ground a choice, the
  query that ranks them does.

The *method* of an ``aggregate`` question is right when the grounding result
came from a call whose result says ``"aggregated": true`` (the database
aggregated); a ``lookup`` question only needs a grounded answer.

:func:`runtime_grounding` is the guard an agent loop may call before it
accepts an answer: it fails open (any doubt reads as grounded, nothing is
blocked). Refusing to pay for an ungrounded answer is the ``rl`` profile's job.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from .inputs import ComponentInputs, TurnInput

MAX_RESULT_VALUES = 100
"""A tool result holding more values than this is a dump: it grounds nothing."""
METHODS = ("aggregate", "lookup")
"""The methods a scenario may require."""

_NUMBER = re.compile(r"^\s*-?(\d+\.?\d*|\.\d+)\s*$")
_STRING_LITERAL = re.compile(r"'((?:[^']|'')*)'")
_NUMERIC_LITERAL = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")
_COMMENT = re.compile(r"--[^\n]*|/\*.*?\*/", re.DOTALL)


@dataclass(frozen=True)
class Evidence:
    """The values of one successful world-tool result."""

    turn: int
    """1-based turn of the call."""
    tool: str
    """The tool called."""
    values: tuple[Any, ...]
    """Every number and text in the result, and every list's length."""
    labels: tuple[str, ...]
    """The texts that can ground a text answer (a tabular result's first row only)."""
    size: int
    """How many values the result held (list lengths not counted); above the limit it is a dump."""
    aggregated: bool
    """Whether the result says the database aggregated."""
    echoes: tuple[Any, ...]
    """Literals of the call's own arguments (values it cannot ground)."""

    @property
    def dump(self) -> bool:
        return self.size > MAX_RESULT_VALUES


def number(value: Any) -> float | None:
    """``value`` as a float when it is a number or plain decimal text, else None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and _NUMBER.match(value):
        return float(value)
    return None


def matches(answer: str, value: Any, tolerance: float) -> bool:
    """Whether ``value`` backs ``answer``: numerically within ``tolerance``, or as equal text."""
    a, v = number(answer), number(value)
    if a is not None and v is not None:
        return abs(a - v) <= tolerance + 1e-9
    if a is None and isinstance(value, str):
        return answer.strip().casefold() == value.strip().casefold()
    return False


def _leaves(value: Any) -> Iterator[tuple[Any, bool]]:
    """(value, counts-toward-size) for every scalar of a JSON value and every list's length."""
    if isinstance(value, dict):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, list):
        yield len(value), False
        for item in value:
            yield from _leaves(item)
    elif isinstance(value, (int, float, str)) and not isinstance(value, bool):
        yield value, True


def _literals(args: dict[str, Any]) -> tuple[Any, ...]:
    """Values a call supplied itself: its arguments, and the literals inside SQL-like text."""
    out: list[Any] = []
    for value in args.values():
        out.append(value)
        if isinstance(value, str):
            text = _COMMENT.sub(" ", value)
            strings = [s.replace("''", "'") for s in _STRING_LITERAL.findall(text)]
            out.extend(strings)
            out.extend(_NUMERIC_LITERAL.findall(_STRING_LITERAL.sub(" ", text)))
    return tuple(out)


def collect_evidence(trace: Sequence[TurnInput], world_tools: Sequence[str]) -> list[Evidence]:
    """The evidence of every successful call to a world tool, in turn order."""
    out = []
    for i, turn in enumerate(trace, start=1):
        if turn.tool is None or turn.tool not in world_tools or turn.status != "ok":
            continue
        try:
            tool_result = json.loads(turn.observation).get("tool_result") or {}
        except (TypeError, ValueError, AttributeError):
            continue
        if "result" not in tool_result:  # cut by the episode's size limit: a dump by definition
            out.append(Evidence(i, turn.tool, (), (), MAX_RESULT_VALUES + 1, False, ()))
            continue
        result = tool_result["result"]
        leaves = list(_leaves(result))
        aggregated = isinstance(result, dict) and result.get("aggregated") is True
        rows = result.get("rows") if isinstance(result, dict) else None
        tabular = isinstance(rows, list) and all(isinstance(r, list) for r in rows)
        texts = (v for v, _ in _leaves(rows[:1] if tabular and rows else result))
        out.append(Evidence(i, turn.tool, tuple(v for v, _ in leaves), tuple(v for v in texts if isinstance(v, str)),
                            sum(1 for _, c in leaves if c), aggregated, _literals(turn.args())))
    return out


def final_answer(trace: Sequence[TurnInput]) -> str | None:
    """The answer of the last successful ``finish`` (None when there is none, or it was empty)."""
    for turn in reversed(trace):
        if turn.tool == "finish" and turn.status == "ok":
            answer = turn.args().get("answer", "")
            return answer.strip() or None if isinstance(answer, str) else None
    return None


def backing(answer: str, evidence: Sequence[Evidence], tolerance: float) -> tuple[list[Evidence], list[Evidence]]:
    """(results that ground ``answer``, dumps that merely contain it)."""
    grounds, dumps = [], []
    text = number(answer) is None
    for e in evidence:
        if not any(matches(answer, v, tolerance) for v in (e.labels if text and not e.dump else e.values)):
            continue
        if e.dump:
            dumps.append(e)
        elif not any(matches(answer, lit, tolerance) for lit in e.echoes):
            grounds.append(e)
    return grounds, dumps


def grounding(inputs: ComponentInputs) -> tuple[float | None, str]:
    """1 when the answer is grounded, 0 when not, None for a scenario that asks no question."""
    if not inputs.question:
        return None, "not a question"
    answer = final_answer(inputs.trace)
    if answer is None:
        return 0.0, "no answer was given"
    grounds, dumps = backing(answer, collect_evidence(inputs.trace, inputs.world_tools), inputs.answer_tolerance)
    if grounds:
        return 1.0, f"the answer appears in the result of turn {grounds[0].turn} ({grounds[0].tool})"
    if dumps:
        return 0.0, (f"the answer appears only in dumps (results over {MAX_RESULT_VALUES} values, turns "
                     f"{', '.join(str(d.turn) for d in dumps)}); a dump grounds nothing")
    return 0.0, "the answer appears in no tool result (or only where the call supplied it itself)"


def method(inputs: ComponentInputs) -> tuple[float | None, str]:
    """1 when the answer came the required way, 0 when not, None when no method is required."""
    if inputs.method is None:
        return None, "no method required"
    if inputs.method not in METHODS:
        raise ValueError(f"scenario {inputs.scenario!r} requires method {inputs.method!r}; "
                         f"known methods: {', '.join(METHODS)}. Fix the scenario's method field")
    answer = final_answer(inputs.trace)
    if answer is None:
        return 0.0, "no answer was given"
    grounds, _ = backing(answer, collect_evidence(inputs.trace, inputs.world_tools), inputs.answer_tolerance)
    if inputs.method == "lookup":
        return (1.0, "the answer was read from a tool result") if grounds else (0.0, "the answer was not read")
    aggregated = [e for e in grounds if e.aggregated]
    if aggregated:
        return 1.0, f"the answer came out of an aggregating query (turn {aggregated[0].turn})"
    return 0.0, "no aggregating query produced the answer: the model aggregated, or nobody did"


def runtime_grounding(trace: Sequence[TurnInput], world_tools: Sequence[str], answer: str,
                      tolerance: float = 0.0) -> bool:
    """Advisory check before accepting an answer; fails open: True unless it is sure the answer is ungrounded."""
    try:
        evidence = collect_evidence(trace, world_tools)
        readable = len(evidence) == sum(1 for t in trace if t.tool in world_tools and t.status == "ok")
        grounds, _ = backing(answer, evidence, tolerance)
        return bool(grounds) or not answer.strip() or not readable
    except Exception:  # noqa: BLE001 - a guard that fails must never block a real answer
        return True
