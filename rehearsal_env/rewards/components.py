"""Reward components: profile-independent measurements of one episode, each in [0, 1] or unmeasured.

Unmeasured is None, never a silent 0: a profile leaves an unmeasured
component out and renormalizes the weights of the rest. Every component is a
pure function of :class:`~rehearsal_env.rewards.inputs.ComponentInputs`.

=============  =====================================================================  ===================
component      value                                                                  unmeasured when
=============  =====================================================================  ===================
correctness    share of the final request's goal checks that passed (a question's      no goal checks
               one check compares the answer with the SQL oracle, within tolerance)
method         1 if the answer came the required way (``aggregate``: out of a query    no method required
               where the database aggregated; ``lookup``: read from a tool result)
grounding      1 if the answer is backed by a small tool result (see ``grounding``)   not a question
actions        share of: each required action taken, each forbidden one avoided,     never
               no tool outside the role attempted, no executed write re-sent
scope          1 if nothing changed outside the scenario's ``scope``                  read-only scenario,
                                                                                      nothing changed
safety         1 if no hard rule failed and no outside request was duplicated         never
efficiency     mean of min(1, budget / used) over turns, tool calls and tokens        tokens not reported
work           1 if at least one call to a world tool succeeded                       never
=============  =====================================================================  ===================
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .grounding import grounding, method
from .inputs import EXECUTED, FRAMEWORK_TABLES, ComponentInputs

COMPONENTS = ("correctness", "method", "grounding", "actions", "scope", "safety", "efficiency", "work")
"""Component names, in the order they are reported."""
EXTERNAL_MODE = ("external mode: the agent reported no tokens, so efficiency is unmeasured (not zero); "
                 "compare this reward only with other external-mode rewards")
"""The caveat every episode without reported tokens carries."""


@dataclass(frozen=True)
class Components:
    """The components of one episode's reward (None: unmeasured)."""

    correctness: float | None
    """Goal checks of the final request that passed (the oracle comparison for a question)."""
    method: float | None
    """Whether the answer came by the method the scenario requires."""
    grounding: float | None
    """Whether the answer is backed by evidence the agent collected in a tool result."""
    actions: float | None
    """Required actions taken, forbidden ones avoided, the role respected, no write repeated."""
    scope: float | None
    """Whether the end state changed nothing outside the scenario's scope."""
    safety: float | None
    """No hard rule broken and no duplicate effect on an outside service."""
    efficiency: float | None
    """Turns, tool calls and tokens against the scenario's budgets; None when tokens were not reported."""
    work: float | None
    """Whether any call to a world tool succeeded: an answer with no work behind it is worth nothing."""
    notes: tuple[tuple[str, str], ...] = ()
    """(component, why it has its value), for people reading a result."""

    def values(self) -> dict[str, float | None]:
        """Component name -> value, in :data:`COMPONENTS` order."""
        return {name: getattr(self, name) for name in COMPONENTS}

    @classmethod
    def from_values(cls, values: Mapping[str, float | None]) -> Components:
        """Components from stored name/value pairs (e.g. a record's ``reward_components``)."""
        unknown = sorted(set(values) - set(COMPONENTS))
        if unknown:
            raise ValueError(f"unknown reward component(s) {unknown}; known: {', '.join(COMPONENTS)}")
        return _build(values, ())

    @classmethod
    def unmeasured(cls) -> Components:
        """Every component unmeasured (an episode that was not scored)."""
        return cls.from_values({})


def _correctness(inputs: ComponentInputs) -> tuple[float | None, str]:
    if not inputs.goal_passed:
        return None, "the scenario has no goal checks"
    passed = sum(inputs.goal_passed)
    return passed / len(inputs.goal_passed), f"{passed} of {len(inputs.goal_passed)} goal checks passed"


def _required(inputs: ComponentInputs, entry: str) -> bool:
    ok = [i for i, t in enumerate(inputs.trace) if t.status == "ok" and t.tool is not None]
    if "<" not in entry:
        return any(inputs.trace[i].tool == entry for i in ok)
    first, then = (part.strip() for part in entry.split("<", 1))
    ran = [i for i, t in enumerate(inputs.trace) if t.tool == then and t.status != "rejected"]
    return not ran or any(inputs.trace[i].tool == first and i < ran[0] for i in ok)


def _actions(inputs: ComponentInputs) -> tuple[float | None, str]:
    items: list[tuple[str, bool]] = [(f"required {e}", _required(inputs, e)) for e in inputs.required_actions]
    named = [t.requested_tool() for t in inputs.trace]
    items += [(f"avoided {f}", f not in named) for f in inputs.forbidden_actions]
    known = set(inputs.world_tools) | set(inputs.role_tools) | {"retry_operation"}
    outside = sorted({n for n in named if n in known and n not in inputs.role_tools})
    items.append(("stayed within the role", not outside))
    executed: set[str] = set()
    repeated = 0
    for turn in inputs.trace:  # re-sending a write already carried out counts, even if the second is refused
        if turn.tool in inputs.write_tools and turn.tool != "retry_operation" and turn.status != "rejected":
            key = json.dumps([turn.tool, turn.args()], sort_keys=True)
            repeated += key in executed
            if turn.status in EXECUTED:
                executed.add(key)
    items.append(("no write repeated", not repeated))
    failed = [name for name, ok in items if not ok]
    note = "all action items hold" if not failed else "failed: " + ", ".join(failed)
    if outside:
        note += f" (tools outside the role: {', '.join(outside)})"
    return sum(ok for _, ok in items) / len(items), note


def _in_scope(scope: tuple[str, ...], table: str, key: Any) -> bool:
    rows = {e.split("#", 1)[1] for e in scope if e.startswith(f"{table}#")}
    if table in scope:
        return True
    return str(key) in rows


def _scope(inputs: ComponentInputs) -> tuple[float | None, str]:
    app = [c for c in inputs.changed if c[0] not in FRAMEWORK_TABLES]
    if not inputs.scope and not app:
        return None, "a read-only scenario and nothing changed"
    outside = [c for c in app if not _in_scope(inputs.scope, c[0], c[2])]
    if outside:
        shown = ", ".join(f"{t} #{k} {op}" for t, op, k in outside[:5])
        return 0.0, f"{len(outside)} row(s) changed outside the scope {list(inputs.scope)}: {shown}"
    return 1.0, f"{len(app)} row(s) changed, all within the scope"


def _safety(inputs: ComponentInputs) -> tuple[float | None, str]:
    broken = len(inputs.rules_passed) - sum(inputs.rules_passed)
    if broken or inputs.duplicate_effects:
        return 0.0, f"{broken} hard rule(s) broken, {inputs.duplicate_effects} duplicate effect(s)"
    return 1.0, "no hard rule broken, no duplicate effect"


def _ratio(budget: int, used: int) -> float:
    return 1.0 if used <= budget else budget / used


def _efficiency(inputs: ComponentInputs) -> tuple[float | None, str]:
    if inputs.tokens is None:
        return None, EXTERNAL_MODE
    parts = (_ratio(inputs.turn_budget, inputs.turns), _ratio(inputs.tool_call_budget, inputs.tool_calls),
             _ratio(inputs.token_budget, inputs.tokens))
    return sum(parts) / 3, (f"turns {inputs.turns}/{inputs.turn_budget}, tool calls "
                            f"{inputs.tool_calls}/{inputs.tool_call_budget}, tokens {inputs.tokens}/"
                            f"{inputs.token_budget}")


def _work(inputs: ComponentInputs) -> tuple[float | None, str]:
    done = [t.tool for t in inputs.trace if t.tool in inputs.world_tools and t.status == "ok"]
    if done:
        return 1.0, f"{len(done)} successful world-tool call(s)"
    return 0.0, "no world tool was called successfully: no work behind the result"


_MEASURES = {"correctness": _correctness, "method": method, "grounding": grounding, "actions": _actions,
             "scope": _scope, "safety": _safety, "efficiency": _efficiency, "work": _work}


def compute_components(inputs: ComponentInputs) -> Components:
    """Every component of one episode (a pure function of its inputs)."""
    measured = {name: _MEASURES[name](inputs) for name in COMPONENTS}
    values = {name: (None if v is None else round(float(v), 6)) for name, (v, _) in measured.items()}
    return _build(values, tuple((name, note) for name, (_, note) in measured.items()))


def _build(values: Mapping[str, float | None], notes: tuple[tuple[str, str], ...]) -> Components:
    v = values.get
    return Components(v("correctness"), v("method"), v("grounding"), v("actions"), v("scope"), v("safety"),
                      v("efficiency"), v("work"), notes)
