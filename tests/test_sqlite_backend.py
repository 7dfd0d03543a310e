"""The embedded backend: snapshot restore, digests, and changes against the snapshot."""

from __future__ import annotations

import pytest

import rehearsal_env.backends.sqlite as sqlite_backend
from rehearsal_env import load_world
from rehearsal_env.backends import changes, digest, open_database


def test_reset_restores_rows_and_the_next_id_after_committed_writes() -> None:
    world = load_world("shop")
    db = open_database(world)
    snapshot = digest(db)
    next_id = db.query("SELECT MAX(id) + 1 FROM ticket_messages")[0][0]
    with db.transaction():
        db.execute("INSERT INTO ticket_messages (ticket_id, author, body, created_at) VALUES (1, 'agent', 'x', 'y')")
        db.execute("UPDATE orders SET status = 'cancelled' WHERE id = 5")
        db.execute("DELETE FROM ticket_messages WHERE id = 3")
        db.execute("INSERT INTO emails (customer_id, to_address, subject, body, provider_ref, sent_at) "
                   "VALUES (1, 'a', 'b', 'c', 'd', 'e')")
    diff = changes(db, world.seed_rows())
    assert [r[0] for r in diff["ticket_messages"]["inserted"]] == [next_id]
    assert [r[0] for r in diff["ticket_messages"]["deleted"]] == [3]
    assert [r[0] for r in diff["orders"]["updated"]] == [5]
    assert len(diff["emails"]["inserted"]) == 1
    db.reset()
    assert digest(db) == snapshot
    assert changes(db, world.seed_rows()) == {}
    with db.transaction():
        (new_id,) = db.execute("INSERT INTO ticket_messages (ticket_id, author, body, created_at) "
                               "VALUES (1, 'agent', 'x', 'y') RETURNING id")[0]
    assert new_id == next_id
    db.close()


def test_envs_have_private_databases() -> None:
    world = load_world("shop")
    a, b = open_database(world), open_database(world)
    with a.transaction():
        a.execute("DELETE FROM ticket_messages WHERE id = 1")
    assert b.check_value("SELECT COUNT(*) FROM ticket_messages WHERE id = 1") == 1
    a.close()
    b.close()


def test_the_snapshot_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_backend, "SNAPSHOT_CACHE_BYTES", 1)  # every snapshot is over it: one is kept
    monkeypatch.setattr(sqlite_backend, "_SNAPSHOTS", type(sqlite_backend._SNAPSHOTS)())  # not what others cached
    shop, analytics = load_world("shop"), load_world("analytics")
    first = sqlite_backend.build_snapshot(shop)
    sqlite_backend.build_snapshot(analytics)
    assert list(k[0] for k in sqlite_backend._SNAPSHOTS) == ["analytics"]  # the older one went
    assert sqlite_backend.build_snapshot(shop) == first  # rebuilt, the same bytes
    assert list(k[0] for k in sqlite_backend._SNAPSHOTS) == ["shop"]
