"""What the reward components are computed from: stored data only, no database.

:class:`ComponentInputs` holds the scenario's scoring facts (method, tolerance,
actions, scope, budgets), the trace, the check results, the run metrics and
the rows changed against the snapshot. :func:`inputs_from_episode` builds it
from a finished episode (reading the database changes once, and only when a
write was carried out); ``rehearsal_env.records.inputs_from_record`` rebuilds
the same inputs from a stored episode record, so an episode's components can
be recomputed from Parquet without its database.

Rewards sit below the env and the records that call them: a finished episode is
read through the small :class:`FinishedEpisode` protocol, never by importing the env.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from ..backends import Database, changes
from ..scenarios import Scenario
from ..tools import BUILTIN_TOOLS, Tool, retry_operation
from ..verdict import Verdict
from ..worlds import World

FRAMEWORK_TABLES = ("final_answers", "service_requests")
"""Tables the framework writes (``finish``, outside-service emulators): never judged as out of scope."""
TOKENS_PER_TURN = 2_000
"""Default token budget per budgeted turn, when a scenario states none."""
BUDGET_SLACK = 2
"""Default turn and tool-call budgets: the reference solution's calls plus this many."""
EXECUTED = ("ok", "unknown")
"""Statuses of a call the application carried out (``unknown``: carried out, outcome not reported)."""


@dataclass(frozen=True)
class TurnInput:
    """One turn as the components need it (a subset of a trace entry)."""

    tool: str | None
    """The tool called; None when the action was rejected before a tool was known."""
    action: str
    """The action text as the agent sent it."""
    status: str
    """``ok``, ``error``, ``unknown`` or ``rejected``."""
    observation: str
    """The observation returned (JSON text)."""

    def requested_tool(self) -> str | None:
        """The tool the action named, even when it was rejected (None when the action was not JSON)."""
        if self.tool is not None:
            return self.tool
        try:
            data = json.loads(self.action)
        except (TypeError, ValueError, RecursionError):  # not JSON, or nested too deep to read
            return None
        name = data.get("tool") if isinstance(data, dict) else None
        return name if isinstance(name, str) else None

    def args(self) -> dict[str, Any]:
        """The action's arguments ({} when absent or not an object)."""
        try:
            data = json.loads(self.action)
        except (TypeError, ValueError, RecursionError):  # not JSON, or nested too deep to read
            return {}
        args = data.get("args") if isinstance(data, dict) else None
        return args if isinstance(args, dict) else {}


@dataclass(frozen=True)
class ComponentInputs:
    """Everything the reward components are a function of."""

    scenario: str
    """The scenario's id."""
    question: bool
    """Whether the scenario asks for an answer (it has an oracle, or its category is ``question``)."""
    method: str | None
    """The method required (``aggregate``, ``lookup``) or None."""
    answer_tolerance: float
    """Absolute tolerance of a numeric answer."""
    required_actions: tuple[str, ...]
    """``"tool"`` or ``"first<then"`` entries that must hold."""
    forbidden_actions: tuple[str, ...]
    """Tools that must never be called."""
    scope: tuple[str, ...]
    """What the scenario may change: ``"table"`` (any row) or ``"table#key"`` (one row)."""
    role_tools: tuple[str, ...]
    """The tools the scenario's role has, built-ins included."""
    world_tools: tuple[str, ...]
    """The world's own tools (evidence and work come only from these)."""
    write_tools: tuple[str, ...]
    """Tools of kind ``write``."""
    turn_budget: int
    """Turns a good solution needs."""
    tool_call_budget: int
    """Tool calls a good solution needs."""
    token_budget: int
    """Tokens a good solution needs."""
    outcome: str
    """The verdict's outcome."""
    goal_passed: tuple[bool, ...]
    """Each goal check's result."""
    rules_passed: tuple[bool, ...]
    """Each hard rule's result."""
    duplicate_effects: int
    """Repeated identical requests to outside services."""
    turns: int
    """Steps taken."""
    tool_calls: int
    """Tool calls carried out or attempted."""
    tokens: int | None
    """Tokens the agent reported; None in external mode."""
    trace: tuple[TurnInput, ...]
    """Every turn."""
    changed: tuple[tuple[str, str, Any], ...]
    """(table, ``inserted``/``updated``/``deleted``, primary key) of every row changed against the snapshot."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> ComponentInputs:
        """The inverse of :meth:`to_dict` (lists back to tuples)."""
        fields = dict(raw)
        fields["trace"] = tuple(TurnInput(**t) for t in raw["trace"])
        fields["changed"] = tuple(tuple(c) for c in raw["changed"])
        for name in ("required_actions", "forbidden_actions", "scope", "role_tools", "world_tools",
                     "write_tools", "goal_passed", "rules_passed"):
            fields[name] = tuple(raw[name])
        return cls(**fields)


class TracedTurn(Protocol):
    """One turn of a finished episode, as rewards read it."""

    @property
    def tool(self) -> str | None: ...
    @property
    def action(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def observation(self) -> str: ...


class FinishedEpisode(Protocol):
    """What the rewards read of a finished episode (``rehearsal_env.env.Episode`` is one)."""

    @property
    def world(self) -> World: ...
    @property
    def scenario(self) -> Scenario: ...
    @property
    def db(self) -> Database: ...
    @property
    def tools(self) -> Mapping[str, Tool]: ...
    @property
    def trace(self) -> Sequence[TracedTurn]: ...


def inputs_for(
    world: World, scenario: Scenario, *, outcome: str, goal_passed: Sequence[bool], rules_passed: Sequence[bool],
    duplicate_effects: int, turns: int, tool_calls: int, tokens: int | None, trace: Sequence[TurnInput],
    changed: Sequence[tuple[str, str, Any]],
) -> ComponentInputs:
    """Inputs from a scenario and the stored facts of one of its episodes (live or from a record)."""
    role_tools = world.tools_for(scenario.role, offers_retry=scenario.offers_retry)
    every = {t.name: t for t in (*world.tools, *BUILTIN_TOOLS, retry_operation)}
    default = len(scenario.reference.calls) + BUDGET_SLACK
    turn_budget = scenario.turn_budget or default
    return ComponentInputs(
        scenario=scenario.id,
        question=scenario.answer_sql is not None or scenario.category == "question",
        method=scenario.method, answer_tolerance=scenario.answer_tolerance,
        required_actions=scenario.required_actions, forbidden_actions=scenario.forbidden_actions,
        scope=scenario.scope, role_tools=tuple(role_tools), world_tools=tuple(t.name for t in world.tools),
        write_tools=tuple(n for n, t in every.items() if t.kind == "write"),
        turn_budget=turn_budget, tool_call_budget=scenario.tool_call_budget or default,
        token_budget=scenario.token_budget or TOKENS_PER_TURN * turn_budget,
        outcome=outcome, goal_passed=tuple(goal_passed), rules_passed=tuple(rules_passed),
        duplicate_effects=duplicate_effects, turns=turns, tool_calls=tool_calls, tokens=tokens,
        trace=tuple(trace), changed=tuple(changed),
    )


def inputs_from_episode(episode: FinishedEpisode, verdict: Verdict) -> ComponentInputs:
    """Inputs of a finished episode; its database is read only if a write was carried out."""
    trace = tuple(TurnInput(t.tool, t.action, t.status, t.observation) for t in episode.trace)
    writes = {t.name for t in episode.tools.values() if t.kind == "write"}
    wrote = any(t.tool in writes and t.status in EXECUTED for t in trace)
    changed: list[tuple[str, str, Any]] = []
    if wrote:
        for table, ops in changes(episode.db, dict(episode.world.seed_rows())).items():
            changed.extend((table, op, row[0]) for op, rows in ops.items() for row in rows)
    m = verdict.metrics
    return inputs_for(
        episode.world, episode.scenario, outcome=verdict.outcome.value,
        goal_passed=[c.passed for c in verdict.checks if c.kind == "goal"],
        rules_passed=[c.passed for c in verdict.checks if c.kind == "hard_rule"],
        duplicate_effects=m.duplicate_effects, turns=m.turns, tool_calls=m.tool_calls, tokens=m.tokens,
        trace=trace, changed=changed,
    )
