"""The database roles of the sandbox's own containers: the application's and the emulator's.

The PostgreSQL backend builds the env database as the server's superuser, and its check role (the
env database's reader, a member of ``rehearsal_checker``) only reads. The application must write, but
world code is untrusted, so it logs in as :data:`APP_ROLE`, which:

* is not a superuser, cannot create databases or roles, replicate or bypass row security, and is a
  member of no role (so neither ``pg_execute_server_program``, ``pg_read_server_files`` nor the
  check role's group): ``COPY ... TO PROGRAM``, server files and ``ALTER ROLE`` are refused;
* owns the world's tables in ``public`` (their sequences with them) and nothing else: no ``CREATE``
  on any schema or database, no ``TEMP``, ``CONNECT`` on the env database only (``PUBLIC`` loses
  ``CONNECT`` on ``postgres`` and ``template1``);
* may insert into the reset log (``rehearsal.touched``), because the backend's row triggers run as
  the writer; it cannot read the snapshot tables or call the restore (the schema's other objects are
  not granted).

The emulator (ours, but in the same untrusted network) logs in as :data:`EMULATOR_ROLE`: ``SELECT``
and ``INSERT`` on ``service_requests`` (its record of requests), nothing else.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence

from psycopg import sql as pgsql

APP_ROLE = "rehearsal_app"
"""The application's login role."""
EMULATOR_ROLE = "rehearsal_emulator"
"""The emulator's login role."""
SERVICE_TABLE = "service_requests"
_LOGIN = ("LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS "
          "CONNECTION LIMIT {} PASSWORD {}")


def new_password() -> str:
    return secrets.token_hex(16)


def server_sql(dbname: str, app_password: str, emulator_password: str) -> list[pgsql.Composed]:
    """Statements run on the server (any database) by its superuser: the two roles and who may connect where."""
    env = pgsql.Identifier(dbname)
    out = []
    for role, password, limit in ((APP_ROLE, app_password, 64), (EMULATOR_ROLE, emulator_password, 8)):
        out.append(pgsql.SQL("CREATE ROLE {} " + _LOGIN).format(pgsql.Identifier(role), pgsql.Literal(limit),
                                                                 pgsql.Literal(password)))
        out.append(pgsql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(env, pgsql.Identifier(role)))
    for other in ("postgres", "template1"):
        out.append(pgsql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(pgsql.Identifier(other)))
    return out


def database_sql(tables: Sequence[str], *, service_key: str | None) -> list[pgsql.Composed]:
    """Statements run inside the env database by the superuser: what each role owns or may do there
    (``service_key``: the primary key of the world's ``service_requests`` table, None without one)."""
    app, emulator = pgsql.Identifier(APP_ROLE), pgsql.Identifier(EMULATOR_ROLE)
    out = [pgsql.SQL("GRANT USAGE ON SCHEMA public TO {}, {}").format(app, emulator),
           pgsql.SQL("GRANT USAGE ON SCHEMA rehearsal TO {}, {}").format(app, emulator),
           pgsql.SQL("GRANT INSERT ON rehearsal.touched TO {}, {}").format(app, emulator)]
    for table in tables:
        out.append(pgsql.SQL("ALTER TABLE public.{} OWNER TO {}").format(pgsql.Identifier(table), app))
    if service_key is not None:
        out.append(pgsql.SQL("GRANT SELECT, INSERT ON public.{} TO {}").format(pgsql.Identifier(SERVICE_TABLE),
                                                                               emulator))
        out.append(pgsql.SQL(
            "DO $$ DECLARE s text := pg_get_serial_sequence({}, {}); BEGIN "
            "IF s IS NOT NULL THEN EXECUTE format('GRANT USAGE ON SEQUENCE %s TO {}', s); END IF; END $$"
        ).format(pgsql.Literal(f"public.{SERVICE_TABLE}"), pgsql.Literal(service_key), emulator))
    return out
