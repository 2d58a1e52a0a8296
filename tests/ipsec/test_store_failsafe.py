"""The controller's store fails safe, in process and without root (issue 36): SQLite made full (its
`max_page_count`, the same SQLITE_FULL a full disk gives) or read-only (`query_only`) on demand. A failed commit leaves nothing of its transaction; the
connection is opened again after a backoff; a failed renewal stays pending and the tunnel reports `degraded`
(status, health, metrics) until the store works again; a retirement that failed is retried so no SA stays
`retiring`."""
import json
import time

import pytest

from p4sec.ipsec import store
from p4sec.ipsec.controller import IpsecController
from p4sec.ipsec.store import StoreError


class Disk:
    """An SQLite store whose size can be capped (full) and uncapped again; every connection obeys the cap."""

    def __init__(self, path):
        self.path, self.full, self.read_only = str(path), False, False
        self.opened = 0

    def open(self):
        import sqlite3
        self.opened += 1
        conn = sqlite3.connect(self.path, check_same_thread=False)
        conn.execute("pragma journal_mode = wal")
        pages = conn.execute("pragma page_count").fetchone()[0]
        conn.execute(f"pragma max_page_count = {pages if self.full else 1 << 30}")
        conn.execute(f"pragma query_only = {int(self.read_only)}")
        return conn

    def store(self):
        import sqlite3
        return store.FailSafe(self.open, (sqlite3.OperationalError, sqlite3.DatabaseError), "test store", (sqlite3.IntegrityError,))

    def fill(self, db):
        """Cap the store at its size (and the open connection too)."""
        self.full = True
        if db.conn is not None:
            pages = db.conn.execute("pragma page_count").fetchone()[0]
            db.conn.execute(f"pragma max_page_count = {pages}")

    def set_read_only(self, db, on):
        """The store read-only (SQLite's query_only: every write refused), or writable again."""
        self.read_only = on
        if db.conn is not None:
            db.conn.execute(f"pragma query_only = {int(on)}")

    def free(self, db):
        self.full = False
        if db.conn is not None:
            db.conn.execute("pragma max_page_count = 1073741824")


def test_failed_commit_rolls_back_and_reconnects_with_backoff(tmp_path):
    disk = Disk(tmp_path / "s.db")
    db = disk.store()
    db.execute("create table t (k text primary key, v text)")
    db.commit()
    disk.fill(db)
    with pytest.raises(StoreError) as e:
        for i in range(200):         # enough rows to need a new page
            db.execute("insert into t values (?, ?)", (f"k{i}", "x" * 200))
        db.commit()
    assert "database or disk is full" in str(e.value)
    ok, why = db.health()
    assert not ok and "database or disk is full" in why
    # the next use within the backoff is refused at once, without a new connection
    opened = disk.opened
    with pytest.raises(StoreError, match="next attempt in"):
        db.execute("select count(*) from t")
    assert disk.opened == opened
    disk.free(db)
    time.sleep(store.BACKOFF_MIN * 2.5)
    assert db.execute("select count(*) from t").fetchone()[0] == 0      # nothing of the failed transaction
    assert disk.opened == opened + 1
    db.execute("insert into t values ('a', 'b')")
    db.commit()
    assert db.health() == (True, "ok")
    # a caller's error (a duplicate key) rolls back too, is raised as itself and keeps the connection
    import sqlite3
    db.execute("insert into t values ('c', 'd')")
    with pytest.raises(sqlite3.IntegrityError):
        db.execute("insert into t values ('a', 'again')")
    assert db.execute("select count(*) from t").fetchone()[0] == 1 and disk.opened == opened + 1


def sa_row(ctl, spi, tunnel, state, src="A", dst="B"):
    cfg = {"tunnel": ["192.0.2.1", "198.51.100.1"]}
    ctl.db.execute("insert into sa values (?, ?, ?, ?, ?, ?, ?, ?, ?)", (spi, tunnel, src, dst, 0, 1, json.dumps(cfg), time.time(), state))


def wait(fn, timeout=5.0):
    end = time.time() + timeout
    while not fn():
        if time.time() > end:
            return False
        time.sleep(0.05)
    return True


def test_renewal_and_retirement_retried_tunnel_degraded_meanwhile(tmp_path):
    disk = Disk(tmp_path / "c.db")
    ctl = IpsecController(disk.store(), grace=0.1)
    try:
        ctl.db.execute("insert into tunnel values ('T', 'A', 'B', 'aes-gcm-128', '{}', '{}', ?, 'up')", (time.time(),))
        sa_row(ctl, 0x1111, "T", "active")
        sa_row(ctl, 0x2222, "T", "retiring", src="B", dst="A")
        ctl.db.commit()
        assert [t["state"] for t in ctl.tunnels()] == ["up"]
        disk.set_read_only(ctl.db, True)
        with pytest.raises(StoreError, match="readonly"):
            ctl.event("T", "refused")
        # a soft-lifetime event and a retirement while the store fails
        ctl.faults.renew_or_retry(0x1111, "soft lifetime on B")
        ctl._retire(0x2222)
        assert 0x1111 in ctl.faults.pending and 0x2222 in ctl.faults.retirements
        t = ctl.tunnels()[0]
        assert t["state"] == "degraded", t
        assert any("renewal of SA 0x00001111 failing" in w for w in t["degraded_by"]), t["degraded_by"]
        assert any("readonly" in w for w in t["degraded_by"]), t["degraded_by"]
        h = ctl.health()
        assert not h["ok"] and h["renewals_pending"] == 1 and "T" in h["degraded"], h
        m = ctl.metrics()
        assert "p4sec_controller_store_up 0" in m and "p4sec_controller_renewals_pending 1" in m and 'tunnels{state="degraded"} 1' in m, m
        time.sleep(1.0)
        assert 0x1111 in ctl.faults.pending, "a renewal was dropped while the store was still read-only"
        import sqlite3
        with sqlite3.connect(disk.path) as other:       # (the controller's own reads wait for the backoff)
            assert other.execute("select state from sa where spi = ?", (0x2222,)).fetchone()[0] == "retiring"
        disk.set_read_only(ctl.db, False)
        # the store works again: the retirement lands, the renewal is retried (this SA's gateways are not under
        # control here, so renew() finds nothing to do and the renewal is settled), the tunnel is up again
        assert wait(lambda: not ctl.faults.pending), ctl.faults.pending
        assert wait(lambda: ctl.db.execute("select state from sa where spi = ?", (0x2222,)).fetchone()[0] == "deleted"), \
            ctl.db.execute("select state from sa where spi = ?", (0x2222,)).fetchone()
        assert not ctl.faults.retirements
        # the retirement's record ends in a commit of its own, after the one that marked the SA deleted (read under
        # the controller's lock: never halfway through the retirement)
        assert wait(lambda: not ctl.intents()), ctl.intents()
        assert wait(lambda: ctl.tunnels()[0]["state"] == "up"), ctl.tunnels()
        assert ctl.health()["ok"] and "p4sec_controller_store_up 1" in ctl.metrics()
    finally:
        ctl.close()
