"""The reader: the unprivileged PostgreSQL login that runs checks and agents' SQL.

Every env database gets its own login role of the same name (``rehearsal_env_<pid>_<n>``),
created by the admin connection next to the database and dropped with it. The role:

- logs in itself (no ``SET ROLE`` on a privileged session: no text can become the
  admin's), is not a superuser, cannot create databases or roles, replicate or bypass
  row security, and is a member only of :data:`READER_GROUP`, which may only ``SELECT``
  the world's tables (granted in the template) and use the SQLite-compatible functions;
- has ``CONNECT`` on its own database only (``PUBLIC`` loses ``CONNECT`` and ``TEMP`` on
  every database the backend creates; on the process's own server ``pg_hba.conf`` also
  lets a reader log in only to the database of its own name, :data:`HBA_RULES`);
- starts every session ``default_transaction_read_only``, with a ``statement_timeout``,
  an ``idle_in_transaction_session_timeout``, a small ``work_mem`` and (where the admin
  may set it) a ``temp_file_limit``;
- cannot run ``set_config``, ``pg_terminate_backend`` or ``pg_cancel_backend``, nor read the
  catalogs that name other databases, roles or sessions (:data:`HIDDEN_CATALOGS`), all
  revoked from ``PUBLIC`` in the template. Server files, programs and large objects are
  superuser-only already; ``dblink`` is not installed and the reader cannot install it.
"""

from __future__ import annotations

import secrets

from psycopg import sql as pgsql

READER_GROUP = "rehearsal_checker"
"""A role without login holding the readers' privileges (SELECT on the world's tables)."""
STATEMENT_TIMEOUT_MS = 5000
"""The readers' default ``statement_timeout`` (each read sets its own too)."""
WORK_MEM = "4MB"
TEMP_FILE_LIMIT = "256MB"
HIDDEN_CATALOGS = (
    "pg_database", "pg_roles", "pg_user", "pg_auth_members", "pg_shdescription", "pg_stat_activity",
    "pg_stat_database", "pg_stat_database_conflicts", "pg_locks", "pg_prepared_xacts", "pg_stat_ssl",
    "pg_stat_gssapi", "pg_db_role_setting", "pg_tablespace", "pg_stat_replication", "pg_replication_slots",
    "pg_settings", "pg_stat_subscription",
)
"""Catalogs that would show a reader other databases, roles or sessions of the server."""
REVOKED_FUNCTIONS = (
    "set_config(text, text, boolean)", "pg_terminate_backend(integer, bigint)", "pg_cancel_backend(integer)",
)
HBA_RULES = f"""# Written by rehearsal-env at every start: readers log in only to the database of their own name.
local   sameuser   +{READER_GROUP}   trust
local   all        +{READER_GROUP}   reject
local   all        all               trust
"""
"""``pg_hba.conf`` of the process's own server (Unix socket only, as the server listens)."""


def new_password() -> str:
    return secrets.token_urlsafe(24)


def create_reader_sql(name: str, password: str, *, superuser: bool) -> list[pgsql.Composed]:
    """Statements (run by the admin) creating the login role ``name`` for database ``name``."""
    role, db = pgsql.Identifier(name), pgsql.Identifier(name)
    out = [
        pgsql.SQL("CREATE ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE INHERIT NOREPLICATION NOBYPASSRLS "
                  "CONNECTION LIMIT 4 PASSWORD {} IN ROLE {}").format(
            role, pgsql.Literal(password), pgsql.Identifier(READER_GROUP)),
        pgsql.SQL("ALTER ROLE {} SET default_transaction_read_only = on").format(role),
        pgsql.SQL("ALTER ROLE {} SET statement_timeout = {}").format(role, pgsql.Literal(STATEMENT_TIMEOUT_MS)),
        pgsql.SQL("ALTER ROLE {} SET idle_in_transaction_session_timeout = '10s'").format(role),
        pgsql.SQL("ALTER ROLE {} SET work_mem = {}").format(role, pgsql.Literal(WORK_MEM)),
        pgsql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(db),
        pgsql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(db, role),
    ]
    if superuser:
        out.append(pgsql.SQL("ALTER ROLE {} SET temp_file_limit = {}").format(role, pgsql.Literal(TEMP_FILE_LIMIT)))
    return out


def drop_reader_sql(name: str) -> pgsql.Composed:
    return pgsql.SQL("DROP ROLE IF EXISTS {}").format(pgsql.Identifier(name))


def ensure_group_sql() -> str:
    """Create :data:`READER_GROUP` if it does not exist (safe when several processes race)."""
    return f"""DO $$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{READER_GROUP}') THEN
    CREATE ROLE {READER_GROUP} NOLOGIN NOINHERIT;
  END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
END $$"""


def template_sql() -> list[str]:
    """Statements run inside a template database (its clones inherit them): the readers' view of it."""
    out = [
        "REVOKE ALL ON SCHEMA public FROM PUBLIC",
        f"GRANT USAGE ON SCHEMA public TO {READER_GROUP}",
        f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {READER_GROUP}",
    ]
    objects = [f"TABLE pg_catalog.{name}" for name in HIDDEN_CATALOGS]
    objects += [f"FUNCTION pg_catalog.{signature}" for signature in REVOKED_FUNCTIONS]
    for obj in objects:
        what = "SELECT" if obj.startswith("TABLE") else "EXECUTE"
        # Missing objects (other server versions) and a non-superuser admin are skipped, not fatal.
        out.append(f"DO $$ BEGIN REVOKE {what} ON {obj} FROM PUBLIC; "
                   "EXCEPTION WHEN undefined_table OR undefined_function OR insufficient_privilege THEN NULL; END $$")
    return out
