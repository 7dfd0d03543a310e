"""What a write changed, read from the backend's write log, and the checks that follow from it.

:func:`diff` runs on a database just after a solution ran: the rows inserted, updated and deleted
in the application's tables (``backends.changes``: only keys the row-level log saw are read). The
framework's tables (the emulators' request record, final answers) are not the job's.

:func:`goal_checks` asks for exactly those rows: each new row with its values (``COUNT(*) = n``, n counting
the rows of the same values already there, so a repeated write shows), each updated row with its new
values, each deleted row gone. :func:`hard_rules` says that nothing outside the job's scope changed:
every other table keeps its row count, a table the job inserts into or deletes from grows or shrinks by
no more than the job does, and no other row took a value the job writes. Every one holds on the
untouched snapshot, so the null agent breaks no rule.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from ..backends import Database, changes
from ..worlds import World

FRAMEWORK_TABLES = frozenset({"service_requests", "final_answers"})
"""Tables the framework adds to every world: never a job's goal or scope."""
Diff = dict[str, dict[str, list[list[Any]]]]


def app_tables(world: World) -> list[Any]:
    """The application's own tables, in the world's order."""
    return [t for t in world.tables if t.name not in FRAMEWORK_TABLES]


def diff(world: World, db: Database) -> Diff:
    """Rows inserted, updated (new values) and deleted per application table since the reset (JSON-able)."""
    names = {t.name for t in app_tables(world)}
    return {name: {kind: [list(r) for r in rows] for kind, rows in table.items()}
            for name, table in sorted(changes(db, dict(world.seed_rows())).items()) if name in names}


def _where(columns: Sequence[str], values: Sequence[Any]) -> tuple[str, list[Any]]:
    parts, params = [], []
    for c, v in zip(columns, values, strict=True):
        if v is None:
            parts.append(f"{c} IS NULL")
        else:
            parts.append(f"{c} = ?")
            params.append(v)
    return " AND ".join(parts) or "1 = 1", params


def _shown(columns: Sequence[str], values: Sequence[Any]) -> str:
    text = ", ".join(f"{c}={v!r}" for c, v in zip(columns, values, strict=True))
    return text if len(text) <= 160 else text[:157] + "..."


def _check(name: str, sql: str, params: Sequence[Any], op: str, want: Any) -> dict[str, Any]:
    return {"name": name, "sql": sql, "params": list(params), "op": op, "want": want}


def goal_checks(world: World, changed: Diff) -> list[dict[str, Any]]:
    """The goal checks of a job whose reference made ``changed`` (see the module docstring)."""
    tables = {t.name: t for t in world.tables}
    seed = world.seed_rows()
    out: list[dict[str, Any]] = []
    for name, table in changed.items():
        t = tables[name]
        cols = list(t.column_names)
        alike = Counter(tuple(r[1:]) for r in seed.get(name, ()))  # rows of the same values already there
        for values, n in sorted(Counter(tuple(r[1:]) for r in table["inserted"]).items(), key=repr):
            where, params = _where(cols[1:], values)
            there = alike.get(values, 0)
            out.append(_check(f"exactly {n} new {name} row(s) with {_shown(cols[1:], values)}"
                              + (f" ({there} alike already there)" if there else ""),
                              f"SELECT COUNT(*) FROM {name} WHERE {where}", params, "eq", there + n))
        before = {r[0]: r for r in seed.get(name, ())}
        for row in table["updated"]:
            old: Sequence[Any] = before.get(row[0], ())
            changed_cols = [i for i in range(1, len(cols)) if i >= len(old) or old[i] != row[i]]
            where, params = _where([cols[i] for i in changed_cols], [row[i] for i in changed_cols])
            out.append(_check(f"{name} {t.primary_key}={row[0]} now has "
                              f"{_shown([cols[i] for i in changed_cols], [row[i] for i in changed_cols])}",
                              f"SELECT COUNT(*) FROM {name} WHERE {t.primary_key} = ? AND {where}",
                              [row[0], *params], "eq", 1))
        for row in table["deleted"]:
            out.append(_check(f"{name} {t.primary_key}={row[0]} is gone",
                              f"SELECT COUNT(*) FROM {name} WHERE {t.primary_key} = ?", [row[0]], "eq", 0))
    return out


def hard_rules(world: World, changed: Diff) -> list[dict[str, Any]]:
    """The hard rules that nothing outside the job's scope changed (see the module docstring)."""
    seed = world.seed_rows()
    out: list[dict[str, Any]] = []
    for t in app_tables(world):
        rows = seed.get(t.name, ())
        mine = changed.get(t.name, {"inserted": [], "updated": [], "deleted": []})
        ins, dele = len(mine["inserted"]), len(mine["deleted"])
        count = f"SELECT COUNT(*) FROM {t.name}"
        if not ins and not dele:
            out.append(_check(f"scope: {t.name} keeps its {len(rows)} rows", count, [], "eq", len(rows)))
        elif ins and not dele:
            out.append(_check(f"scope: {t.name} grows by at most {ins}", count, [], "le", len(rows) + ins))
        elif dele and not ins:
            out.append(_check(f"scope: {t.name} shrinks by at most {dele}", count, [], "ge", len(rows) - dele))
        cols = list(t.column_names)
        before = {r[0]: r for r in rows}
        taken: Counter[tuple[int, Any]] = Counter()
        for row in mine["updated"]:
            old: Sequence[Any] = before.get(row[0], ())
            for i in range(1, len(cols)):
                if i >= len(old) or old[i] != row[i]:
                    taken[(i, row[i])] += 1
        for (i, value), n in sorted(taken.items(), key=repr):
            already = sum(1 for r in rows if r[i] == value)
            where, params = _where([cols[i]], [value])
            out.append(_check(f"scope: at most {already + n} {t.name} row(s) with {cols[i]}={value!r}",
                              f"SELECT COUNT(*) FROM {t.name} WHERE {where}", params, "le", already + n))
    return out


def scope(world: World, changed: Diff) -> list[str]:
    """The scenario's scope: a table it inserts into or deletes from, or ``table#key`` of a row it updates."""
    out: list[str] = []
    for name, table in changed.items():
        if table["inserted"] or table["deleted"]:
            out.append(name)
        out += [f"{name}#{row[0]}" for row in table["updated"] if name not in out]
    return out


def seed_counts(world: World) -> Mapping[str, int]:
    return {t.name: len(world.seed_rows().get(t.name, ())) for t in app_tables(world)}
