"""The end state of a stored episode, rebuilt offline, and its checks run again.

The world's snapshot is built on the embedded SQLite engine from the world's
code alone (:class:`rehearsal_env.backends.sqlite.SQLiteDatabase`: schema and
seed rows, never the run's database), the record's row changes are applied,
and the scenario's checks are run read-only. The checks (their SQL, parameters,
comparison and wanted value) come from the *published* world version the record
names (:func:`published_checks`, ``content.json`` re-hashed to its ``wv_`` id),
never from the record: a record whose stored SQL was replaced cannot vouch for
itself. The re-run verdict must equal the stored one, check by check.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..backends import SQLiteDatabase
from ..checks import Check
from ..clock import frozen_world
from ..provenance import provenance_of
from ..records import EpisodeRecord, RowChange, as_json
from ..schema import Table
from ..services import duplicate_effects
from ..verdict import judge
from ..versions import load_content
from ..worlds import World, load_world

ScenarioChecks = tuple[tuple[Check, ...], tuple[Check, ...]]
"""A scenario's (goal checks, hard rules)."""


def end_state(world: World, changes: Sequence[RowChange]) -> SQLiteDatabase:
    """A private in-memory SQLite database of ``world``'s snapshot with ``changes`` applied.

    Checks then run on it through :meth:`SQLiteDatabase.check_value`, read-only as in a live episode.

    Raises:
        ValueError: a change does not fit the snapshot (another world version wrote the record).
    """
    db = SQLiteDatabase(world)
    by_name = {t.name: t for t in world.tables}
    try:
        with db.transaction():
            db.execute("PRAGMA defer_foreign_keys = ON")  # rows land in stored order; keys hold at commit
            for change in changes:
                _apply(db, by_name, change)
    except BaseException:
        db.close()
        raise
    return db


def _apply(db: SQLiteDatabase, tables: dict[str, Table], change: RowChange) -> None:
    table = tables.get(change.table)
    if table is None:
        raise ValueError(f"a stored change names table {change.table!r}, which the world's catalog lacks; "
                         "the record was written by another world version")
    row = json.loads(change.row)
    key = json.loads(change.key)
    exists = db.query(f"SELECT 1 FROM {table.name} WHERE {table.primary_key} = ?", (key,))
    if (change.change == "inserted") == bool(exists):
        state = "already in" if exists else "missing from"
        raise ValueError(f"stored change {change.change} {change.table}#{change.key}: the row is {state} the "
                         "rebuilt snapshot; the world's seed rows differ from the run's")
    db.execute(f"DELETE FROM {table.name} WHERE {table.primary_key} = ?", (key,))
    if change.change in ("inserted", "updated"):
        cols = [c for c in table.column_names if c in row]
        db.execute(f"INSERT INTO {table.name} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                   [row[c] for c in cols])


@dataclass(frozen=True)
class Recheck:
    """One stored episode's checks, run again on its rebuilt end state."""

    scenario: str
    """The scenario id."""
    agent: str
    """The agent."""
    repeat: int
    """The repeat index."""
    stored_outcome: str
    """The outcome in the record."""
    outcome: str | None
    """The outcome the re-run checks decide (None when the episode could not be rebuilt)."""
    differences: tuple[str, ...]
    """Every way the re-run differs from the record (empty: they agree)."""

    @property
    def agrees(self) -> bool:
        return not self.differences


def world_of(record: EpisodeRecord) -> World:
    """The record's world at its day, checked against the record's catalog and seed manifest.

    Raises:
        ValueError: the installed world would rebuild other rows than the run had, with what to do.
    """
    stamp = record.provenance
    world = frozen_world(load_world(record.world), stamp.dataset.data_anchor)
    now = provenance_of(world).dataset
    for name in ("catalog_hash", "seed_manifest_hash"):
        if getattr(now, name) != getattr(stamp.dataset, name):
            raise ValueError(f"world {record.world!r}: the run's dataset.{name} is {getattr(stamp.dataset, name)}, "
                             f"this build's is {getattr(now, name)}; the end state cannot be rebuilt from a "
                             "different snapshot. Recheck with the rehearsal-env build that ran it")
    return world


def _check(d: dict[str, Any]) -> Check:
    return Check(str(d["name"]), str(d["sql"]), d["op"], d["want"], tuple(d.get("params") or ()))


def published_checks(world: str, world_version: str,
                     root: str | Path | None = None) -> dict[str, ScenarioChecks]:
    """Scenario id -> (goal checks, hard rules) of the published world version (see the module docstring).

    Raises:
        NotPublished: the version is not published here (``--recheck`` then refuses: it never falls back
            on the checks a record stores).
        ValueError: the published content was changed after publishing.
    """
    content = load_content(world, world_version, root)
    return {str(s["id"]): (tuple(_check(c) for c in s.get("goal_checks") or ()),
                           tuple(_check(c) for c in s.get("hard_rules") or ()))
            for s in content.get("scenarios") or ()}


def recheck(record: EpisodeRecord, checks: ScenarioChecks, world: World | None = None) -> Recheck:
    """Rebuild ``record``'s end state and run the published ``checks`` of its scenario on it (``world``:
    :func:`world_of` of the record); every way the re-run verdict differs from the stored one is listed."""
    ident = (record.scenario, record.agent, record.repeat, record.outcome)
    if record.capture_error or (record.outcome == "not_scored" and not record.checks):
        return Recheck(*ident, None, (f"not rebuilt: {record.capture_error or record.reason}",))
    goal, rules = checks
    world = world or world_of(record)
    state = end_state(world, record.changes)
    try:
        # judged as the live episode is: an errored check is the world's only if the snapshot errors too
        outcome, checked, _ = judge(state, goal, rules, snapshot=lambda: closing(end_state(world, ())))
        results = list(checked)
        duplicates = duplicate_effects(state)
    finally:
        state.close()
    differences = []
    stored_names = [(c.name, c.kind) for c in record.checks]
    published_names = [(r.name, r.kind) for r in results]
    if stored_names != published_names:
        differences.append(f"the record's checks {stored_names} are not the published version's "
                           f"{published_names}")
    stored_by_name = {(c.name, c.kind): c for c in record.checks}
    for now in results:
        stored = stored_by_name.get((now.name, now.kind))
        if stored is not None and (stored.held, stored.passed) != (as_json(now.held), now.passed):
            differences.append(f"check {stored.name!r}: stored held={stored.held} passed={stored.passed}, "
                               f"re-run with the published check held={as_json(now.held)} passed={now.passed}")
    if outcome.value != record.outcome:
        differences.append(f"outcome: stored {record.outcome}, re-run {outcome.value}")
    if duplicates != record.duplicate_effects:
        differences.append(f"duplicate effects: stored {record.duplicate_effects}, re-run {duplicates}")
    return Recheck(*ident, outcome.value, tuple(differences))
