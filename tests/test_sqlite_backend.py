"""The embedded backend: snapshot restore, digests, and changes against the snapshot."""

from __future__ import annotations

import threading

import pytest

import rehearsal_env.backends._sqlitesnapshot as snapshots
import rehearsal_env.backends.sqlite as sqlite_backend
from rehearsal_env import load_world
from rehearsal_env.backends import ApplicationError, DatabaseError, changes, digest, open_database


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
    monkeypatch.setattr(snapshots, "SNAPSHOT_CACHE_BYTES", 1)  # every snapshot is over it: one is kept
    monkeypatch.setattr(snapshots, "_SNAPSHOTS", type(snapshots._SNAPSHOTS)())  # not what others cached
    shop, analytics = load_world("shop"), load_world("analytics")
    first = snapshots.build_snapshot(shop)
    snapshots.build_snapshot(analytics)
    assert list(k[0] for k in snapshots._SNAPSHOTS) == ["analytics"]  # the older one went
    assert snapshots.build_snapshot(shop) == first  # rebuilt, the same bytes
    assert list(k[0] for k in snapshots._SNAPSHOTS) == ["shop"]


# -- sharing the snapshot until the first write (issue 24 §4) ----------------------------------------------------
def _rss_mb() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024


def test_databases_that_only_read_share_one_snapshot_until_their_first_write() -> None:
    world = load_world("shop")
    size_mb = len(snapshots.build_snapshot(world)) / 2**20
    opened = _rss_mb()
    dbs = [open_database(world) for _ in range(200)]
    for db in dbs:  # every kind of read: the application's, a check, an agent's query, the touched log
        assert len(db.query("SELECT status FROM orders WHERE id = 5")) == 1
        assert db.check_value("SELECT COUNT(*) FROM ticket_messages WHERE id = 1") == 1
        assert db.read_query("SELECT id FROM orders ORDER BY id LIMIT 2", max_rows=5, timeout_s=5.0)[1] == [(1,), (2,)]
        assert db.touched() == {}
    assert not any(db.private for db in dbs)  # type: ignore[attr-defined]
    grown = _rss_mb() - opened
    assert grown < 200 * size_mb / 10, f"200 reading databases grew RSS by {grown:.0f} MB ({size_mb:.1f} MB a copy)"
    writer = dbs[7]
    status = writer.query("SELECT status FROM orders WHERE id = 5")[0][0]
    with writer.transaction():
        assert writer.query("SELECT COUNT(*) FROM ticket_messages WHERE id = 1") == [(1,)]  # still shared here
        writer.execute("DELETE FROM ticket_messages WHERE id = 1")
        writer.execute("UPDATE orders SET status = 'x-test' WHERE id = 5")
    assert [i for i, db in enumerate(dbs) if db.private] == [7]  # type: ignore[attr-defined]
    # the writer reads its own copy through every path; the others still read the snapshot
    assert writer.query("SELECT status FROM orders WHERE id = 5") == [("x-test",)]
    assert writer.check_value("SELECT COUNT(*) FROM ticket_messages WHERE id = 1") == 0
    assert writer.read_query("SELECT status FROM orders WHERE id = 5", max_rows=5, timeout_s=5.0)[1] == [("x-test",)]
    assert writer.touched() == {"ticket_messages": {1}, "orders": {5}}
    assert dbs[8].query("SELECT status FROM orders WHERE id = 5") == [(status,)]
    assert dbs[8].check_value("SELECT COUNT(*) FROM ticket_messages WHERE id = 1") == 1
    writer.reset()  # back to sharing, in the snapshot's exact state
    assert not writer.private and writer.touched() == {}  # type: ignore[attr-defined]
    assert digest(writer) == digest(dbs[8])
    for db in dbs:
        db.close()


def test_shared_and_private_reads_are_the_same_rows_in_the_same_order(monkeypatch: pytest.MonkeyPatch) -> None:
    world = load_world("shop")
    shared = open_database(world)
    monkeypatch.setattr(sqlite_backend, "SHARE_SNAPSHOTS", False)  # the old way: a copy from the start
    private = open_database(world)
    assert private.private and not shared.private  # type: ignore[attr-defined]
    for sql in ("SELECT * FROM orders", "SELECT customer_id, COUNT(*) FROM orders GROUP BY customer_id",
                "SELECT * FROM ticket_messages WHERE body LIKE '%a%'"):  # no ORDER BY: the b-trees' order
        assert shared.query(sql) == private.query(sql)
        assert shared.read_query(sql, max_rows=50, timeout_s=5.0) == private.read_query(sql, max_rows=50, timeout_s=5.0)
    private.reset()
    assert private.private  # type: ignore[attr-defined]
    shared.close()
    private.close()


def test_a_rolled_back_first_write_returns_to_sharing_and_a_pragma_never_reaches_the_shared_reader() -> None:
    world = load_world("shop")
    db, other = open_database(world), open_database(world)
    with pytest.raises(RuntimeError), db.transaction():
        db.execute("DELETE FROM ticket_messages WHERE id = 1")
        raise RuntimeError("the tool failed after writing")
    assert not db.private and db.check_value("SELECT COUNT(*) FROM ticket_messages WHERE id = 1") == 1  # type: ignore[attr-defined]
    db.query("PRAGMA cache_size = 7")  # more than reading: runs on the database's own copy
    assert db.private and db.query("PRAGMA cache_size") == [(7,)]  # type: ignore[attr-defined]
    assert other.query("SELECT 1") == [(1,)] and not other.private  # type: ignore[attr-defined]
    with pytest.raises(DatabaseError, match="within a transaction"), other.transaction(), other.transaction():
        pass
    db.close()
    other.close()
    with pytest.raises(DatabaseError, match="gone"):
        other.query("SELECT 1")  # a closed database stays closed, shared or not
    with pytest.raises(DatabaseError):
        other.reset()


def test_a_slow_query_on_the_shared_snapshot_never_holds_up_another_thread_s_reads() -> None:
    world = load_world("shop")
    slow, quick = open_database(world), open_database(world)
    done = threading.Event()
    errors: list[str] = []

    def runaway() -> None:
        try:
            slow.read_query("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT COUNT(*) FROM n",
                            max_rows=1, timeout_s=1.5)
        except ApplicationError as exc:
            errors.append(str(exc))
        finally:
            done.set()

    thread = threading.Thread(target=runaway)
    thread.start()
    reads = 0
    while not done.is_set():  # the same world's snapshot, read by this thread's own connection meanwhile
        assert quick.check_value("SELECT COUNT(*) FROM ticket_messages WHERE id = 1") == 1
        reads += 1
    thread.join()
    assert errors and "longer than 1.5s" in errors[0], errors
    assert reads >= 10, f"only {reads} reads while the other thread's query ran"
    assert not slow.private and not quick.private  # type: ignore[attr-defined]
    slow.close()
    quick.close()


def test_a_check_never_runs_a_statement_the_application_prepared() -> None:
    """Checks switch the connection's guard instead of setting an authorizer or toggling ``query_only`` (either
    would make every cached statement compile again); their statements are still each prepared under the
    read-only rule, however the application ran the same text before."""
    from rehearsal_env.checks import CheckRefused

    db = open_database(load_world("shop"))
    delete = "DELETE FROM ticket_messages WHERE id = 3"
    with db.transaction():
        db.execute(delete)  # the application's statement, prepared without a rule, now in the cache
        db.execute("INSERT INTO ticket_messages (id, ticket_id, author, body, created_at) "
                   "VALUES (3, 1, 'agent', 'x', 'y')")
    assert db.private
    with pytest.raises(CheckRefused):
        db._check(delete)  # the engine's layers alone (no parser): refused at prepare
    assert db.query("SELECT COUNT(*) FROM ticket_messages WHERE id = 3") == [(1,)]
    assert db._check("SELECT COUNT(*) FROM ticket_messages") > 0  # reading still reads
    db.close()
