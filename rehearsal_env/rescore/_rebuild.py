"""The end state of a stored episode, rebuilt offline, and its checks run again.

The world's snapshot is built on the embedded SQLite engine from the world's
code alone (:class:`rehearsal_env.backends.sqlite.SQLiteDatabase`: schema and
seed rows, never the run's database), the record's row changes are applied,
and the record's own checks (their SQL, parameters, comparison and wanted
value) are run read-only. The re-run verdict must equal the stored one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from ..backends import SQLiteDatabase
from ..checks import Check, CheckResult
from ..clock import frozen_world
from ..provenance import provenance_of
from ..records import EpisodeRecord, RowChange, as_json
from ..schema import Table
from ..services import duplicate_effects
from ..verdict import decide, run_check
from ..worlds import World, load_world


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


def recheck(record: EpisodeRecord, world: World | None = None) -> Recheck:
    """Rebuild ``record``'s end state and run its checks again (``world``: :func:`world_of` of it)."""
    ident = (record.scenario, record.agent, record.repeat, record.outcome)
    if record.capture_error or (record.outcome == "not_scored" and not record.checks):
        return Recheck(*ident, None, (f"not rebuilt: {record.capture_error or record.reason}",))
    missing = [c.name for c in record.checks if c.sql is None]
    if missing:
        return Recheck(*ident, None, (f"not rebuilt: checks without stored SQL: {missing}",))
    state = end_state(world or world_of(record), record.changes)
    try:
        results = [_run(state, c.name, c.kind, c.sql or "", c.params or "[]", c.op, c.want)
                   for c in record.checks]
        duplicates = duplicate_effects(state)
    finally:
        state.close()
    differences = []
    for stored, now in zip(record.checks, results, strict=True):
        if (stored.held, stored.passed) != (as_json(now.held), now.passed):
            differences.append(f"check {stored.name!r}: stored held={stored.held} passed={stored.passed}, "
                               f"re-run held={as_json(now.held)} passed={now.passed}")
    outcome, _ = decide([r for r in results if r.kind == "goal"], [r for r in results if r.kind == "hard_rule"])
    if outcome.value != record.outcome:
        differences.append(f"outcome: stored {record.outcome}, re-run {outcome.value}")
    if duplicates != record.duplicate_effects:
        differences.append(f"duplicate effects: stored {record.duplicate_effects}, re-run {duplicates}")
    return Recheck(*ident, outcome.value, tuple(differences))


def _run(state: SQLiteDatabase, name: str, kind: str, sql: str, params: str, op: str, want: str) -> CheckResult:
    check = Check(name, sql, op, json.loads(want), tuple(json.loads(params)))  # type: ignore[arg-type]
    return run_check(state, check, kind)  # type: ignore[arg-type]
