"""Crash recovery of the IPsec controller: what it does after its own restart and after a switch's.

- The intent journal (`IntentLog`, the store's `intent` table): an operation records what it is about to write
  to switches (its name, its tunnel, its new SAs) in the commit of the state it leads to, and deletes that record
  once its writes are done. A record still there after a restart names an operation that was interrupted.
- After a controller restart (`Recovery.resume`, once the gateways are added): the interrupted operations whose
  caller cannot have seen them finish (a road warrior's phase 1 and renewal request: its agent asks again) are
  rolled back in the store, the others stand as recorded; reconciliation then converges every switch to the
  store (p4sec.ipsec.reconcile), the grace timers of old SAs start again, SAs whose lifetime ended while no
  controller listened are renewed, and tunnels an older store marked lost are set up again. A gateway's SA slots
  in use are rebuilt from the store when it is added (`slots_from_store`).
- After a switch restart (`lost`, `reconnect`): a switch whose P4Runtime stream ended is unreachable (`away`: its
  tunnels are degraded) and is dialled again in the background; once it answers, its pipeline is adopted (still
  running) or pushed again, and the gateway is reconciled.

`Recovery` keeps its own state (the unreachable gateways, each gateway's program) and drives the controller only
through these of its members: `records` (the store's, p4sec.ipsec.store.Records), `lock`, `gateways`, `event`,
`reconcile`, `renew`, `connect`, `retire_later`, `watch`, `tunnel_sites`, `tunnel_encap`. `IntentLog` keeps the
journal in the store through its records."""
import json
import logging
import threading
import time

from p4sec.infra import runtime
from p4sec.ipsec import gateway as gwp
from p4sec.ipsec.store import StoreError

log = logging.getLogger("p4sec.controller")

# the operations rolled back after a restart (their agent, which asked for them, asks again); every other one is
# completed from the recorded state by reconciliation
ROLLED_BACK = ("host-up", "host-renew")


class IntentLog:
    """The operations in flight, as recorded in the store's intent journal (see the module's description);
    `records`: the store's (p4sec.ipsec.store.Records)."""

    def __init__(self, records):
        self.records = records      # p4sec.ipsec.store.Records

    def record(self, op, tunnel, **data):
        """Record an operation about to write to switches (committed with the state it leads to); its id."""
        return self.records.add_intent(op, tunnel, data)

    def done(self, iid):
        """The operation `iid` finished its writes: its record goes (with the caller's commit)."""
        self.records.delete_intent(iid)

    def all(self):
        """[{id, op, tunnel, data}] in the order they were recorded."""
        return [{"id": i, "op": op, "tunnel": t, "data": d} for i, op, t, d in self.records.intents()]

    def fresh(self):
        """SPIs of new SAs whose operation is still recorded: never sent outbound, or sent by this very operation."""
        out = set()
        for _, _, _, d in self.records.intents():
            out.update(d.get("fresh", []))
        return out

    def clear(self):
        """Forget every record (after a restart's reconciliation completed them)."""
        self.records.clear_intents()


def dial(old):
    """A new P4Runtime connection to the switch `old` (a runtime.Switch) was connected to; raises while it does not
    answer."""
    return runtime.Switch(old.address, device_id=old.device_id, election_id=old.election_id, timeout=0.5, tls=old.tls)


class Recovery:
    """The controller's crash recovery (see the module's description). `closed`: set when the controller closes
    (reconnections stop); `dial(old_switch)`: a new connection to the same switch (default: `dial`)."""

    def __init__(self, ctl, journal, closed, dial=dial):
        self.ctl, self.journal, self.closed, self.dial = ctl, journal, closed, dial
        self.away = set()       # gateways whose switch is unreachable (reconnecting)
        self.programs = {}      # gateway name -> its program directory (pushed again to a switch that lost it)

    # ------------------------------------------------------------------ controller restart

    def roll_back_interrupted(self):
        """Roll back in the store the interrupted operations whose caller (an agent) cannot have seen them finish;
        the others stand as recorded (reconciliation completes them). [(op, tunnel, rolled back?)], one per
        interrupted operation, in the order they were recorded."""
        rec, out = self.ctl.records, []
        for intent in self.journal.all():
            op, tunnel, data = intent["op"], intent["tunnel"], intent["data"]
            if op == "host-up":
                rec.set_tunnel_state(tunnel, "down", only_from="pending")
                rec.set_tunnel_sas_state(tunnel, "deleted", live_only=True)
                self.ctl.event(tunnel, "host phase 1 interrupted by a controller restart: rolled back (the agent asks again)")
            elif op == "host-renew":
                rec.set_sa_state((data["up"], data["down"]), "deleted")
                if data.get("old") is not None:
                    rec.set_sa_state(data["old"], "active", only_from="retiring")
                self.ctl.event(tunnel, "host renewal interrupted by a controller restart: rolled back (the agent asks again)")
            else:
                self.ctl.event(tunnel, f"{op} interrupted by a controller restart: completed from the recorded state")
            out.append((op, tunnel, op in ROLLED_BACK))
        return out

    def slots_from_store(self, gw):
        """Set gateway gw's SA slot allocation from the store: the slots its recorded SAs use (outbound as the
        sender, inbound as the receiver) are taken, the free ones below the highest are reused first."""
        used = self.ctl.records.slots_in_use(gw.name)
        gw.next_slot = max(used) + 1 if used else 0
        gw.free_slots = sorted(set(range(gw.next_slot)) - used, reverse=True)
        return used

    def missed_lifetimes(self):
        """[(spi, "soft" | "hard")]: the active site-to-site SAs whose outbound slot reports its lifetime reached
        (an event that fired while no controller listened). A switch that cannot be asked is left out."""
        ctl, missed = self.ctl, []
        for spi, _, s, d, out_slot, *_ in ctl.records.sas(states=("active",)):
            if s in ctl.gateways and d in ctl.gateways:
                try:
                    st = gwp.sa_stats(ctl.gateways[s].switch, out_slot)
                except Exception:
                    continue
                if st and (st.get("soft_expired") or st.get("hard_expired")):
                    missed.append((spi, "hard" if st.get("hard_expired") else "soft"))
        return missed

    def resume(self):
        """After a restart, once the gateways are added: roll back or complete the operations that were in
        flight, converge every switch to the recorded state, restart the grace timers of old SAs, renew SAs
        whose lifetime ended while no controller listened, and bring lost tunnels (an older store's) up again."""
        ctl = self.ctl
        with ctl.lock:
            self.roll_back_interrupted()
            ctl.records.commit()
            ctl.reconcile()
            self.journal.clear()
            ctl.records.commit()
            for sa in ctl.records.sas(states=("retiring",)):
                ctl.retire_later(sa.spi)
            lost = [t[:6] for t in ctl.records.tunnels(states=("lost",))]
            for spi, kind in self.missed_lifetimes():
                ctl.renew(spi, reason=f"{kind} lifetime reached while the controller was away")
        for name, a, b, suite, soft, hard in lost:
            if a in ctl.gateways and b in ctl.gateways:
                sites = ctl.tunnel_sites(name) or {}
                ctl.connect(a, b, suite, json.loads(soft), json.loads(hard), name=name, a_prefix=sites.get(a), b_prefix=sites.get(b),
                            encap=ctl.tunnel_encap(name))

    # ------------------------------------------------------------------ switch restart

    def lost(self, name):
        """The switch's stream ended: reconnect in the background; its tunnels are degraded meanwhile."""
        if self.closed.is_set():
            return
        ctl = self.ctl
        with ctl.lock:
            if name in self.away:
                return
            self.away.add(name)
            try:
                ctl.event(name, "switch unreachable (P4Runtime stream lost): its tunnels are degraded; reconnecting")
                for t in ctl.records.tunnels(states=("up", "pending"), gateway=name):
                    ctl.event(t.name, f"degraded: gateway {name} is unreachable")
                ctl.records.commit()
            except StoreError as e:
                log.warning("%s unreachable; its events not recorded: %s", name, e)
        threading.Thread(target=self.reconnect, args=(name,), daemon=True, name=f"reconnect-{name}").start()

    def reconnect(self, name):
        """Dial gateway `name`'s switch until it answers (or the controller closes), then adopt its pipeline or
        push it again, and reconcile."""
        ctl = self.ctl
        gw = ctl.gateways[name]
        old = gw.switch
        while not self.closed.is_set():
            try:
                sw = self.dial(old)
            except Exception:
                time.sleep(0.05)
                continue
            try:
                with ctl.lock:
                    gw.switch = sw
                    adopted = sw.adopt(self.programs[name])
                    if not adopted:
                        gw.setup(self.programs[name])
                    ctl.watch(gw)
                    self.away.discard(name)
                    ctl.event(name, "switch back: " + ("pipeline still running, adopted" if adopted else "pipeline pushed again"))
                    ctl.records.commit()
                    summary = ctl.reconcile()
                    for t in ctl.records.tunnels(states=("up", "pending"), gateway=name):
                        ctl.event(t.name, f"up again: gateway {name} reconciled ({summary.get(name, '')})")
                    ctl.records.commit()
                try:
                    old.close()
                except Exception:
                    pass
                return
            except Exception as e:
                log.warning("reconnecting %s: %s", name, e)
                with ctl.lock:
                    self.away.add(name)
                try:
                    sw.close()
                except Exception:
                    pass
                time.sleep(0.2)
