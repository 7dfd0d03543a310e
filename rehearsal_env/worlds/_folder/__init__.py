"""A world from a folder: ``world.toml`` (tables, seed data, roles, policies, tools) and ``scenarios/*.toml``.

``world.toml``::

    name = "notes"                       # the world's name
    description = "..."
    data_anchor = 2025-06-30             # the frozen day (the clock reads it at noon)
    seed = 1
    suite_version = "1"

    [[table]]                            # columns[0] is the integer primary key
    name = "notes"
    columns = [{ name = "id", type = "int" }, { name = "body" },
               { name = "author_id", type = "int", references = "users.id", nullable = true }]
    indexes = [["author_id"]]

    [schema]                             # or the application's own migrations, instead of [[table]]:
    sql = ["migrations/001_init.sql"]    # CREATE TABLE / CREATE INDEX, applied in order

    [data]
    sql = "seed.sql"                     # INSERT ... VALUES statements with literal values, or
    # generator = "data.py"              # a file defining rows(seed: int, anchor: date) -> {table: [tuple]},
                                         # run in a confined child process, never imported (see ._code)

    [[role]]   name, description, tools = [...]
    [[policy]] text, hard_rules = [...]  # names of hard-rule checks the scenarios use

    [[tool]]                             # kind = "read" | "write"; type = "sql" | "http"
    name = "add_note"
    kind = "write"
    type = "sql"
    description = "Add a note."
    sql = "INSERT INTO notes (body, created_at) VALUES (:body, :now) RETURNING id"   # or a list
    returns = ["id"]                     # the result's fields (default: the statement's own names)
    on_empty = "no note {note_id}"       # refuse when a SELECT/RETURNING gives no row
    [tool.args.body]                     # or [tool.parameters]: a whole JSON Schema object
    type = "string"
    description = "The note's text."

An ``sql`` tool runs its statements inside the tool call's transaction;
``:name`` binds an argument, ``:now`` the world's clock, ``:operation_id`` the
call's operation id. An ``http`` tool (``method``, ``path`` with ``{arg}``
templates, ``query`` and ``body``: which arguments go where, default the ones
not in the path, ``headers``, ``returns``) calls the application that the
sandbox runs (``--backend docker``), described by ``[application]``: ``folder``
(copied into the image), ``command``, ``port``, ``env`` (``{dsn}``,
``{email_url}``, ``{payments_url}``, ``{now}`` are filled in), ``health`` (a
GET answering 200 once it is up), ``probe`` (a GET whose answer must be the
same after every reset) and ``reset_hook`` (``"POST /path"`` the sandbox calls
after each database restore; leave it out when the application keeps no state
outside its database). A 4xx answer is the application refusing (the agent
sees the error); a 5xx answer or no answer is the environment failing.

Errors name the file, the line and the fix.
"""

from ._app import Application, ApplicationLimits, ApplicationSpec, application_of, backend_for
from ._code import CHILD_ENV
from ._load import (
    SHIPPED,
    add_world_folder,
    added_file,
    folder_registry_problems,
    folder_world_json,
    folder_worlds,
    is_world_folder,
    load_world_folder,
)
from ._source import WorldFolderError

__all__ = [
    "CHILD_ENV",
    "SHIPPED",
    "Application",
    "ApplicationLimits",
    "ApplicationSpec",
    "WorldFolderError",
    "add_world_folder",
    "added_file",
    "application_of",
    "backend_for",
    "folder_registry_problems",
    "folder_world_json",
    "folder_worlds",
    "is_world_folder",
    "load_world_folder",
]
