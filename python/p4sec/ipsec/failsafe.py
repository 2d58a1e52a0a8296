"""What the IPsec controller does when its store fails (issue 36): nothing is lost, everything is retried, and the
tunnels at risk say so.

- A renewal that fails (the store refuses its commit, a switch its write) is kept in `pending` and retried, first
  after 0.1 s and then at most every second, until it lands or its SA is no longer active: a store that comes
  back is used within about a second, long before a hard limit a few seconds of traffic away.
- A retirement (the old SAD-dec entry's removal after the grace period) whose commit fails is retried the same
  way, so no SA stays `retiring`; an operation done on the switches whose last commit (its intent's end, its
  event) failed is finished later (`unfinished`).
- While the store fails, a small commit probes it every 0.1 to 1 s (the store's own backoff); the retries wait for
  the first probe that lands.
- A tunnel is `degraded` while a renewal of its SAs is pending, while the store fails, or while a gateway of it
  is unreachable, with the reasons (`degraded_by`) in its status, the REST API, the metrics and the log. When
  the store cannot even be read, the last state read (every second while it can be) is shown, every tunnel that
  was up as degraded.

`StoreFaults` is a part of p4sec.ipsec.controller.IpsecController (its `faults`) with its own state (the pending
renewals, the retirements and records to retry, the last tunnels read); what it needs from the controller is
handed to it: the store's records (p4sec.ipsec.store.Records), the controller's lock, the event set when it closes, the live set of unreachable
gateways, and three functions: renew an SA, retire an old SA, read the tunnels from the store."""
import logging
import threading
import time

from p4sec.ipsec.store import StoreError

log = logging.getLogger("p4sec.controller")

RETRY_MIN, RETRY_MAX = 0.1, 1.0
WARN_EVERY = 5.0
SNAPSHOT_EVERY = 1.0


class StoreFaults:
    """The controller's handling of store faults (see the module's description). `db`: the store's records
    (p4sec.ipsec.store.Records: health, commit, probe, active_spi, sa); `lock`: the
    controller's lock (held by every operation that has a transaction open); `closed`: set when the controller
    closes (the retries stop); `away`: the live set of unreachable gateways (p4sec.ipsec.recovery.Recovery.away);
    `renew(spi, reason)`: renew an active SA; `retire(spi, attempts)`: retire an old SA after its grace period
    (it calls `retire_failed` when the store refuses); `read_tunnels()`: the tunnels as the store has them (raises
    StoreError). `start` starts the retry loop."""

    def __init__(self, db, lock, closed, away, renew, retire, read_tunnels):
        self.db, self.lock, self.closed, self.away = db, lock, closed, away
        self.renew, self.retire, self.read_tunnels = renew, retire, read_tunnels
        self.pending = {}           # key (an SPI, or (gateway, slot) if the digest named none) -> retried renewal
        self.unfinished = []        # callables doing the last store writes of operations done on the switches
        self.retirements = {}       # spi -> [attempts, next try]
        self.renewals_failed = 0
        self.snapshot = []          # the tunnels as last read (shown while the store cannot be read)
        self._store_was_ok = True
        self._snapshot_due = 0.0
        self.thread = None          # the retry loop's (start)

    def start(self):
        """Start the retry loop (a daemon thread, until `closed` is set)."""
        self.thread = threading.Thread(target=self._retry_loop, daemon=True, name="store-retry")
        self.thread.start()

    # ------------------------------------------------------------------ renewals

    def renew_or_retry(self, key, reason):
        """Renew the SA `key` (an SPI, or (gateway, slot)); if that fails, keep it pending (retried)."""
        try:
            spi = self._resolve(key)
            if spi is not None:
                self.renew(spi, reason=reason)
            self.pending.pop(key, None)
        except Exception as e:
            self.renewal_failed(key, reason, e)

    def _resolve(self, key):
        if not isinstance(key, tuple):
            return key
        gw, slot = key
        return self.db.active_spi(gateway=gw, slot=slot)

    def renewal_failed(self, key, reason, e):
        now = time.monotonic()
        p = self.pending.get(key)
        if p is None:
            p = self.pending[key] = {"reason": reason, "since": time.time(), "attempts": 0, "warned": 0.0}
        p["attempts"] += 1
        p["error"] = " ".join(str(e).split()) or type(e).__name__
        p["next"] = now + min(RETRY_MIN * 2 ** (p["attempts"] - 1), RETRY_MAX)
        self.renewals_failed += 1
        if now - p["warned"] >= WARN_EVERY:
            p["warned"] = now
            log.warning("renewal of SA %s (%s) failed %d time(s) since %s: %s; its tunnel is degraded, retrying until it lands",
                        _name(key), p["reason"], p["attempts"], time.strftime("%H:%M:%S", time.localtime(p["since"])), p["error"])

    # ------------------------------------------------------------------ the retry loop

    def _retry_loop(self):
        while not self.closed.wait(RETRY_MIN):
            try:
                self.retry_once()
            except Exception as e:      # never let the loop die
                log.warning("store retry loop: %s", e)

    def retry_once(self):
        ok, why = self.db.health()
        if not ok:
            if self._store_was_ok:
                log.warning("store failing: %s; renewals wait for it (tunnels degraded)", why)
                self._store_was_ok = False
            with self.lock:         # no operation of the controller has a transaction open
                try:
                    self.db.probe()
                    self.db.commit()
                except StoreError:
                    return
        if time.monotonic() >= self._snapshot_due:      # the state to show if the store cannot be read later
            self._snapshot_due = time.monotonic() + SNAPSHOT_EVERY
            try:
                self.tunnels()
            except StoreError:
                pass
        if not self._store_was_ok:
            log.warning("store works again: retrying %d renewal(s), %d retirement(s), %d unfinished operation(s)",
                        len(self.pending), len(self.retirements), len(self.unfinished))
            self._store_was_ok = True
        while self.unfinished:
            fn = self.unfinished[0]
            with self.lock:
                try:
                    fn()
                except StoreError:
                    return
                except Exception as e:      # not the store's doing: retrying would not help
                    log.warning("finishing an operation's record failed for good: %s", e)
            self.unfinished.pop(0)
        now = time.monotonic()
        for key, p in list(self.pending.items()):
            if self.closed.is_set() or now < p.get("next", 0) or self._waits_for_switch(key):
                continue
            t0 = p["since"]
            self.renew_or_retry(key, p["reason"] + f" (retried, attempt {p['attempts'] + 1})")
            if key not in self.pending:
                log.warning("renewal of SA %s landed after %d failed attempt(s), %.2f s after the first", _name(key), p["attempts"],
                            time.time() - t0)
        for spi, (attempts, due) in list(self.retirements.items()):
            if now >= due and not self.closed.is_set():
                self.retirements.pop(spi, None)
                self.retire(spi, attempts)

    def _waits_for_switch(self, key):
        """Whether the pending renewal's SA runs through an unreachable gateway (its reconnection reconciles and
        renews what it must; retrying meanwhile would only fail)."""
        if not self.away or isinstance(key, tuple):
            return bool(self.away) and isinstance(key, tuple) and key[0] in self.away
        try:
            row = self.db.sa(key)
        except StoreError:
            return False
        return bool(row) and bool({row.src, row.dst} & self.away)

    def retire_failed(self, spi, attempts, e):
        attempts += 1
        self.retirements[spi] = [attempts, time.monotonic() + min(RETRY_MIN * 2 ** (attempts - 1), RETRY_MAX)]
        if attempts == 1:
            log.warning("retiring SA %#010x: the store failed (%s); retried until it lands", spi, e)

    def finish_later(self, what, fn, e):
        """An operation done on the switches whose last store writes (`fn`, which commits) failed: retried."""
        log.warning("%s: done on the switches, but its record failed (%s); recorded when the store works again", what, e)
        self.unfinished.append(fn)

    # ------------------------------------------------------------------ status

    def degraded_by(self, name, a, b, active_spis, store_ok, store_why):
        """Why tunnel `name` (gateways a, b; its active SPIs) is degraded: [reason]."""
        why = [f"gateway {g} is unreachable" for g in sorted({a, b} & self.away)]
        active = set(active_spis)
        for key, p in list(self.pending.items()):
            if key in active or p.get("tunnel") == name:
                why.append(f"renewal of SA {_name(key)} failing since {time.strftime('%H:%M:%S', time.localtime(p['since']))} "
                           f"({p['attempts']} attempts): {p.get('error')}")
        if not store_ok:
            why.append(f"store {store_why}")
        return why

    def tunnels(self):
        """The tunnels and their state; while the store cannot be read, the last state read, every tunnel that was up
        shown degraded with the store's error."""
        try:
            with self.lock:
                out = self.read_tunnels()
            self.snapshot = out
            return out
        except StoreError as e:
            out = []
            for t in self.snapshot:
                t = dict(t, stale=True)
                if t["state"] in ("up", "degraded"):
                    spis = [int(x, 16) for x in t["active_spis"]]
                    t["state"], t["degraded_by"] = "degraded", self.degraded_by(t["name"], t["a"], t["b"], spis, False, f"unreadable: {e}")
                out.append(t)
            return out

    def health(self):
        """The controller's health: the store's, the pending renewals, the degraded tunnels, unreachable switches."""
        ok, why = self.db.health()
        tunnels = self.tunnels()
        return {"ok": ok and not self.pending and not self.away, "store": why, "renewals_pending": len(self.pending),
                "renewals_failed": self.renewals_failed, "unreachable": sorted(self.away),
                "degraded": {t["name"]: t.get("degraded_by", []) for t in tunnels if t["state"] == "degraded"}}

    def metrics(self, renewals):
        """Prometheus text: the store's health, renewals (`renewals` done, failed, pending) and tunnels by state."""
        ok, _ = self.db.health()
        by = {}
        for t in self.tunnels():
            by[t["state"]] = by.get(t["state"], 0) + 1
        lines = ["# HELP p4sec_controller_store_up 1 while the store's commits land", "# TYPE p4sec_controller_store_up gauge",
                 f"p4sec_controller_store_up {int(ok)}",
                 "# TYPE p4sec_controller_renewals_total counter", f"p4sec_controller_renewals_total {renewals}",
                 "# TYPE p4sec_controller_renewals_failed_total counter", f"p4sec_controller_renewals_failed_total {self.renewals_failed}",
                 "# TYPE p4sec_controller_renewals_pending gauge", f"p4sec_controller_renewals_pending {len(self.pending)}",
                 "# TYPE p4sec_controller_tunnels gauge"]
        lines += [f'p4sec_controller_tunnels{{state="{s}"}} {by.get(s, 0)}' for s in ("up", "degraded", "pending", "down", "lost")]
        return "\n".join(lines) + "\n"


def _name(key):
    return f"{key:#010x}" if not isinstance(key, tuple) else f"in slot {key[1]} of {key[0]}"
