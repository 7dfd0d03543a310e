"""Build the world ``tau2-<domain>`` from a tau2-bench source folder (read in place, nothing copied)."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import Any

from ...backends import open_database
from ...scenarios import Scenario, ToolCall
from ...worlds import Policy, Role, World
from . import _tools_airline, _tools_retail
from ._checks import RULES
from ._load import ROWS
from ._scenarios import ROLE, Deriver, read_tasks
from ._schema import TABLES
from ._source import TAU2_COMMIT, SourceError, SourceFile, load_json, manifest_hash, pin

DATA_ANCHOR = date(2024, 5, 15)
"""tau2's airline clock reads 2024-05-15T15:00:00; both domains are dated for that day."""
SUITE_VERSION = "tau2-1"
"""Version of this importer's scenario derivation (the world's ``suite_version`` adds the source hash)."""
LICENSE_NOTICE = ("Tasks, data and policy from tau2-bench (https://github.com/sierra-research/tau2-bench), "
                  "MIT License, Copyright (c) 2025 Sierra Research; read from the user's own copy at import.")
TOOLS = {"retail": _tools_retail.TOOLS, "airline": _tools_airline.TOOLS}
DESCRIPTIONS = {
    "retail": "tau2-bench's retail customer service: users, products and variants, orders with items, "
              "fulfilments and payments; cancel, modify, exchange and return, as tau2 does them.",
    "airline": "tau2-bench's airline customer service: flights by date with seats and prices per cabin, users "
               "with payment methods and saved passengers, reservations with flights, passengers and payments.",
}


def _stray(domain: str, rows: Mapping[str, Sequence[tuple[Any, ...]]]) -> ToolCall:
    user = rows["users"][-1]
    if domain == "retail":
        return ToolCall("modify_user_address", {"user_id": user[1], "address1": "1 Stray Street",
                                                "address2": user[5], "city": user[6], "state": user[8],
                                                "country": user[7], "zip": user[9]})
    return ToolCall("send_certificate", {"user_id": user[1], "amount": 50})


@functools.lru_cache(maxsize=4)
def _rows_of(path: str, domain: str, sha: str) -> dict[str, tuple[tuple[Any, ...], ...]]:
    db = load_json(Path(path), domain, "db.json")
    return {name: tuple(rows) for name, rows in ROWS[domain](db).items()}


def build_tau2_world(name: str, source: str | Path, domain: str,
                     expected: Sequence[SourceFile] | None = None) -> World:
    """The world ``name`` from ``domain`` of the tau2-bench folder ``source``.

    Raises:
        SourceError: a file is missing, or (with ``expected``) differs from what was imported.
    """
    folder = Path(source).resolve()
    files = pin(folder, domain)
    if expected is not None:
        changed = [f.name for f, e in zip(files, expected, strict=False) if f.sha256 != e.sha256]
        if changed or len(files) != len(expected):
            raise SourceError(f"{', '.join(changed) or 'the file list'} in {folder} changed since "
                              f"`rehearsal import tau2` pinned it; run `rehearsal import tau2 --source {folder}` "
                              "again to import the new data (a new world version)")
    db_sha = files[0].sha256
    rows = _rows_of(str(folder), domain, db_sha)
    tools = TOOLS[domain]
    policy_text = (folder / "data" / "tau2" / "domains" / domain / "policy.md").read_text()
    draft = World(
        name=name, description=f"{DESCRIPTIONS[domain]} {LICENSE_NOTICE}", tables=TABLES[domain], tools=tools,
        roles=(Role(ROLE, f"tau2's {domain} agent: every tool of tau2's {domain} domain.",
                    tuple(t.name for t in tools)),),
        policies=(), data_anchor=DATA_ANCHOR, seed=0, generate_rows=lambda seed, anchor: rows,
        generate_scenarios=lambda world: (),
        suite_version=f"{SUITE_VERSION}+{TAU2_COMMIT}+{manifest_hash(files)[:16]}")
    scenarios = _derive(draft, domain, folder)
    return replace(draft, policies=(Policy(policy_text, tuple(r.name for r in scenarios[0].hard_rules)
                                           if scenarios else ()),),
                   generate_scenarios=lambda world: scenarios)


def _derive(world: World, domain: str, folder: Path) -> tuple[Scenario, ...]:
    tasks = read_tasks(world.name, domain, load_json(folder, domain, "tasks.json"),
                       load_json(folder, domain, "split_tasks.json"))
    db = open_database(world, "sqlite")
    try:
        rows = world.seed_rows()
        deriver = Deriver(world.name, domain, db, {t.name: t for t in world.tools}, rows, world.now,
                          {t.name: t.column_names for t in world.tables}, _stray(domain, rows),
                          {r[1]: r[2] for r in rows["orders" if domain == "retail" else "reservations"]},
                          {u[1]: (u[2], u[3], u[9]) for u in rows["users"]})
        rules = deriver.rules_holding(RULES[domain], tasks)
        return tuple(deriver.scenarios(tasks, rules))
    finally:
        db.close()
