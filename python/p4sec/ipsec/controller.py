"""The p4sec SDN controller for IPsec (P4-IPsec style, IKE-less as in RFC 9061): it generates per-SA keys from
the OS CSPRNG and unique SPIs, and programs gateways running programs/ipsec_gateway.p4 over P4Runtime: local
addresses, routes, SPD policies, SAD-dec entries (outer source, destination, SPI) and the SAs themselves
(through the esp_sad extern's ExternEntry; keys never appear in tables).

Loss-free ordering:
  setup    SAD-dec on both peers, then SAD-enc on both, then the SPD policies that use them;
  renewal  (on the SA's soft-lifetime digest) a new SA with a new SPI and keys is installed inbound on the
           receiver (new slot + SAD-dec entry), then replaces the outbound SA on the sender in place (one atomic
           swap in the extern), and the old inbound SA is removed after a grace period for packets in flight;
  hard     a hard-lifetime event on an SA still in use renews it at once (the SA already refuses packets);
  teardown policies first, then SAD-enc, then SAD-dec.

State (gateways, tunnels, SAs) is kept in SQLite: the desired state. Every operation records its outcome there
first, with an intent (the operation, its new SAs), and commits before it writes to a switch; then it sends its
writes in the order above, passing a named checkpoint after each step (`checkpoint`; the fault tests kill the
controller at each one). After a restart, `resume` rolls back the operations whose caller cannot have seen them
finish (a road warrior's phase 1 and renewal request) and `reconcile` completes the rest: it reads every
gateway's tables and SA slots, adopts what is identical, adds what is missing and removes what nobody wants.
The same reconciliation runs when a lost switch comes back and periodically.

The controller composes its parts, each an object with its own state: `journal` and `recovery`
(p4sec.ipsec.recovery: the intent journal, what happens after a controller's or a switch's restart),
`reconciler` (p4sec.ipsec.reconcile), `sites` (p4sec.ipsec.sites: site-to-site setup and teardown, with the
Writes to both gateways at once of p4sec.ipsec.writes), `hosts` (p4sec.ipsec.hosts: host-to-site tunnels) and
`faults` (p4sec.ipsec.failsafe: renewals and retirements retried while the store fails, degraded tunnels).
`sites`, `hosts`, `reconciler` and `faults` are handed what they use (the store's records, the lock, the gateways,
the journal, a few of the controller's functions), never the controller; `recovery` uses its public members. All of
them, and the controller, read and write the store through `records` (p4sec.ipsec.store.Records: no SQL, no store
keys outside p4sec.ipsec.store); `db` is the store's connection (commit, health). What stays here: the gateways,
the SAs' renewal and retirement, and the recorded state.
"""
import json
import logging
import os
import threading
import time

from p4sec.ipsec import gateway as gwp
from p4sec.ipsec import ike
from p4sec.ipsec import reconcile as rec
from p4sec.ipsec import store
from p4sec.ipsec import tunnel_entries as te
from p4sec.ipsec.store import StoreError
from p4sec.ipsec.ctlbase import (HARD, SA_EVENT_DIGEST, SOFT, SUITES, SWITCH_MAC, ControllerError, Gateway, _lpm,  # noqa: F401 (re-exported)
                      UDP_ENCAP_PORTS, checkpoint, sa_config, sa_selectors)
from p4sec.ipsec.failsafe import StoreFaults
from p4sec.ipsec.hosts import HostTunnels
from p4sec.ipsec.sites import SiteTunnels, refuse_ike
from p4sec.ipsec.recovery import IntentLog, Recovery

log = logging.getLogger("p4sec.controller")


class IpsecController:
    """The IPsec controller (see the module's description): site-to-site tunnels (`connect`, `disconnect`, `rekey`),
    host-to-site tunnels (`host_up` ... `host_down`), the renewal and retirement of SAs, the recorded state
    (`tunnels`, `sas`, `events`, `intents`), its `health` and `metrics`. Its parts are objects with their own state:
    `journal` (IntentLog) and `recovery` (Recovery: `resume`, switches lost and back) in p4sec.ipsec.recovery,
    `reconciler` (Reconciler: `reconcile`, `start_periodic`) in p4sec.ipsec.reconcile, `sites` (SiteTunnels:
    `connect`, `disconnect`) in p4sec.ipsec.sites, `hosts` (HostTunnels) in p4sec.ipsec.hosts, `faults`
    (StoreFaults: retries while the store fails, degraded tunnels) in p4sec.ipsec.failsafe."""

    def __init__(self, db=":memory:", grace=1.0):
        if isinstance(db, str):
            if db != ":memory:" and not db.startswith("file:") and not os.path.exists(db):
                # it holds the SAs' keys: readable by its owner only (SQLite gives its WAL the same mode)
                os.close(os.open(db, os.O_WRONLY | os.O_CREAT, 0o600))
            self.db = store.sqlite(db)      # fail-safe (p4sec.ipsec.store)
        else:
            self.db = db        # a replicated store with the same interface (p4sec.ipsec.ha.PgDb)
        self.records = store.Records(self.db)    # the records by kind: the only way the parts read and write the store
        self.records.create_tables()             # (PgDb's are PostgreSQL's own: p4sec.ipsec.ha.SCHEMA)
        self.gateways = {}
        self.lock = threading.RLock()
        # fn(desired, switch_mac): more desired entries (the IKEv2 tunnels' policies and IKE punting, from the store)
        self.desired_hooks = [lambda out, mac: ike.desired(self.records, self.gateways, out, mac)]
        self.sa_event_listeners = []    # fn(gateway, spi, event) -> True if it handled the SA's lifetime event
        self.grace = grace
        self._renewals = 0      # site-to-site renewals (`renewals` adds the host tunnels')
        self._timers = []
        self._closed = threading.Event()
        self.journal = IntentLog(self.records)           # the operations in flight (p4sec.ipsec.recovery)
        self.recovery = Recovery(self, self.journal, self._closed)      # after a controller's or a switch's restart
        self.reconciler = rec.Reconciler(self.records, self.lock, self.gateways, self.journal, self.recovery.away, self._closed,
                                         self.event, self.renew, self.desired_hooks)
        # site-to-site setup and teardown (p4sec.ipsec.sites), host-to-site tunnels (p4sec.ipsec.hosts)
        self.sites = SiteTunnels(self.records, self.lock, self.gateways, self.journal, self.event, self.reconcile, self.make_sa)
        self.hosts = HostTunnels(self.records, self.lock, self.gateways, self.journal, self.event, self.reconcile, self.retire_later,
                                 self.make_sa, self.selectors, self.undo_in, self.grace)
        # renewals and retirements retried while the store fails, degraded tunnels (p4sec.ipsec.failsafe)
        self.faults = StoreFaults(self.records, self.lock, self._closed, self.recovery.away, self.renew, self._retire,
                                  self._read_tunnels)
        self.faults.start()

    @property
    def away(self):
        """The gateways whose switch is unreachable (reconnecting: p4sec.ipsec.recovery)."""
        return self.recovery.away

    @property
    def renewals(self):
        """The SA renewals done: site-to-site (`renew`) and host-to-site (p4sec.ipsec.hosts)."""
        return self._renewals + self.hosts.renewals

    @property
    def programs(self):
        """Gateway name -> its program directory."""
        return self.recovery.programs

    def intents(self):
        """The operations in flight (their records in the store: p4sec.ipsec.recovery.IntentLog)."""
        with self.lock:
            return self.journal.all()

    # ------------------------------------------------------------------ gateways

    def add_gateway(self, gw, program_dir, adopt=True):
        """Take a gateway under control. A switch that already runs this program (a controller restart) is
        adopted (nothing pushed); otherwise the pipeline is pushed. Either way the SA slots in use are taken from
        the database, and `resume` (or `reconcile`) brings the switch to the recorded state. Returns True if
        adopted."""
        with self.lock:
            adopted = adopt and gw.switch.adopt(program_dir)
            if not adopted:
                gw.setup(program_dir)
            self.gateways[gw.name] = gw
            self.programs[gw.name] = program_dir
            self.recovery.slots_from_store(gw)
            self.event(gw.name, f"adopted (pipeline already running; {gw.next_slot - len(gw.free_slots)} SA slots in use)" if adopted
                       else "pipeline pushed")
            self.db.commit()
            self.watch(gw)
            return adopted

    def watch(self, gw):
        """Listen to gateway gw's switch: its SA lifetime digests, and the end of its stream (recovery)."""
        gw.switch.on_digest = lambda name, items, g=gw.name: self._on_digest(g, name, items)
        gw.switch.on_lost = lambda g=gw.name: self.recovery.lost(g)
        gw.switch.digest_enable(SA_EVENT_DIGEST)

    def reconcile(self, names=None, dry_run=False):
        """Converge the gateways (default: all that are reachable) to the recorded state; {gateway: summary}.
        With dry_run, only compare (p4sec.ipsec.reconcile.Reconciler)."""
        return self.reconciler.run(names, dry_run)

    def start_periodic(self, interval):
        """Reconcile every `interval` seconds (a switch that lost state without losing its stream, entries
        changed by someone else) until close()."""
        self.reconciler.start_periodic(interval)

    def resume(self):
        """After a restart, once the gateways are added: roll back or complete the operations that were in
        flight, converge every switch to the recorded state, restart the grace timers of old SAs, renew SAs
        whose lifetime ended while no controller listened, and bring lost tunnels (an older store's) up again
        (p4sec.ipsec.recovery.Recovery.resume)."""
        self.recovery.resume()

    def retire_later(self, spi):
        """Retire the old SA `spi` (its SAD-dec entry and inbound slot) after the grace period."""
        timer = threading.Timer(self.grace, self._retire, (spi,))
        timer.daemon = True
        timer.start()
        self._timers.append(timer)

    def tunnels(self):
        """The tunnels and their state; while the store cannot be read, the last state read, every tunnel that was up
        shown degraded with the store's error (p4sec.ipsec.failsafe.StoreFaults.tunnels)."""
        return self.faults.tunnels()

    def health(self):
        """The controller's health: the store's, the pending renewals, the degraded tunnels, unreachable switches."""
        return self.faults.health()

    def metrics(self):
        """Prometheus text: the store's health, renewals (done, failed, pending) and tunnels by state."""
        return self.faults.metrics(self.renewals)

    def _read_tunnels(self):
        """The tunnels as the store has them (raises StoreError), for `faults`, which keeps the last read."""
        rows = self.records.tunnels()
        store_ok, store_why = self.db.health()
        out = []
        for name, a, b, suite, soft, hard, created, state in rows:
            active = self.records.active_spis(name)
            spis = [f"{spi:#010x}" for spi in active]
            sites = self.tunnel_sites(name) or {}
            away = sorted({a, b} & self.away)
            why = self.faults.degraded_by(name, a, b, active, store_ok, store_why) if state == "up" else []
            if why:
                state = "degraded"
            t = {"name": name, "a": a, "b": b, "suite": suite, "soft": json.loads(soft), "hard": json.loads(hard),
                 "created": created, "state": state, "active_spis": spis, "a_prefix": sites.get(a), "b_prefix": sites.get(b),
                 "encap": self.tunnel_encap(name) or "esp"}
            if away:
                t["unreachable"] = away
            if why:
                t["degraded_by"] = why
            out.append(t)
        return out

    def event(self, tunnel, what):
        """Record what happened to a tunnel (or gateway) in the store's event log (committed with the caller's
        transaction) and the log."""
        self.records.add_event(tunnel, what)
        log.info("%s: %s", tunnel, what)

    def events(self, tunnel=None):
        """[(time, tunnel or gateway, what)] of the event log (of one tunnel or gateway), oldest first."""
        with self.lock:
            return self.records.events(tunnel)

    # ------------------------------------------------------------------ SAs

    def new_spi(self):
        """A random SPI (>= 256) no recorded SA has."""
        while True:
            spi = int.from_bytes(os.urandom(4), "big")
            if spi >= 256 and not self.records.spi_taken(spi):
                return spi

    def selectors(self, tunnel, src_name, dst):
        """The selectors of tunnel's SA from `src_name` (a gateway or a host) to gateway dst, from the store (see
        ctlbase.sa_selectors; reconciliation computes the same)."""
        return sa_selectors(src_name, dst, self.gateways, self.tunnel_sites(tunnel), self.hosts.inner(tunnel))

    def make_sa(self, tunnel, src, dst, suite, soft, hard):
        """A new SA of `tunnel` from src to dst (gateways, or a host as a Gateway): (spi, its esp_sad configuration)
        with fresh keys from the OS CSPRNG, in UDP if the tunnel is recorded so."""
        _, _, nkey, nauth = SUITES[suite]
        spi = self.new_spi()
        cfg = sa_config(spi, suite, os.urandom(nkey), os.urandom(nauth), src.address, dst.address, soft, hard,
                        udp_encap=UDP_ENCAP_PORTS if self.tunnel_encap(tunnel) == "udp" else None)
        return spi, cfg

    def undo_in(self, tunnel, src, dst, spi, in_slot):
        """Remove an SA installed inbound (its SAD-dec entry and its slot), each part on its own (a part that was never applied
        is reported missing, which is fine); the slot is free again unless something could not be removed."""
        left = []
        sel = self.selectors(tunnel, src.name, dst)
        for what, undo in (("SAD-dec entry", lambda: te.sad_dec(src, dst, spi, in_slot, sel, insert=False)),
                           ("SA", lambda: gwp.sa_delete(dst.switch, in_slot))):
            try:
                undo()
            except Exception as e:
                if "no entry with this match" not in str(e) and f"no SA in slot {in_slot}" not in str(e):
                    left.append(f"{what}: {e}")
        if left:
            self.event(tunnel, f"SA {spi:#010x} on {dst.name} slot {in_slot} may be left over: {'; '.join(left)}")
        else:
            dst.free_slots.append(in_slot)

    # ------------------------------------------------------------------ tunnels

    def tunnel_sites(self, name):
        """{gateway name: prefix} a site-to-site tunnel protects, as recorded (None if not recorded)."""
        return self.records.sites(name)

    def tunnel_encap(self, name):
        """"udp" for a tunnel whose SAs send ESP in UDP (RFC 3948), else None (plain ESP)."""
        return "udp" if self.records.encap(name) == "udp" else None

    def connect(self, a_name, b_name, suite="aes-gcm-128", soft=None, hard=None, name=None, a_prefix=None, b_prefix=None,
                encap=None):
        """A site-to-site tunnel between two gateways, for the traffic between a_prefix behind a and b_prefix behind
        b (default: the whole sites); `encap` "udp" for ESP in UDP. Returns {(src, dst): (spi, outbound slot)}
        (SiteTunnels.up)."""
        return self.sites.up(a_name, b_name, suite, soft, hard, name, a_prefix, b_prefix, encap)

    def renew(self, spi, reason="requested"):
        """Replace the active SA `spi` (one direction of a tunnel) with a fresh one, loss-free."""
        with self.lock:
            row = self.records.sa(spi)
            if not row or row.state != "active":
                return None  # already renewed (both ends report the same SA) or gone
            tunnel, src_name, dst_name, out_slot = row.tunnel, row.src, row.dst, row.out_slot
            if src_name not in self.gateways or dst_name not in self.gateways:
                # a road warrior's SA: its agent renews it; an IKE SA: charon is told (sa_event_listeners), the
                # event's kind from the reason (_on_digest's "soft/hard lifetime on ..."; reconciliation: soft)
                any(listener(src_name if src_name in self.gateways else dst_name, spi, HARD if reason.startswith("hard") else SOFT)
                    for listener in self.sa_event_listeners)
                return None
            t = self.records.tunnel(tunnel)
            suite, soft, hard = t.suite, t.soft, t.hard
            src, dst = self.gateways[src_name], self.gateways[dst_name]
            t0 = time.perf_counter()
            new_spi, cfg = self.make_sa(tunnel, src, dst, suite, json.loads(soft), json.loads(hard))
            in_slot = dst.alloc_slot()
            try:
                self.records.add_sa(new_spi, tunnel, src_name, dst_name, out_slot, in_slot, cfg, "active")
                self.records.set_sa_state(spi, "retiring")
                iid = self.journal.record("renew", tunnel, fresh=[new_spi], old=spi)
                self.db.commit()
            except StoreError:      # rolled back: nothing was written to a switch, the old SA stays
                dst.free_slots.append(in_slot)
                raise
            checkpoint("renew:recorded")
            try:
                with dst.switch.batch():
                    gwp.sa_write(dst.switch, in_slot, cfg)
                    te.sad_dec(src, dst, new_spi, in_slot, self.selectors(tunnel, src_name, dst))
                checkpoint("renew:inbound")
                t1 = time.perf_counter()
                gwp.sa_write(src.switch, out_slot, cfg)
            except Exception as e:
                # nothing half-installed stays: the new SAD-dec (and its SA) go again; the old SA keeps working
                self.undo_in(tunnel, src, dst, new_spi, in_slot)

                def forget(e=e):
                    self.records.delete_sa(new_spi)
                    self.records.set_sa_state(spi, "active", only_from="retiring")
                    self.journal.done(iid)
                    self.event(tunnel, f"renew {src_name}->{dst_name} ({reason}) failed, the old SA {spi:#010x} stays: {e}")
                    self.db.commit()
                try:
                    forget()
                except StoreError as se:
                    self.faults.finish_later(f"failed renewal of {spi:#010x}", forget, se)
                raise
            checkpoint("renew:outbound")
            t2 = time.perf_counter()
            self._renewals += 1
            what = (f"renew {src_name}->{dst_name} ({reason}): SAD-dec {new_spi:#010x} on {dst_name} slot {in_slot} "
                    f"({1000 * (t1 - t0):.2f} ms), SAD-enc {spi:#010x} -> {new_spi:#010x} on {src_name} slot {out_slot} "
                    f"({1000 * (t2 - t1):.2f} ms); old SAD-dec removed in {self.grace:g} s")

            def finish():
                self.journal.done(iid)
                self.event(tunnel, what)
                self.db.commit()
            try:
                finish()
            except StoreError as e:     # the switches use the new SA: only its record's end waits for the store
                self.faults.finish_later(f"renewal {spi:#010x} -> {new_spi:#010x}", finish, e)
            self.retire_later(spi)
            return new_spi

    def _retire(self, spi, attempts=0):
        """Remove the old SA `spi` after its grace period; a store that fails makes it retried (`faults`)."""
        if self._closed.is_set():
            return
        with self.lock:
            try:
                row = self.records.sa(spi)
                if not row or row.state != "retiring":
                    return
                tunnel, src_name, dst_name, in_slot, cfg = row.tunnel, row.src, row.dst, row.in_slot, row.config
                dst = self.gateways.get(dst_name)
                self.records.set_sa_state(spi, "deleted")
                iid = self.journal.record("retire", tunnel, spi=spi)
                self.db.commit()
            except StoreError as e:
                self.faults.retire_failed(spi, attempts, e)
                return
            checkpoint("retire:recorded")

            def finish(what=None):
                self.journal.done(iid)
                if what:
                    self.event(tunnel, what)
                self.db.commit()
            if dst is None or dst_name in self.away:
                try:
                    finish()
                except StoreError as e:
                    self.faults.finish_later(f"retirement of {spi:#010x}", finish, e)
                return      # reconciliation removes it when the switch is back
            # a road warrior's SA: the source is the host, known only by its address
            src = self.gateways.get(src_name) or Gateway(src_name, None, json.loads(cfg)["tunnel"][0], "", 0, "", 0, "", "")
            try:
                te.sad_dec(src, dst, spi, in_slot, self.selectors(tunnel, src_name, dst), insert=False)
                checkpoint("retire:sad-dec")
                gwp.sa_delete(dst.switch, in_slot)
                dst.free_slots.append(in_slot)
            except Exception as e:
                what = f"removing old SAD-dec {spi:#010x} on {dst_name} failed ({e}); reconciliation removes it"
            else:
                what = f"old SAD-dec {spi:#010x} removed from {dst_name}"
            try:
                finish(what)
            except StoreError as e:
                self.faults.finish_later(f"retirement of {spi:#010x}", lambda: finish(what), e)

    def rekey(self, name):
        """Renew both directions of tunnel `name` now. Returns {(src, dst): (spi, slot)} of its active SAs."""
        with self.lock:
            if not self.records.tunnel(name, states=("up",)):
                raise ControllerError(f"no tunnel {name} is up")
            refuse_ike(self.records, name, "rekeys")
            for sa in self.records.sas(tunnel=name, states=("active",)):
                self.renew(sa.spi)
            return {(sa.src, sa.dst): (sa.spi, sa.out_slot) for sa in self.records.sas(tunnel=name, states=("active",))}

    def rekey_pair(self, a_name, b_name):
        """Renew every tunnel between two gateways (both directions) now. Returns {tunnel: {(src, dst): (spi, slot)}}."""
        with self.lock:
            names = [t.name for t in self.records.tunnels(states=("up",), between=(a_name, b_name))]
            if not names:
                raise ControllerError(f"no tunnel between {a_name} and {b_name} is up")
            return {n: self.rekey(n) for n in names}

    def _on_digest(self, gw_name, name, items):
        if name != SA_EVENT_DIGEST:
            return
        for item in items:
            slot, event = item[0], item[1]
            with self.lock:
                # by SPI when the program reports it (a slot is reused by the next SA), else by slot
                key = item[2] if len(item) > 2 and item[2] else (gw_name, slot)
                reason = f"{'soft' if event == SOFT else 'hard'} lifetime on {gw_name}"
                try:
                    if len(item) > 2 and item[2]:
                        spi = self.records.active_spi(spi=item[2])
                    else:
                        spi = self.records.active_spi(gateway=gw_name, slot=slot)
                    if spi is not None and self.hosts.is_host_sa(spi):
                        self.event(gw_name, f"{'soft' if event == SOFT else 'hard'} lifetime of host-to-site SA {spi:#010x}: "
                                            "its agent renews it")
                        self.db.commit()
                        continue
                except StoreError as e:     # the store cannot say which SA: the retries will
                    self.faults.renewal_failed(key, reason, e)
                    continue
                if spi is not None:
                    self.faults.renew_or_retry(spi, reason)

    def disconnect(self, name):
        """Tear site-to-site tunnel `name` down (SiteTunnels.down)."""
        return self.sites.down(name)

    # ------------------------------------------------------------------ host-to-site tunnels (p4sec.ipsec.hosts)

    def host_up(self, client, profile, gw_name, host_address, host_mac, inner, suite="aes-gcm-128", soft=None, hard=None,
                encap=None):
        """Phase 1 of `client`'s host-to-site tunnel `profile` to gateway gw_name: the SAs for its agent
        (HostTunnels.up)."""
        return self.hosts.up(client, profile, gw_name, host_address, host_mac, inner, suite, soft, hard, encap)

    def host_ready(self, client, profile):
        """Phase 2: the agent installed its SAs, the gateway sends to the host (HostTunnels.ready)."""
        return self.hosts.ready(client, profile)

    def host_renew(self, client, profile):
        """The agent asks for a renewal: the next SAs (HostTunnels.renew)."""
        return self.hosts.renew(client, profile)

    def host_renew_ready(self, client, profile):
        """The agent installed the renewal's SA inbound: the gateway swaps its outbound SA (HostTunnels.renew_ready)."""
        return self.hosts.renew_ready(client, profile)

    def host_down(self, client, profile):
        """Tear `client`'s host tunnel `profile` down (HostTunnels.down)."""
        return self.hosts.down(client, profile)

    # ------------------------------------------------------------------ the recorded state

    def sas(self, tunnel=None):
        """[{spi, tunnel, src, dst, out_slot, in_slot, state}] of the recorded SAs (of one tunnel), oldest first."""
        with self.lock:
            return [{"spi": sa.spi, "tunnel": sa.tunnel, "src": sa.src, "dst": sa.dst, "out_slot": sa.out_slot, "in_slot": sa.in_slot,
                     "state": sa.state} for sa in self.records.sas(tunnel=tunnel or None, by_creation=True)]

    def keys(self, spi):
        """The SA's configuration (keys included), e.g. to decrypt a capture."""
        row = self.records.sa(spi)
        return json.loads(row.config) if row else None

    def close(self):
        """Stop the controller's threads and timers (retries, reconnections, periodic reconciliation, grace
        timers); the store stays open."""
        self._closed.set()
        for t in self._timers:
            t.cancel()
