"""One PostgreSQL server as the backend uses it: templates, env databases and their readers.

A :class:`Cluster` per server (per DSN) keeps an admin connection and builds,
once per :class:`~rehearsal_env.backends.DatabaseSpec` (a world version), a *template
database*: the tables created with ``_dialect.create_table(table, "postgres")``,
seeded from ``spec.seed_rows()``, sequences set so the next id is max(id) + 1, the
reset machinery of :mod:`._pgreset` installed, and the readers' privileges of
:mod:`._pgsandbox` (``SELECT`` on the tables, nothing else). Every env then gets its
own database cloned from the template (``CREATE DATABASE ... TEMPLATE``) and its own
reader login role, and drops both when it closes.

Template names carry a hash of the spec's name, seed data, DDL and the reset and
sandbox code, so a changed world gets a new template; on the process's own private
server, stale templates and the env databases and readers of dead processes are dropped.
"""

from __future__ import annotations

import hashlib
import inspect
import itertools
import os
import re
import threading
from typing import Any

import psycopg
from psycopg import sql as pgsql

from .._process import pid_alive
from . import _pgcompat, _pgreset, _pgsandbox
from ._database import DatabaseError
from ._dialect import create_table
from ._pgsandbox import READER_GROUP
from ._pgsql import connect
from ._spec import DatabaseSpec

CHECK_ROLE = READER_GROUP
"""The role whose privileges every reader has: SELECT on the world's tables."""
_ENV_PREFIX = "rehearsal_env_"
_ENV_NUMBERS = itertools.count(1)
"""This process's env database numbers: one count for every :class:`Cluster` it makes (a cluster made again after
its admin connection closed must not reuse the names of databases an earlier one made and not yet dropped)."""
_NAME_TRIES = 8
"""Names tried for a new env database before giving up, when each is taken (by a dead process of the same pid
whose databases a shared server still holds)."""
_TPL_PREFIX = "rehearsal_tpl_"


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")[:16] or "world"


def template_name(spec: DatabaseSpec) -> str:
    """The template database of ``spec``'s current schema and data, and of the reset and sandbox code."""
    h = hashlib.sha256()
    h.update(spec.name.encode())
    h.update(spec.seed_fingerprint.encode())
    for table in spec.tables:
        h.update("\n".join(create_table(table, "postgres")).encode())
    for module in (_pgreset, _pgcompat, _pgsandbox):
        h.update(inspect.getsource(module).encode())
    return f"{_TPL_PREFIX}{_slug(spec.name)}_{h.hexdigest()[:16]}"


class Cluster:
    """World templates and env databases on one server (see the module docstring)."""

    def __init__(self, dsn: str, *, private: bool) -> None:
        self.dsn = dsn
        self.private = private
        self._lock = threading.Lock()
        self._templates: dict[str, str] = {}
        self.superuser = False
        try:
            self._admin = connect(dsn, application_name="rehearsal-env admin")
        except psycopg.Error as exc:
            raise DatabaseError(
                f"could not connect to PostgreSQL at {dsn!r}: {exc}. Check the DSN (dsn= or "
                "REHEARSAL_POSTGRES_DSN), or leave both unset to start a private server"
            ) from exc
        self._ensure_check_role()
        if private:
            self._drop_leftovers()

    # -- databases -----------------------------------------------------------
    def db_dsn(self, dbname: str) -> str:
        return psycopg.conninfo.make_conninfo(self.dsn, dbname=dbname)

    def reader_dsn(self, dbname: str, password: str) -> str:
        """The DSN of the reader of env database ``dbname`` (see :mod:`._pgsandbox`)."""
        return psycopg.conninfo.make_conninfo(self.dsn, dbname=dbname, user=dbname, password=password)

    def create_env_database(self, spec: DatabaseSpec) -> tuple[str, str]:
        """A new database cloned from ``spec``'s template, and its reader: (name, reader's password)."""
        template = self.template(spec)
        for tries in range(1, _NAME_TRIES + 1):
            name = f"{_ENV_PREFIX}{os.getpid()}_{next(_ENV_NUMBERS)}"
            try:
                self._admin_run(pgsql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                    pgsql.Identifier(name), pgsql.Identifier(template)))
                break
            except DatabaseError as exc:  # a name left by an earlier process with this pid (pids are reused)
                if not isinstance(exc.__cause__, psycopg.errors.DuplicateDatabase) or tries == _NAME_TRIES:
                    raise
        password = _pgsandbox.new_password()
        try:
            for statement in _pgsandbox.create_reader_sql(name, password, superuser=self.superuser):
                self._admin_run(statement)
        except DatabaseError:
            self.drop_env_database(name)
            raise
        return name, password

    def drop_env_database(self, name: str) -> None:
        """Drop an env database and its reader."""
        self.drop_database(name)
        self._admin_run(_pgsandbox.drop_reader_sql(name))

    def drop_database(self, name: str) -> None:
        self._admin_run(pgsql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(pgsql.Identifier(name)))

    def _admin_run(
        self, statement: pgsql.SQL | pgsql.Composed, params: tuple[Any, ...] = ()
    ) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                if self._admin.closed or self._admin.broken:
                    self._admin = connect(self.dsn, application_name="rehearsal-env admin")
                cur = self._admin.execute(statement, params)
            except psycopg.Error as exc:
                raise DatabaseError(
                    f"PostgreSQL at {self.dsn!r} refused {statement.as_string(None)}: {exc}") from exc
            return cur.fetchall() if cur.description else []

    # -- templates -----------------------------------------------------------
    def template(self, spec: DatabaseSpec) -> str:
        """The name of ``spec``'s template database, built on first use."""
        name = template_name(spec)
        if name in self._templates:
            return name
        exists = self._admin_run(pgsql.SQL("SELECT 1 FROM pg_database WHERE datname = %s"), (name,))
        if not exists:
            self._build_template(spec, name)
        self._templates[name] = name
        return name

    def _build_template(self, spec: DatabaseSpec, name: str) -> None:
        building = f"{name}_b{os.getpid()}"
        self.drop_database(building)
        self._admin_run(pgsql.SQL(
            "CREATE DATABASE {} TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'"
        ).format(pgsql.Identifier(building)))
        try:
            with connect(self.db_dsn(building), application_name="rehearsal-env template") as conn:
                self._fill(conn, spec)
                conn.execute("VACUUM (FREEZE, ANALYZE)")
        except (psycopg.Error, ValueError) as exc:
            self.drop_database(building)
            raise DatabaseError(
                f"could not build the PostgreSQL template of {spec.name!r}: {exc}") from exc
        try:
            self._admin_run(pgsql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(pgsql.Identifier(building)))
            self._admin_run(pgsql.SQL("ALTER DATABASE {} RENAME TO {}").format(
                pgsql.Identifier(building), pgsql.Identifier(name)))
        except DatabaseError:
            self.drop_database(building)  # another process finished the same template first
            if not self._admin_run(pgsql.SQL("SELECT 1 FROM pg_database WHERE datname = %s"), (name,)):
                raise
        if self.private:
            stale = self._admin_run(
                pgsql.SQL("SELECT datname FROM pg_database WHERE datname LIKE %s AND datname <> %s"),
                (f"{_TPL_PREFIX}{_slug(spec.name)}\\_%", name),
            )
            for (old,) in stale:
                if re.fullmatch(rf"{_TPL_PREFIX}{_slug(spec.name)}_[0-9a-f]{{16}}", old):
                    self.drop_database(old)
                    self._templates.pop(old, None)  # dropped: a later env of that spec builds it again

    def _fill(self, conn: psycopg.Connection[Any], spec: DatabaseSpec) -> None:
        rows = spec.seed_rows()
        sequences: dict[str, str] = {}
        max_ids: dict[str, int | None] = {}
        with conn.transaction():
            for table in spec.tables:
                for statement in create_table(table, "postgres"):
                    conn.execute(statement)
            for table in spec.tables:
                data = rows.get(table.name, ())
                cols = ", ".join(table.column_names)
                with conn.cursor().copy(f"COPY {table.name} ({cols}) FROM STDIN") as copy:
                    for row in data:
                        copy.write_row([int(v) if v.__class__ is bool else v for v in row])
                (seq,) = conn.execute("SELECT pg_get_serial_sequence(%s, %s)",
                                      (table.name, table.primary_key)).fetchone() or (None,)
                if seq is None:
                    raise ValueError(f"table {table.name!r} has no identity sequence on {table.primary_key}")
                sequences[table.name] = seq
                top = conn.execute(f"SELECT max({table.primary_key}) FROM {table.name}").fetchone()
                max_ids[table.name] = top[0] if top else None
                conn.execute(_pgreset.seed_sequence_sql(table, seq, max_ids[table.name]))
            for statement in _pgreset.install_sql(spec.tables, sequences, max_ids):
                conn.execute(statement)
            for statement in _pgcompat.install_sql(CHECK_ROLE):
                conn.execute(statement)
            for statement in _pgsandbox.template_sql():
                conn.execute(statement)

    # -- setup ---------------------------------------------------------------
    def _ensure_check_role(self) -> None:
        try:
            with self._lock:
                self._admin.execute(_pgsandbox.ensure_group_sql())
                (superuser,) = self._admin.execute(
                    "SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone() or (False,)
                self.superuser = bool(superuser)
        except psycopg.Error as exc:
            raise DatabaseError(
                f"PostgreSQL at {self.dsn!r}: could not create the readers' role {CHECK_ROLE!r} ({exc}). "
                "The backend needs a user with CREATEDB and CREATEROLE (or a superuser)"
            ) from exc

    def _drop_leftovers(self) -> None:
        """Env databases and half-built templates of processes that died (own private server only)."""
        names = self._admin_run(
            pgsql.SQL("SELECT datname FROM pg_database WHERE datname LIKE %s"), ("rehearsal\\_%",))
        roles = self._admin_run(
            pgsql.SQL("SELECT rolname FROM pg_roles WHERE rolname LIKE %s"), (f"{_ENV_PREFIX}%",))
        for (name,) in names + roles:
            match = re.fullmatch(rf"{_ENV_PREFIX}(\d+)_\d+|{_TPL_PREFIX}\w+_b(\d+)", name)
            pid = match and int(match.group(1) or match.group(2))
            if pid and (pid == os.getpid() or not pid_alive(pid)):
                self.drop_env_database(name) if name.startswith(_ENV_PREFIX) else self.drop_database(name)

    def close(self) -> None:
        with self._lock:
            self._admin.close()


_CLUSTERS: dict[str, Cluster] = {}
_CLUSTERS_LOCK = threading.Lock()


def cluster(dsn: str, *, private: bool) -> Cluster:
    """The process's :class:`Cluster` for ``dsn`` (one admin connection per server)."""
    with _CLUSTERS_LOCK:
        found = _CLUSTERS.get(dsn)
        if found is None or found._admin.closed:
            found = _CLUSTERS[dsn] = Cluster(dsn, private=private)
        return found


def forget(dsn: str) -> None:
    """Close and forget the :class:`Cluster` of ``dsn`` (before its server stops)."""
    with _CLUSTERS_LOCK:
        found = _CLUSTERS.pop(dsn, None)
    if found is not None:
        found.close()
