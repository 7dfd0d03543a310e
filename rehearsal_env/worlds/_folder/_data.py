"""Tables and seed data of a world folder: ``[[table]]`` or the application's migrations, and ``[data]``."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.tokens import Token, TokenType

from ...schema import Column, Table
from ._code import SeedGenerator
from ._paths import inside
from ._source import WORLD_FILE, Source, WorldFolderError


def declared_tables(src: Source, raw: list[dict[str, Any]]) -> tuple[Table, ...]:
    tables = []
    for i, t in enumerate(raw):
        if not isinstance(t.get("name"), str) or not t.get("columns"):
            raise src.error(src.line("table", i), "a [[table]] needs name and columns",
                            'write name = "..." and columns = [{ name = "id", type = "int" }, ...]')
        cols = []
        for c in t["columns"]:
            kind = c.get("type", "text")
            if kind not in ("int", "text", "real") or not isinstance(c.get("name"), str):
                raise src.error(src.line("table", i, "columns"), f"table {t['name']!r}: column {c!r} is not valid",
                                'each column is { name = "...", type = "int" | "text" | "real" }')
            cols.append(Column(c["name"], kind, bool(c.get("nullable", False)), c.get("references")))
        if cols[0].type != "int":
            raise src.error(src.line("table", i, "columns"), f"table {t['name']!r} starts with a {cols[0].type} column",
                            "make the first column the integer primary key (type = \"int\")")
        tables.append(Table(t["name"], tuple(cols), tuple(tuple(ix) for ix in t.get("indexes", ()))))
    return tuple(tables)


def sql_statements(path: Path, fix: str) -> Iterator[tuple[int, exp.Expr]]:
    """``(line, statement)`` for each statement of a SQL file, split on sqlglot's own semicolon tokens
    (so a semicolon inside quoted text or a comment never splits one) and parsed in SQLite's dialect.

    Raises:
        WorldFolderError: naming the file, the statement's line and ``fix``.
    """
    try:
        text = path.read_text()
    except UnicodeDecodeError as exc:
        raise WorldFolderError(f"{path}: not UTF-8 text (byte {exc.start}). Fix: save it as UTF-8") from None
    try:
        tokens = sqlglot.tokenize(text, read="sqlite")
    except sqlglot.errors.TokenError:
        raise WorldFolderError(f"{path}: not valid SQL (it cannot be split into tokens). Fix: {fix}") from None
    groups: list[list[Token]] = [[]]
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            groups.append([])
        else:
            groups[-1].append(token)
    for group in groups:
        if not group:
            continue
        line = group[0].line
        try:
            statement = sqlglot.parse_one(text[group[0].start:group[-1].end + 1], read="sqlite")
        except (sqlglot.errors.ParseError, RecursionError):
            raise WorldFolderError(f"{path}:{line}: not valid SQL (the statement does not parse). Fix: {fix}") from None
        yield line, statement


_INT_TYPES = {"INT", "BIGINT", "SMALLINT", "TINYINT", "BOOLEAN", "SERIAL", "BIGSERIAL"}
_REAL_TYPES = {"DOUBLE", "FLOAT", "REAL", "DECIMAL", "NUMERIC"}


def _column_type(column: exp.ColumnDef) -> str:
    kind = column.args.get("kind")
    name = kind.this.name if isinstance(kind, exp.DataType) else "TEXT"
    return "int" if name in _INT_TYPES else "real" if name in _REAL_TYPES else "text"


def migrated_tables(folder: Path, files: Sequence[object], where: str = "") -> tuple[Table, ...]:
    """Tables from the application's own migrations: CREATE TABLE and CREATE INDEX statements, in order
    (each file inside the world folder; ``where``: ``file:line`` of ``[schema] sql``)."""
    tables: dict[str, Table] = {}
    for file in files:
        path = inside(folder, file, where or str(folder / WORLD_FILE), "[schema] sql file")
        for line, statement in sql_statements(path, "write CREATE TABLE and CREATE INDEX statements"):
            if statement is None:
                continue
            kind = str(statement.args.get("kind", "")).upper() if isinstance(statement, exp.Create) else ""
            if kind == "TABLE" and isinstance(statement.this, exp.Schema):
                name = statement.this.this.name
                cols = []
                for c in statement.this.expressions:
                    if not isinstance(c, exp.ColumnDef):
                        continue
                    ref = next((k.kind for k in c.constraints if isinstance(k.kind, exp.Reference)), None)
                    target = None
                    if ref is not None and isinstance(ref.this, exp.Schema):
                        target = f"{ref.this.this.name}.{ref.this.expressions[0].name}"
                    not_null = any(isinstance(k.kind, exp.NotNullColumnConstraint | exp.PrimaryKeyColumnConstraint)
                                   for k in c.constraints)
                    cols.append(Column(c.name, _column_type(c), not not_null, target))  # type: ignore[arg-type]
                if not cols or cols[0].type != "int":
                    raise WorldFolderError(f"{path}:{line}: table {name!r} must start with an integer primary key. "
                                           "Fix: make its first column INTEGER PRIMARY KEY")
                tables[name] = Table(name, tuple(cols))
            elif kind == "INDEX" and isinstance(statement.this, exp.Index):
                index = statement.this
                table_name = index.args["table"].name
                params = index.args.get("params")
                columns = tuple(o.this.name for o in (params.args.get("columns") or ())) if params else ()
                if table_name not in tables:
                    raise WorldFolderError(f"{path}:{line}: index on unknown table {table_name!r}. Fix: create "
                                           "the table before its index")
                t = tables[table_name]
                tables[table_name] = Table(t.name, t.columns, (*t.indexes, columns))
            else:
                raise WorldFolderError(f"{path}:{line}: only CREATE TABLE and CREATE INDEX belong in the schema, "
                                       f"got a {statement.key.upper()} statement. Fix: keep data in [data] and "
                                       "leave other statements out")
    return tuple(tables.values())


def _literal(node: exp.Expression) -> Any:
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Boolean):
        return int(node.this)
    if isinstance(node, exp.Neg):
        return -_literal(node.this)
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        text = node.this
        return float(text) if any(ch in text for ch in ".eE") else int(text)
    raise ValueError(f"a value is a {node.key.upper()} expression, not a literal")


def _sql_rows(src_path: Path, tables: Sequence[Table]) -> dict[str, list[tuple[Any, ...]]]:
    by_name = {t.name: t for t in tables}
    rows: dict[str, list[tuple[Any, ...]]] = {t.name: [] for t in tables}
    for line, statement in sql_statements(src_path, "write INSERT INTO table (columns) VALUES (...); statements"):
        target = statement.this if isinstance(statement, exp.Insert) else None
        name = target.this.name if isinstance(target, exp.Schema) else target.name if target is not None else None
        if not isinstance(statement, exp.Insert) or name not in by_name:
            raise WorldFolderError(f"{src_path}:{line}: only INSERT INTO <a table of world.toml> belongs in "
                                   f"seed SQL, got a {statement.key.upper()} statement"
                                   f"{f' into {name[:60]!r}' if isinstance(name, str) else ''}. Fix: declare the "
                                   "table under [[table]] and seed it with INSERT ... VALUES")
        table = by_name[name]
        columns = ([c.name for c in target.expressions] if isinstance(target, exp.Schema)
                   else list(table.column_names))
        unknown = sorted(set(columns) - set(table.column_names))
        if unknown:
            raise WorldFolderError(f"{src_path}:{line}: table {name!r} has no column(s) {unknown}. Fix: use "
                                   f"{', '.join(table.column_names)}")
        values = statement.expression
        for tup in values.expressions if isinstance(values, exp.Values) else ():
            try:
                given = dict(zip(columns, (_literal(v) for v in tup.expressions), strict=True))
            except ValueError as exc:
                raise WorldFolderError(f"{src_path}:{line}: table {name!r}: {exc}. Fix: seed rows hold only "
                                       "numbers, 'text' and NULL, one value per listed column") from exc
            if given.get(table.primary_key) is None:
                given[table.primary_key] = max((r[0] for r in rows[name]), default=0) + 1
            missing = [c.name for c in table.columns if not c.nullable and given.get(c.name) is None]
            if missing:
                raise WorldFolderError(f"{src_path}:{line}: table {name!r}: no value for {missing}. Fix: give "
                                       "every column that is not nullable a value")
            rows[name].append(tuple(given.get(c) for c in table.column_names))
    return rows


def seed_rows(src: Source, folder: Path, raw: dict[str, Any], tables: Sequence[Table]) -> Callable[..., Any]:
    if "sql" in raw:
        path = inside(folder, raw["sql"], f"{src.path}:{src.line('data', 0, 'sql')}", "[data] sql seed file")
        rows = _sql_rows(path, tables)
        return lambda seed, anchor: rows
    if "generator" in raw:
        where = f"{src.path}:{src.line('data', 0, 'generator')}"
        path = inside(folder, raw["generator"], where, "[data] generator")
        # never imported here: each call runs it in a confined child process (see ._code); the world caches rows
        return SeedGenerator(path, folder.resolve(), tuple(tables), where)
    return lambda seed, anchor: {}

