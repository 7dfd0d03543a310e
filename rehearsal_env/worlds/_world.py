"""A world: schema, seed data, tools, roles, policies and scenarios of one application."""

from __future__ import annotations

import difflib
import functools
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date
from typing import Any

from ..scenarios import Scenario, Split
from ..schema import Table
from ..services import SERVICE_REQUESTS
from ..tools import BUILTIN_TOOLS, Tool, retry_operation
from ..tools.builtin import FINAL_ANSWERS

RowsBySeed = Callable[[int, date], Mapping[str, Sequence[tuple[Any, ...]]]]


@dataclass(frozen=True)
class Role:
    """A participant's role; it decides which of the world's tools the agent has."""

    name: str
    """Role name, e.g. ``support_agent``."""
    description: str
    """What the role is for, in words."""
    tools: tuple[str, ...]
    """Names of the world tools the role may call (the built-ins come on top)."""


@dataclass(frozen=True)
class Policy:
    """A rule the agent must follow, in plain words, and the hard rules that enforce it."""

    text: str
    """The rule as the agent reads it."""
    hard_rules: tuple[str, ...]
    """Names of the hard-rule checks that turn it into SQL (scenarios reuse these names)."""


@dataclass(frozen=True, eq=False)
class World:
    """Everything one application's practice world is made of."""

    name: str
    """Registered name, e.g. ``shop``."""
    description: str
    """What the application is, in one paragraph."""
    tables: tuple[Table, ...]
    """The application's tables; the framework's (``service_requests``, ``final_answers``) are appended."""
    tools: tuple[Tool, ...]
    """The application's tools (the built-ins are added per scenario)."""
    roles: tuple[Role, ...]
    """Roles and their tools."""
    policies: tuple[Policy, ...]
    """Policies the agent is told, each mapped to hard rules."""
    data_anchor: date
    """The frozen day the data is dated for; the world's clock reads this day at noon."""
    seed: int
    """The seed of the data generator."""
    generate_rows: RowsBySeed = field(repr=False)
    """``(seed, data_anchor) -> {table: rows}``: deterministic seed data."""
    generate_scenarios: Callable[[World], Sequence[Scenario]] = field(repr=False)
    """``world -> scenarios``: the world's suite."""
    suite_version: str = "1"
    """Version of the scenario generator (bumped whenever it changes)."""
    application: object | None = field(default=None, repr=False)
    """What the world's ``http`` tools call: a folder world's ``ApplicationSpec`` (None: the world
    runs in process)."""
    sources: Mapping[str, str] = field(default_factory=dict, repr=False)
    """``{part: sha256}`` of what the world is made of that its Python code does not show (a folder
    world's files: world.toml, its application, data, scenarios); part of its world version."""

    def __post_init__(self) -> None:
        framework = (SERVICE_REQUESTS, FINAL_ANSWERS)
        names = {t.name for t in self.tables}
        object.__setattr__(
            self, "tables", self.tables + tuple(t for t in framework if t.name not in names)
        )

    # -- data ------------------------------------------------------------
    @property
    def now(self) -> str:
        """The world's frozen clock as ISO-8601 text."""
        return f"{self.data_anchor.isoformat()}T12:00:00"

    def seed_rows(self) -> Mapping[str, Sequence[tuple[Any, ...]]]:
        """The seed data (cached per world, seed and anchor)."""
        return _rows(self.generate_rows, self.seed, self.data_anchor)

    @property
    def seed_fingerprint(self) -> str:
        """A hash of every seed row: equal fingerprints mean identical starting data."""
        return _fingerprint(self.generate_rows, self.seed, self.data_anchor)

    def with_anchor(self, anchor: date) -> World:
        """The same world with its clock (and the day its data is seeded for) moved to ``anchor``."""
        return replace(self, data_anchor=anchor)

    # -- lookups ---------------------------------------------------------
    def scenarios(self, split: Split | None = None) -> tuple[Scenario, ...]:
        """The world's scenarios, optionally of one split, in a stable order."""
        every = _scenarios(self)
        return tuple(s for s in every if split is None or s.split == split)

    def scenario(self, scenario_id: str) -> Scenario:
        """One scenario by id, with a did-you-mean error."""
        by_id = _scenarios_by_id(self)
        if scenario_id not in by_id:
            raise KeyError(_unknown("scenario", scenario_id, by_id, f"world {self.name!r}"))
        return by_id[scenario_id]

    def role(self, name: str) -> Role:
        by_name = {r.name: r for r in self.roles}
        if name not in by_name:
            raise KeyError(_unknown("role", name, by_name, f"world {self.name!r}"))
        return by_name[name]

    def tools_for(self, role: str, *, offers_retry: bool = False) -> dict[str, Tool]:
        """The tools an agent in ``role`` has: the role's world tools plus the built-ins."""
        world_tools = {t.name: t for t in self.tools}
        out = {name: world_tools[name] for name in self.role(role).tools}
        out.update({t.name: t for t in BUILTIN_TOOLS})
        if offers_retry:
            out[retry_operation.name] = retry_operation
        return out

    def describe(self) -> dict[str, Any]:
        """A JSON-able summary: tools, roles, policies, tables and scenario counts."""
        counts: dict[str, int] = {}
        for s in self.scenarios():
            counts[s.split] = counts.get(s.split, 0) + 1
        return {
            "name": self.name,
            "description": self.description,
            "data_anchor": self.data_anchor.isoformat(),
            "tables": {t.name: len(self.seed_rows().get(t.name, ())) for t in self.tables},
            "tools": [{"name": t.name, "kind": t.kind, "description": t.description} for t in self.tools],
            "roles": {r.name: list(r.tools) for r in self.roles},
            "policies": [{"text": p.text, "hard_rules": list(p.hard_rules)} for p in self.policies],
            "scenarios": counts,
        }


def _unknown(what: str, name: str, known: Mapping[str, Any], where: str) -> str:
    close = difflib.get_close_matches(name, list(known), n=3)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    sample = ", ".join(sorted(known)[:8]) + (", ..." if len(known) > 8 else "")
    return f"{where} has no {what} {name!r}.{hint} Known: {sample}"


@functools.lru_cache(maxsize=16)
def _rows(gen: RowsBySeed, seed: int, anchor: date) -> Mapping[str, Sequence[tuple[Any, ...]]]:
    return {name: tuple(tuple(r) for r in rows) for name, rows in gen(seed, anchor).items()}


@functools.lru_cache(maxsize=16)
def _fingerprint(gen: RowsBySeed, seed: int, anchor: date) -> str:
    h = hashlib.sha256()
    for name, rows in sorted(_rows(gen, seed, anchor).items()):
        h.update(name.encode())
        for row in rows:
            h.update(json.dumps(row, default=str).encode())
    return h.hexdigest()


@functools.lru_cache(maxsize=16)
def _scenarios(world: World) -> tuple[Scenario, ...]:
    return tuple(world.generate_scenarios(world))


@functools.lru_cache(maxsize=16)
def _scenarios_by_id(world: World) -> dict[str, Scenario]:
    return {s.id: s for s in _scenarios(world)}
