"""What the status (p4sec.ipsec.status) reads, without holding the controller's lock: the store on a connection of
its own (`StoreReader`) and the SA counters on the switches (`Counters`)."""
import concurrent.futures
import sqlite3
import threading

from p4sec.ipsec import gateway as gwp

# the program's per-SA drop reasons: sa_counters[slot * 16 + status] (p4include/p4sec.p4, programs/ipsec_gateway.p4)
DROP_REASONS = {1: "no_sa", 2: "truncated", 3: "wrong_spi", 4: "icv_fail", 5: "bad_padding", 6: "bad_next_header", 7: "replay",
                8: "too_old", 9: "seq_overflow", 10: "sa_expired", 11: "bad_inner", 12: "selector_mismatch", 13: "wrong_encap"}


class StoreReader:
    """The controller's store, read only, on a connection of its own (a SQLite file or PostgreSQL), so that the
    status never waits for the controller nor makes it wait; an in-memory SQLite store has no other connection: it
    is read on the controller's, under its lock. Keeps a running count of renewals and failed renewals per tunnel
    from the event log (each call reads only the events since the last)."""

    def __init__(self, svc):
        cfg = svc.cfg
        self.shared, self.lock = None, threading.Lock()
        pg = (cfg.get("store") or {}).get("postgres")
        if pg:
            from p4sec.ipsec.ha import PgDb
            self.db, self.id = PgDb(pg), "id"
        elif cfg.get("db", ":memory:") != ":memory:":
            self.db, self.id = sqlite3.connect(cfg["db"], check_same_thread=False), "rowid"
            self.db.execute("pragma query_only = 1")
        else:
            self.db, self.id, self.shared = svc.ctl.db, "rowid", svc.ctl.lock
        self.renewals, self.last_event = {}, 0

    def query(self, sql, args=()):
        with self.shared or self.lock:
            return self.db.execute(sql.replace("{id}", self.id), args).fetchall()

    def renewal_totals(self):
        """{tunnel: [renewals, failed renewals]} recorded in the event log so far."""
        rows = self.query("select {id}, tunnel, what from event where {id} > ? and what like ? order by {id}", (self.last_event, "renew %"))
        for i, tunnel, what in rows:
            self.renewals.setdefault(tunnel, [0, 0])[1 if "failed" in what else 0] += 1
            self.last_event = max(self.last_event, i)
        return self.renewals

    def events(self, name, n):
        """The last n events of a tunnel or gateway, newest first: [(t, what)]."""
        return self.query("select t, what from event where tunnel = ? order by {id} desc limit ?", (name, n))

    def close(self):
        if self.shared is None:
            self.db.close()


class Counters:
    """Reads SA counters from the switches on a small pool of its own.

    Drops are counted by the program per SA slot, and a slot serves one SA after another: an SA's drops are what
    its slot counted since this process first saw the SA in it (the counts then are its baseline)."""

    def __init__(self, workers=4):
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="p4sec-status")
        self.baselines = {}     # (gateway, slot) -> (spi, {reason: packets} when first seen)
        self.lock = threading.Lock()

    def stats(self, reads):
        """reads: {key: (switch, slot)} -> {key: the SA's sa_stats dict, or None if it could not be read}."""
        def one(sw, slot):
            try:
                st = gwp.sa_stats(sw, slot)
                return st if isinstance(st, dict) else None
            except Exception:
                return None
        futs = {k: self.pool.submit(one, sw, slot) for k, (sw, slot) in reads.items()}
        return {k: f.result() for k, f in futs.items()}

    def drops(self, slots):
        """slots: {gateway name: (switch, {slot: spi})} -> {(gateway, slot): {reason: packets since first seen}}
        (one Read per gateway; a gateway that does not answer is left out)."""
        def one(sw, by_slot):
            try:
                return sw.counter_cells(gwp.SA_COUNTERS, [slot * 16 + r for slot in by_slot for r in DROP_REASONS])
            except Exception:
                return None
        futs = {g: self.pool.submit(one, sw, by_slot) for g, (sw, by_slot) in slots.items()}
        out = {}
        with self.lock:
            for g, f in futs.items():
                cells = f.result()
                if cells is None:
                    continue
                for slot, spi in slots[g][1].items():
                    now = {name: cells.get(slot * 16 + r, (0, 0))[0] for r, name in DROP_REASONS.items()}
                    seen = self.baselines.get((g, slot))
                    if seen is None or seen[0] != spi:
                        seen = self.baselines[(g, slot)] = (spi, now)
                    out[(g, slot)] = {k: v - seen[1][k] for k, v in now.items() if v > seen[1][k]}
        return out

    def close(self):
        self.pool.shutdown(wait=False)
