"""A written SQLite session's copy of the snapshot, copied on write by page: the same bytes as a deserialized copy."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import rehearsal_env.backends._sqlitepages as pages
from rehearsal_env import load_world
from rehearsal_env.backends import open_database

WRITES = [
    "INSERT INTO ticket_messages (ticket_id, author, body, created_at) VALUES (1, 'agent', 'x', 'y')",
    "UPDATE orders SET status = 'cancelled' WHERE id = 5",
    "DELETE FROM ticket_messages WHERE id = 3",
]


def _require_pages() -> None:
    if not pages.available():
        if os.environ.get("REHEARSAL_REQUIRE_SQLITE_PAGES") == "1":
            pytest.fail("copy on write by page is not available here (CPython on Linux with memfd_create needed), "
                        "and REHEARSAL_REQUIRE_SQLITE_PAGES=1 requires it")
        pytest.skip("copy on write by page is not available in this process (CPython on Linux with memfd_create "
                    "needed); sessions deserialize the snapshot instead")


def _bytes_after_writes(db: object) -> bytes:
    with db.transaction():  # type: ignore[attr-defined]
        for sql in WRITES:
            db.execute(sql)  # type: ignore[attr-defined]
    return bytes(db._conn.serialize())  # type: ignore[attr-defined]  # the copy's whole database file


def test_a_copy_by_page_holds_the_same_bytes_as_a_deserialized_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    _require_pages()
    world = load_world("shop")
    by_page = open_database(world)
    mapped = _bytes_after_writes(by_page)
    assert by_page._pages is not None  # type: ignore[attr-defined]
    copied_db = open_database(world)
    monkeypatch.setattr(copied_db._shared, "pages", lambda: None)  # type: ignore[attr-defined]
    copied = _bytes_after_writes(copied_db)
    assert copied_db._pages is None  # type: ignore[attr-defined]
    assert mapped == copied
    by_page.close()
    copied_db.close()


def test_copies_by_page_are_private_reset_and_grow() -> None:
    _require_pages()
    world = load_world("shop")
    a, b = open_database(world), open_database(world)
    with a.transaction():
        a.execute("UPDATE orders SET status = 'lost' WHERE id = 1")
    with b.transaction():
        b.execute("UPDATE orders SET status = 'found' WHERE id = 1")
    assert a.query("SELECT status FROM orders WHERE id = 1") == [("lost",)]
    assert b.query("SELECT status FROM orders WHERE id = 1") == [("found",)]
    with a.transaction():  # far past the snapshot's size: the database grows into the mapping
        a.execute("WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < 20000) "
                  "INSERT INTO ticket_messages (ticket_id, author, body, created_at) "
                  "SELECT 1, 'agent', printf('%.400c', 'x'), 'y' FROM k")
    assert a.query("SELECT COUNT(*) FROM ticket_messages WHERE body LIKE 'xxx%'")[0][0] == 20000
    a.reset()
    assert not a.private  # type: ignore[attr-defined]
    original = a.query("SELECT status FROM orders WHERE id = 1")
    with a.transaction():  # the next copy on the kept connection starts from the snapshot again
        a.execute("UPDATE orders SET total_cents = total_cents WHERE id = 2")
    assert a.query("SELECT status FROM orders WHERE id = 1") == original
    assert a.query("SELECT COUNT(*) FROM ticket_messages WHERE body LIKE 'xxx%'")[0][0] == 0
    assert b.query("SELECT status FROM orders WHERE id = 1") == [("found",)]
    a.close()
    b.close()


def test_without_page_copies_sessions_deserialize_the_snapshot(tmp_path: Path) -> None:
    script = tmp_path / "probe.py"
    script.write_text(
        "import rehearsal_env.backends._sqlitepages as p\n"
        "from rehearsal_env import load_world\n"
        "from rehearsal_env.backends import open_database\n"
        "db = open_database(load_world('shop'))\n"
        "with db.transaction():\n"
        "    db.execute(\"UPDATE orders SET status = 'x' WHERE id = 1\")\n"
        "print(p.available(), db._pages is None, db.query('SELECT status FROM orders WHERE id = 1'))\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "REHEARSAL_SQLITE_PAGE_COPY": "0"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True", "[('x',)]"]


def test_a_closed_connection_is_never_given_unmapped_pages() -> None:
    _require_pages()
    world = load_world("shop")
    db = open_database(world)
    with db.transaction():
        db.execute("UPDATE orders SET status = 'x' WHERE id = 1")
    copy = db._pages  # type: ignore[attr-defined]
    assert copy is not None and copy.mapping is not None
    db.close()  # detaches, then unmaps
    assert copy.mapping is None
    with pytest.raises(sqlite3.ProgrammingError):
        copy.conn.execute("SELECT 1")
