"""The PostgreSQL reset: row-level triggers log touched keys; one function call restores them.

Installed once into a world's template database (right after seeding), so
every env database cloned from it carries:

- ``rehearsal.snap_<table>``: a copy of each table as seeded (primary key indexed);
- ``rehearsal.touched (tbl, id)``: the keys written since the last reset, logged by an
  ``AFTER INSERT OR UPDATE OR DELETE`` row trigger on every table (old and new key);
- ``rehearsal.restore()``: in one statement's time, for the tables the log names,
  upserts the snapshot rows of touched keys (parents first), deletes touched keys the
  snapshot lacks (children first), empties the log, and puts back every id sequence
  whose state differs from the snapshot's (sequences are not transactional);
- ``rehearsal.sync_sequences()``: sets every sequence so the next id is max(id) + 1, as
  SQLite's rowid (called after a rolled-back or id-moving tool call);
- a ``BEFORE TRUNCATE`` trigger that refuses TRUNCATE (it would bypass the log).

Work done by ``restore()`` itself is not logged: the triggers skip while the
transaction-local setting ``rehearsal.restoring`` is ``on``. Foreign keys must not
form a cycle between tables (references within one table are fine).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..schema import Table

SCHEMA = "rehearsal"


def dependency_order(tables: Sequence[Table]) -> list[Table]:
    """Tables with every referenced table before the tables that reference it.

    Raises:
        ValueError: the foreign keys form a cycle between tables.
    """
    by_name = {t.name: t for t in tables}
    done: list[Table] = []
    visiting: set[str] = set()

    def visit(table: Table) -> None:
        if table in done:
            return
        if table.name in visiting:
            raise ValueError(
                f"foreign keys form a cycle through table {table.name!r}; the PostgreSQL reset restores "
                "parents before children and needs an acyclic schema. Drop one reference of the cycle"
            )
        visiting.add(table.name)
        for column in table.columns:
            parent = column.references.split(".")[0] if column.references else None
            if parent and parent != table.name and parent in by_name:
                visit(by_name[parent])
        visiting.discard(table.name)
        done.append(table)

    for table in tables:
        visit(table)
    return done


def _setval(sequence: str, max_id: int | None) -> str:
    if max_id is None:
        return f"setval('{sequence}', 1, false)"
    return f"setval('{sequence}', {max_id}, true)"


def _log_trigger(i: int, table: Table) -> list[str]:
    pk = table.primary_key
    return [
        f"""CREATE FUNCTION {SCHEMA}.log_{table.name}() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  IF TG_OP = 'DELETE' OR (TG_OP = 'UPDATE' AND OLD.{pk} IS DISTINCT FROM NEW.{pk}) THEN
    INSERT INTO {SCHEMA}.touched VALUES ({i}, OLD.{pk}) ON CONFLICT DO NOTHING;
  END IF;
  IF TG_OP <> 'DELETE' THEN
    INSERT INTO {SCHEMA}.touched VALUES ({i}, NEW.{pk}) ON CONFLICT DO NOTHING;
  END IF;
  RETURN NULL;
END $f$""",
        f"CREATE TRIGGER rehearsal_log AFTER INSERT OR UPDATE OR DELETE ON public.{table.name} FOR EACH ROW "
        f"WHEN (current_setting('{SCHEMA}.restoring', true) IS DISTINCT FROM 'on') "
        f"EXECUTE FUNCTION {SCHEMA}.log_{table.name}()",
        f"CREATE TRIGGER rehearsal_no_truncate BEFORE TRUNCATE ON public.{table.name} "
        f"FOR EACH STATEMENT EXECUTE FUNCTION {SCHEMA}.no_truncate()",
    ]


def _upsert(i: int, table: Table) -> str:
    pk, cols = table.primary_key, ", ".join(table.column_names)
    rest = [c for c in table.column_names if c != pk]
    if rest:
        sets = ", ".join(f"{c} = EXCLUDED.{c}" for c in rest)
        changed = (f"({', '.join(f'cur.{c}' for c in rest)}) IS DISTINCT FROM "
                   f"({', '.join(f'EXCLUDED.{c}' for c in rest)})")
        conflict = f"DO UPDATE SET {sets} WHERE {changed}" if len(rest) > 1 else f"DO UPDATE SET {sets}"
    else:
        conflict = "DO NOTHING"
    return (
        f"    IF {i} = ANY(tables) THEN\n"
        f"      INSERT INTO public.{table.name} AS cur ({cols})\n"
        f"        SELECT {cols} FROM {SCHEMA}.snap_{table.name}\n"
        f"        WHERE {pk} IN (SELECT id FROM {SCHEMA}.touched WHERE tbl = {i})\n"
        f"        ON CONFLICT ({pk}) {conflict};\n"
        f"    END IF;"
    )


def _delete(i: int, table: Table) -> str:
    pk = table.primary_key
    return (
        f"    IF {i} = ANY(tables) THEN\n"
        f"      DELETE FROM public.{table.name} AS cur USING {SCHEMA}.touched k\n"
        f"        WHERE k.tbl = {i} AND cur.{pk} = k.id\n"
        f"        AND NOT EXISTS (SELECT 1 FROM {SCHEMA}.snap_{table.name} s WHERE s.{pk} = k.id);\n"
        f"    END IF;"
    )


def install_sql(
    tables: Sequence[Table], sequences: Mapping[str, str], max_ids: Mapping[str, int | None]
) -> list[str]:
    """Statements that install the reset machinery into a seeded database.

    Args:
        tables: The world's tables (already created and seeded in ``public``).
        sequences: Table name to its id sequence (``pg_get_serial_sequence``).
        max_ids: Table name to its largest seeded id (None for an empty table).
    """
    ordered = dependency_order(tables)
    number = {t.name: i for i, t in enumerate(ordered, start=1)}
    statements = [
        f"CREATE SCHEMA {SCHEMA}",
        f"CREATE UNLOGGED TABLE {SCHEMA}.touched "
        "(tbl smallint NOT NULL, id bigint NOT NULL, PRIMARY KEY (tbl, id))",
        f"""CREATE FUNCTION {SCHEMA}.no_truncate() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  RAISE EXCEPTION 'TRUNCATE of % is not supported: the reset logs row changes and TRUNCATE bypasses them; '
    'use DELETE FROM %', TG_TABLE_NAME, TG_TABLE_NAME;
END $f$""",
    ]
    for table in ordered:
        statements.append(f"CREATE TABLE {SCHEMA}.snap_{table.name} AS TABLE public.{table.name}")
        statements.append(f"ALTER TABLE {SCHEMA}.snap_{table.name} ADD PRIMARY KEY ({table.primary_key})")
        statements.extend(_log_trigger(number[table.name], table))
    seq_rows = ",\n      ".join(
        f"('{sequences[t.name]}'::regclass, {max_ids[t.name] if max_ids[t.name] is not None else 1}::bigint, "
        f"{'true' if max_ids[t.name] is not None else 'false'})"
        for t in ordered
    )
    upserts = "\n".join(_upsert(number[t.name], t) for t in ordered)
    deletes = "\n".join(_delete(number[t.name], t) for t in reversed(ordered))
    statements.append(f"""CREATE FUNCTION {SCHEMA}.restore() RETURNS void LANGUAGE plpgsql AS $f$
DECLARE
  tables smallint[];
BEGIN
  SELECT array_agg(DISTINCT tbl) INTO tables FROM {SCHEMA}.touched;
  IF tables IS NOT NULL THEN
    PERFORM set_config('{SCHEMA}.restoring', 'on', true);
{upserts}
{deletes}
    DELETE FROM {SCHEMA}.touched;
    PERFORM set_config('{SCHEMA}.restoring', 'off', true);
  END IF;
  PERFORM setval(s.seq, s.val, s.called) FROM (VALUES
      {seq_rows}) AS s(seq, val, called)
    WHERE pg_sequence_last_value(s.seq) IS DISTINCT FROM (CASE WHEN s.called THEN s.val END);
END $f$""")
    syncs = "\n".join(
        f"  SELECT max({t.primary_key}) INTO m FROM public.{t.name};\n"
        f"  PERFORM CASE WHEN m IS NULL THEN setval('{sequences[t.name]}', 1, false) "
        f"ELSE setval('{sequences[t.name]}', m, true) END;"
        for t in ordered
    )
    statements.append(f"""CREATE FUNCTION {SCHEMA}.sync_sequences() RETURNS void LANGUAGE plpgsql AS $f$
DECLARE
  m bigint;
BEGIN
{syncs}
END $f$""")
    statements.append(f"REVOKE ALL ON SCHEMA {SCHEMA} FROM PUBLIC")
    return statements


def seed_sequence_sql(table: Table, sequence: str, max_id: int | None) -> str:
    """The statement that sets ``table``'s sequence so the next id is max(id) + 1 after seeding."""
    return f"SELECT {_setval(sequence, max_id)}"
