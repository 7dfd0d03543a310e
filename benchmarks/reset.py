"""Reset and step latency of a backend, next to the naive ways of restoring a snapshot.

    python benchmarks/reset.py [--backend sqlite|postgres] [--world shop] [--resets 300] [--dsn DSN]

Before every reset the application commits one INSERT (a copy of a row) and one
UPDATE in the world's largest table, as a tool call would. Strategies are
interleaved in one run (the machine is noisy; ratios hold better than absolute
figures) and each is checked afterwards: full digest equal to the snapshot's, and
the next inserted id equal to SQLite's max(id) + 1.

- sqlite: ``deserialize`` of the snapshot (the backend's reset) vs re-running the
  schema and seed SQL into a fresh in-memory database.
- postgres: the trigger-logged restore (the backend's reset) vs cloning the
  world's template database (``CREATE DATABASE ... TEMPLATE`` + connect + drop the
  old one) vs drop/create + schema + seed through COPY.

A *step* is one read tool call, one write tool call (each its own committed
transaction) and three checks. Last, every scenario's reference episode is played
and the reset after it timed (what an RL loop pays between episodes).
"""

from __future__ import annotations

import argparse
import functools
import os
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from rehearsal_env.backends import Database, digest, open_database
from rehearsal_env.backends._dialect import create_table
from rehearsal_env.schema import Table
from rehearsal_env.worlds import World, load_world

Timings = dict[str, list[float]]


def largest(world: World) -> Table:
    rows = world.seed_rows()
    return max(world.tables, key=lambda t: (len(rows.get(t.name, ())), t.name))


def _bump(table: Table) -> tuple[str, str]:
    """An UPDATE of one row's first non-key column that changes it, and the column's name."""
    column = table.columns[1]
    change = {"int": f"{column.name} + 1", "real": f"{column.name} + 1.0", "text": f"{column.name} || 'x'"}
    sql = f"UPDATE {table.name} SET {column.name} = {change[column.type]} WHERE {table.primary_key} = ?"
    return sql, column.name


def write(db: Database, table: Table, key: int) -> None:
    """What one write tool call commits: a copied row and a changed row."""
    cols = ", ".join(table.column_names[1:])
    with db.transaction():
        db.execute(f"INSERT INTO {table.name} ({cols}) SELECT {cols} FROM {table.name} "
                   f"WHERE {table.primary_key} = ?", (key,))
        db.execute(_bump(table)[0], (key,))


def step(db: Database, table: Table, key: int) -> None:
    """One read tool call, one write tool call, three checks."""
    column = _bump(table)[1]
    with db.transaction():
        db.query(f"SELECT * FROM {table.name} WHERE {table.primary_key} = ?", (key,))
    with db.transaction():
        db.execute(_bump(table)[0], (key,))
    for _ in range(3):
        db.check_value(f"SELECT COUNT(*) FROM {table.name} WHERE {column} IS NOT NULL AND "
                       f"{table.primary_key} = ?", (key,))


def after_episodes(db: Database, world: World, out: list[float]) -> None:
    """Reset after each scenario's reference episode (what an RL loop does between episodes)."""
    from rehearsal_env.agents import make_agent
    from rehearsal_env.env import RehearsalEnv
    from rehearsal_env.runner import run_episode

    for scenario in world.scenarios():
        env = RehearsalEnv(scenario, world, database=db)
        run_episode(env, make_agent("reference", scenario), seed=0)
        timed(out, db.reset)


def timed(out: list[float], fn: Callable[[], Any]) -> Any:
    started = time.perf_counter()
    value = fn()
    out.append((time.perf_counter() - started) * 1000)
    return value


def next_id(db: Database, table: Table) -> int:
    cols = ", ".join(table.column_names[1:])
    with db.transaction():
        (new,) = db.execute(f"INSERT INTO {table.name} ({cols}) SELECT {cols} FROM {table.name} "
                            f"WHERE {table.primary_key} = 1 RETURNING {table.primary_key}")[0]
    db.reset()
    return int(new)


# -- SQLite --------------------------------------------------------------------------------------
def sqlite_reseed(world: World) -> sqlite3.Connection:
    """The naive reset: a fresh in-memory database, schema and seed SQL run again."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("BEGIN")
    rows = world.seed_rows()
    for table in world.tables:
        for statement in create_table(table, "sqlite"):
            conn.execute(statement)
        if rows.get(table.name):
            marks = ", ".join("?" * len(table.columns))
            conn.executemany(f"INSERT INTO {table.name} VALUES ({marks})", rows[table.name])
    conn.execute("COMMIT")
    return conn


def bench_sqlite(world: World, resets: int, slow: int) -> tuple[Timings, list[str]]:
    db = open_database(world)
    table = largest(world)
    t: Timings = {"reset": [], "reseed": [], "step": [], "episode": []}
    snapshot, expect_id = digest(db), max(r[0] for r in world.seed_rows()[largest(world).name]) + 1
    per_round = max(1, resets // slow)
    for i in range(slow):
        timed(t["reseed"], lambda: sqlite_reseed(world)).close()
        for j in range(per_round):
            write(db, table, 1 + (i * per_round + j) % 50)
            timed(t["reset"], db.reset)
            timed(t["step"], functools.partial(step, db, table, 1 + j % 50))
            db.reset()
    after_episodes(db, world, t["episode"])
    notes = check(db, snapshot, table, expect_id, "deserialize")
    db.close()
    return t, notes


# -- PostgreSQL ----------------------------------------------------------------------------------
def bench_postgres(world: World, resets: int, slow: int, dsn: str | None) -> tuple[Timings, list[str]]:
    import psycopg

    from rehearsal_env.backends._pgcluster import template_name
    from rehearsal_env.backends.postgres import PostgresDatabase

    db = open_database(world, "postgres", **({"dsn": dsn} if dsn else {}))
    assert isinstance(db, PostgresDatabase)
    cluster = db._cluster
    template = template_name(world)
    table = largest(world)
    t: Timings = {"reset": [], "clone": [], "reseed": [], "step": [], "episode": []}
    snapshot, expect_id = digest(db), max(r[0] for r in world.seed_rows()[table.name]) + 1
    state: dict[str, Any] = {"n": 0, "clone": None, "reseed": None}

    def fresh(kind: str, make: Callable[[psycopg.Connection[Any]], None] | None) -> None:
        """Create the next database (clone or reseed), connect to it, drop the previous one."""
        state["n"] += 1
        name = f"rehearsal_bench_{os.getpid()}_{kind}_{state['n']}"
        if make is None:
            cluster._admin.execute(f"CREATE DATABASE {name} TEMPLATE {template}")
            conn = psycopg.connect(cluster.db_dsn(name), autocommit=True)
        else:
            cluster._admin.execute(f"CREATE DATABASE {name} TEMPLATE template0 ENCODING 'UTF8' "
                                   "LC_COLLATE 'C' LC_CTYPE 'C'")
            conn = psycopg.connect(cluster.db_dsn(name), autocommit=True)
            make(conn)
        old = state[kind]
        if old is not None:
            old[1].close()
            cluster._admin.execute(f"DROP DATABASE {old[0]}")
        state[kind] = (name, conn)

    def reseed(conn: psycopg.Connection[Any]) -> None:
        rows = world.seed_rows()
        with conn.transaction():
            for tab in world.tables:
                for statement in create_table(tab, "postgres"):
                    conn.execute(statement)
                with conn.cursor().copy(f"COPY {tab.name} ({', '.join(tab.column_names)}) FROM STDIN") as cp:
                    for row in rows.get(tab.name, ()):
                        cp.write_row(row)
                conn.execute(f"SELECT setval(pg_get_serial_sequence('{tab.name}', '{tab.primary_key}'), "
                             f"coalesce(max({tab.primary_key}), 0) + 1, false) FROM {tab.name}")

    per_round = max(1, resets // slow)
    try:
        for i in range(slow):
            timed(t["clone"], lambda: fresh("clone", None))
            timed(t["reseed"], lambda: fresh("reseed", reseed))
            for j in range(per_round):
                write(db, table, 1 + (i * per_round + j) % 50)
                timed(t["reset"], db.reset)
                timed(t["step"], functools.partial(step, db, table, 1 + j % 50))
                db.reset()
        after_episodes(db, world, t["episode"])
        notes = check(db, snapshot, table, expect_id, "trigger-logged restore")
    finally:
        for kind in ("clone", "reseed"):
            if state[kind] is not None:
                state[kind][1].close()
                cluster.drop_database(state[kind][0])
        db.close()
    return t, notes


def check(db: Database, snapshot: str, table: Table, expect_id: int, what: str) -> list[str]:
    write(db, table, 1)
    db.reset()
    same = digest(db) == snapshot
    got = next_id(db, table)
    if not same or got != expect_id:
        raise SystemExit(f"{what} did not restore the snapshot: digest equal {same}, next id of "
                         f"{table.name} {got} (expected {expect_id})")
    return [f"checked: {what} gives the snapshot's digest and next id {table.name}.id = {expect_id}"]


# -- report --------------------------------------------------------------------------------------
def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def report(backend: str, world: World, t: Timings, notes: list[str]) -> str:
    rows = world.seed_rows()
    total = sum(len(rows.get(tab.name, ())) for tab in world.tables)
    labels = {
        "reset": "reset: deserialize snapshot (chosen)" if backend == "sqlite"
        else "reset: trigger-logged restore (chosen)",
        "clone": "template clone + connect + drop old",
        "reseed": "re-run schema + seed SQL" if backend == "sqlite" else "drop/create + schema + seed (COPY)",
        "step": "step: 1 read + 1 write + 3 checks",
        "episode": "reset after each reference episode",
    }
    base = statistics.median(t["reset"])
    lines = [f"backend {backend}, world {world.name} ({total:,} rows, {len(world.tables)} tables), "
             f"{os.cpu_count()} cores, python {sys.version.split()[0]}",
             f"{'strategy':<42}{'n':>6}{'median ms':>12}{'p95 ms':>10}{'x chosen':>10}"]
    for key in ("reset", "clone", "reseed", "episode", "step"):
        if key not in t:
            continue
        med = statistics.median(t[key])
        ratio = {"reset": "1x", "clone": f"{med / base:,.0f}x", "reseed": f"{med / base:,.0f}x"}.get(key, "")
        lines.append(f"{labels[key]:<42}{len(t[key]):>6}{med:>12.3f}{p95(t[key]):>10.3f}{ratio:>10}")
    return "\n".join(lines + notes)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--world", default="shop")
    parser.add_argument("--resets", type=int, default=300, help="resets of the chosen strategy")
    parser.add_argument("--slow", type=int, default=15, help="runs of each naive strategy")
    parser.add_argument("--dsn", default=None, help="PostgreSQL server (default: REHEARSAL_POSTGRES_DSN or a "
                        "private server)")
    args = parser.parse_args(argv)
    world = load_world(args.world)
    if args.backend == "sqlite":
        t, notes = bench_sqlite(world, args.resets, args.slow)
    else:
        t, notes = bench_postgres(world, args.resets, args.slow, args.dsn)
    print(report(args.backend, world, t, notes))


if __name__ == "__main__":
    main()
