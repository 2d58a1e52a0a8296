"""What the status (p4sec.ipsec.status) reads, without holding the controller's lock: the store on a connection of
its own (`StoreReader`) and the SA counters on the switches (`Counters`)."""
import concurrent.futures
import threading
import time

from p4sec.ipsec import gateway as gwp
from p4sec.ipsec import store

# the program's per-SA drop reasons: sa_counters[slot * 16 + status] (p4include/p4sec.p4, programs/ipsec_gateway.p4);
# those a receiving SA's slot counts (decryption) and those a sending SA's slot counts (encryption)
DROP_REASONS = {1: "no_sa", 2: "truncated", 3: "wrong_spi", 4: "icv_fail", 5: "bad_padding", 6: "bad_next_header", 7: "replay",
                8: "too_old", 9: "seq_overflow", 10: "sa_expired", 11: "bad_inner", 12: "selector_mismatch", 13: "wrong_encap"}
IN_REASONS = (2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13)
OUT_REASONS = (9, 10)


class StoreReader:
    """The controller's store, read only, on a connection of its own (a SQLite file or PostgreSQL), so that the
    status never waits for the controller nor makes it wait; an in-memory SQLite store has no other connection: it
    is read on the controller's, under its lock. Its `records` (p4sec.ipsec.store.Records) read the store, each
    statement under the lock. Keeps a running count of renewals and failed renewals per tunnel from the event log
    (each call reads only the events since the last)."""

    def __init__(self, svc):
        cfg = svc.cfg
        self.shared, self.lock = None, threading.Lock()
        pg = (cfg.get("store") or {}).get("postgres")
        if pg:
            from p4sec.ipsec.ha import PgDb
            self.db, self.id = PgDb(pg), "id"
        elif cfg.get("db", ":memory:") != ":memory:":
            self.db, self.id = store.sqlite_reader(cfg["db"]), "rowid"
        else:
            self.db, self.id, self.shared = svc.ctl.db, "rowid", svc.ctl.lock
        self.records = store.Records(_Locked(self.db, self.shared or self.lock), self.id)
        self.renewals, self.last_event = {}, 0

    def renewal_totals(self):
        """{tunnel: [renewals, failed renewals]} recorded in the event log so far."""
        rows = self.records.events_since(self.last_event, "renew ")
        for i, tunnel, what in rows:
            self.renewals.setdefault(tunnel, [0, 0])[1 if "failed" in what else 0] += 1
            self.last_event = max(self.last_event, i)
        return self.renewals

    def events(self, name, n):
        """The last n events of a tunnel or gateway, newest first: [(t, what)]."""
        return self.records.last_events(name, n)

    def close(self):
        if self.shared is None:
            self.db.close()


class _Locked:
    """A connection whose statements run (and are read to the end) under a lock."""

    def __init__(self, db, lock):
        self.db, self.lock = db, lock

    def execute(self, sql, args=()):
        with self.lock:
            return _Rows(self.db.execute(sql, args).fetchall())


class _Rows:
    def __init__(self, rows):
        self.rows = rows

    def fetchone(self):
        return self.rows[0] if self.rows else None

    def fetchall(self):
        return self.rows


class Counters:
    """Reads SA counters from the switches on a small pool of its own, within a budget per snapshot: the SAs
    never read first, then those read longest ago; the others keep their last reading (with its time), so a large
    VPN's counters refresh over several snapshots at a bounded cost each (P4Runtime reads here are pure-Python
    protobuf: about 0.45 ms per `sa_stats` read and 0.15 ms per counter cell, measured with 100 tunnels).

    Drops are counted by the program per SA slot, and a slot serves one SA after another: an SA's drops are what
    its slot counted since this process first read it with the SA in it (the counts then are its baseline)."""

    def __init__(self, workers=4, stats_budget=256, drop_budget=1024):
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="p4sec-status")
        self.stats_budget, self.drop_budget = stats_budget, drop_budget
        self.lock = threading.Lock()
        self.stats_seen = {}        # spi -> (time read, {side: sa_stats dict or None})
        self.drops_seen = {}        # (gateway, slot) -> (time read, {reason: packets since the baseline})
        self.baselines = {}         # (gateway, slot) -> (spi, {reason: packets} when first read)

    @staticmethod
    def _due(units, seen, budget, cost):
        """The units to read now: never read first, then the longest ago, within the budget."""
        chosen, spent = [], 0
        for k in sorted(units, key=lambda k: seen[k][0] if k in seen else -1.0):
            if spent + cost(k) > budget and chosen:
                break
            chosen.append(k)
            spent += cost(k)
        return chosen

    def stats(self, units):
        """units: {spi: {side: (switch, slot)}} -> {spi: (time read, {side: the SA's sa_stats dict, or None if it
        could not be read})}: both sides of an SA are read together."""
        def one(sw, slot):
            try:
                st = gwp.sa_stats(sw, slot)
                return st if isinstance(st, dict) else None
            except Exception:
                return None
        with self.lock:
            due = self._due(units, self.stats_seen, self.stats_budget, lambda k: len(units[k]))
            futs = {(spi, side): self.pool.submit(one, sw, slot) for spi in due for side, (sw, slot) in units[spi].items()}
            now = time.time()
            for spi in due:
                self.stats_seen[spi] = (now, {side: futs[(spi, side)].result() for side in units[spi]})
            self.stats_seen = {k: v for k, v in self.stats_seen.items() if k in units}
            return dict(self.stats_seen)

    def drops(self, units):
        """units: {(gateway, slot): (switch, spi, [drop reason codes])} -> {(gateway, slot): (time read, {reason:
        packets since the baseline})} (one Read per gateway; a gateway that does not answer keeps its last reading)."""
        def one(sw, idx):
            try:
                return sw.counter_cells(gwp.SA_COUNTERS, idx)
            except Exception:
                return None
        with self.lock:
            due = self._due(units, self.drops_seen, self.drop_budget, lambda k: len(units[k][2]))
            by_gw = {}
            for g, slot in due:
                sw, _, reasons = units[(g, slot)]
                by_gw.setdefault(g, (sw, []))[1].extend(slot * 16 + r for r in reasons)
            futs = {g: self.pool.submit(one, sw, idx) for g, (sw, idx) in by_gw.items()}
            cells = {g: f.result() for g, f in futs.items()}
            now = time.time()
            for g, slot in due:
                got = cells.get(g)
                if got is None:
                    continue
                _, spi, reasons = units[(g, slot)]
                counts = {DROP_REASONS[r]: got.get(slot * 16 + r, (0, 0))[0] for r in reasons}
                base = self.baselines.get((g, slot))
                if base is None or base[0] != spi:
                    base = self.baselines[(g, slot)] = (spi, counts)
                self.drops_seen[(g, slot)] = (now, {k: v - base[1].get(k, 0) for k, v in counts.items() if v > base[1].get(k, 0)})
            self.drops_seen = {k: v for k, v in self.drops_seen.items() if k in units}
            self.baselines = {k: v for k, v in self.baselines.items() if k in units}
            return dict(self.drops_seen)

    def close(self):
        self.pool.shutdown(wait=False)
