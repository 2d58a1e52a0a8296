"""Site-to-site tunnels of the IPsec controller: setup (`up`: SAD-dec on both gateways, then SAD-enc and the
policies, one Write per gateway and phase, both gateways at once) and teardown (`down`: the policies, then what the
SAs send and receive with, then the SAs). Each records its outcome and an intent before it writes, passes named
checkpoints, and undoes what the switches accepted when one refuses (see p4sec.ipsec.controller).

`SiteTunnels` is a part of p4sec.ipsec.controller.IpsecController (its `sites`; the controller's `connect` and
`disconnect` hand over to it). It does not see the controller: it is handed what it uses (SEAM): the store's
records (p4sec.ipsec.store.Records), the controller's lock and gateways, its intent journal, and three of its
functions: `event` (record what happened), `reconcile` (converge gateways after a failed setup) and `make_sa` (a
new SA with fresh keys). The renewal, retirement and rekeying of the SAs of a tunnel that is up are the
controller's own."""
import time

from p4sec.ipsec import gateway as gwp
from p4sec.ipsec import tunnel_entries as te
from p4sec.ipsec import writes
from p4sec.ipsec.ctlbase import SUITES, ControllerError, checkpoint, sa_selectors


# what SiteTunnels is handed (its constructor's parameters, in order)
SEAM = ("records", "lock", "gateways", "journal", "event", "reconcile", "make_sa")


def refuse_ike(records, name, what):
    """IKEv2-negotiated tunnels (p4sec.ipsec.ike) belong to their charon: refuse to drive them from here (`what`:
    the operation, "rekeys" or "deletes"; `records`: the store's, p4sec.ipsec.store.Records)."""
    t = records.tunnel(name)
    if t and t.b.startswith("ike:"):
        raise ControllerError(f"tunnel {name} is negotiated by IKEv2 with {t.b[4:]}: its charon {what} it "
                              "(swanctl --rekey / --terminate on the gateway's charon)")


class SiteTunnels:
    """The site-to-site setup and teardown of IpsecController (see the module's description): `records` (the
    store's), `lock` (the controller's), `gateways` (the controller's, name -> Gateway), `journal` (its intent
    journal, p4sec.ipsec.recovery.IntentLog), `event(tunnel, what)`, `reconcile(names)` and `make_sa(tunnel, src,
    dst, suite, soft, hard)` -> (spi, config)."""

    def __init__(self, records, lock, gateways, journal, event, reconcile, make_sa):
        self.records, self.lock, self.gateways, self.journal = records, lock, gateways, journal
        self.event, self.reconcile, self.make_sa = event, reconcile, make_sa

    def up(self, a_name, b_name, suite="aes-gcm-128", soft=None, hard=None, name=None, a_prefix=None, b_prefix=None, encap=None):
        """A site-to-site tunnel between two gateways, for the traffic between a_prefix behind a and b_prefix behind
        b (subnets of their sites; default: the whole sites): many tunnels between the same two gateways, one per
        pair of subnets. `encap`: "esp" (or None, the default) for plain ESP, "udp" for ESP in UDP (RFC 3948, NAT
        traversal: UDP port 4500 both ways); it holds for the tunnel's renewed SAs too. Returns {(src, dst): (spi,
        outbound slot)}."""
        if suite not in SUITES and suite != "bypass":
            raise ControllerError(f"unknown cipher suite {suite!r} (bypass, {', '.join(SUITES)})")
        if encap not in (None, "esp", "udp"):
            raise ControllerError(f"unknown encapsulation {encap!r} (esp, udp)")
        with self.lock:
            for g in (a_name, b_name):
                if g not in self.gateways:
                    raise ControllerError(f"no gateway {g}")
            if a_name == b_name:
                raise ControllerError(f"a tunnel needs two gateways ({a_name} twice)")
            a, b = self.gateways[a_name], self.gateways[b_name]
            name = name or f"{a_name}-{b_name}"
            t0 = time.perf_counter()
            sites = te.site_prefixes(a, b, a_prefix, b_prefix)
            rec = self.records
            if rec.tunnel(name, states=("up",)):
                raise ControllerError(f"tunnel {name} is already up")
            other = rec.pair_owner(sites)
            if other is not None and other != name:
                raise ControllerError(f"tunnel {other} already protects {sites[a_name]} <-> {sites[b_name]}")
            prev = (rec.tunnel(name), rec.sites_raw(name), rec.encap(name))
            rec.put_tunnel(name, a_name, b_name, suite, soft, hard, "up")
            rec.put_sites(name, sites)
            rec.put_encap(name, encap or "esp")
            rec.claim_pair(sites, name)
            if suite == "bypass":
                iid = self.journal.record("setup", name)
                rec.commit()
                checkpoint("setup:recorded")
                try:
                    # BYPASS both ways on both gateways (clear traffic arriving from the peer is policy-checked too)
                    for src, dst in ((a, b), (b, a)):
                        te.clear_route(src, sites[dst.name])
                        te.spd(src, dst, None, action=gwp.BYPASS, sites=sites)
                        te.spd(src, dst, None, action=gwp.BYPASS, on=dst, sites=sites)
                except Exception:
                    self._forget_setup(name, prev, sites, [], iid)
                    self.reconcile([a_name, b_name])
                    raise
                checkpoint("setup:outbound")
                self.journal.done(iid)
                self.event(name, "up (bypass)")
                rec.commit()
                return {}
            # per direction src -> dst: the SA, its outbound slot on src and its inbound slot on dst
            pairs = {}
            for src, dst in ((a, b), (b, a)):
                spi, cfg = self.make_sa(name, src, dst, suite, soft, hard)
                pairs[(src.name, dst.name)] = (spi, src.alloc_slot(), dst.alloc_slot(), cfg)
            for (s, d), (spi, out_slot, in_slot, cfg) in pairs.items():
                rec.add_sa(spi, name, s, d, out_slot, in_slot, cfg, "active")
            iid = self.journal.record("setup", name, fresh=[v[0] for v in pairs.values()])
            rec.commit()
            t_db = time.perf_counter() - t0
            checkpoint("setup:recorded")
            # one Write per switch and phase, both switches at once: SAD-dec everywhere (phase 1), then SAD-enc + SPD
            # (phase 2; the switch applies the extern update before the table update of a Write). Phase 2 is built
            # while phase 1 is on the wire.
            t1 = time.perf_counter()
            phase1 = [(dst, self._inbound_updates(src, dst, *pairs[(src.name, dst.name)], sites=sites)) for src, dst in ((a, b), (b, a))]
            sent1 = writes.send(phase1)
            phase2 = [(src, self._outbound_updates(src, dst, *pairs[(src.name, dst.name)], sites=sites)) for src, dst in ((a, b), (b, a))]
            done1 = writes.wait(sent1)
            if done1 is None:
                checkpoint("setup:inbound")
            t2 = time.perf_counter()
            sent2 = writes.send(phase2) if done1 is None else []
            done2 = writes.wait(sent2) if done1 is None else None
            t3 = time.perf_counter()
            if done1 is not None or done2 is not None:
                # undo what the switches accepted (phase 2 first), give the slots back, forget the rows
                err = done1 if done1 is not None else done2
                writes.undo(sent2, lambda gw: self._outbound_updates(*self._dir_from(gw, a, b, pairs), delete=True, sites=sites))
                writes.undo(sent1 if done1 is not None else [(gw, ups, [True] * len(ups)) for gw, ups in phase1],
                            lambda gw: self._inbound_updates(*self._dir_to(gw, a, b, pairs), delete=True, sites=sites))
                for (s, d), (_, out_slot, in_slot, _) in pairs.items():
                    self.gateways[s].free_slots.append(out_slot)
                    self.gateways[d].free_slots.append(in_slot)
                self._forget_setup(name, prev, sites, [v[0] for v in pairs.values()], iid)
                raise err
            checkpoint("setup:outbound")
            self.journal.done(iid)
            self.event(name, f"up ({suite}) in {1000 * (time.perf_counter() - t0):.2f} ms (SAD-dec {1000 * (t2 - t1):.2f} ms, "
                        f"SAD-enc + SPD {1000 * (t3 - t2):.2f} ms, state {1000 * t_db:.2f} ms)")
            rec.commit()
            return {k: (v[0], v[1]) for k, v in pairs.items()}

    def _forget_setup(self, name, prev, sites, spis, iid):
        """A setup the switches refused: its records go (the tunnel's earlier records come back: `prev`)."""
        rec = self.records
        for spi in spis:
            rec.delete_sa(spi)
        rec.delete_tunnel(name)
        rec.forget_sites_and_encap(name)
        if prev[0]:
            rec.restore_tunnel(prev[0])
        rec.restore_sites_and_encap(name, prev[1], prev[2])
        rec.release_pair(sites, name)
        self.journal.done(iid)
        rec.commit()

    def _inbound_updates(self, src, dst, spi, out_slot, in_slot, cfg, delete=False, sites=None):
        """The Write for dst that lets it receive src's SA: the SA in its inbound slot, then its selectors (the
        tunnel's `sites`) and SAD-dec entry (delete: the entry first, then the selectors, then the SA)."""
        sel = sa_selectors(src.name, dst, self.gateways, sites)
        with dst.switch.collect() as ups:
            if delete:
                te.sad_dec(src, dst, spi, in_slot, sel, insert=False)
                gwp.sa_delete(dst.switch, in_slot)
            else:
                gwp.sa_write(dst.switch, in_slot, cfg)
                te.sad_dec(src, dst, spi, in_slot, sel)
        return ups

    def _outbound_updates(self, src, dst, spi, out_slot, in_slot, cfg, delete=False, sites=None):
        """The Write for src that starts sending to dst: the SA in its outbound slot, then the SPD policy (delete:
        the policy goes first)."""
        with src.switch.collect() as ups:
            if delete:
                te.spd(src, dst, out_slot, insert=False, sites=sites)
                gwp.sa_delete(src.switch, out_slot)
            else:
                gwp.sa_write(src.switch, out_slot, cfg)
                te.spd(src, dst, out_slot, sites=sites)
        return ups

    @staticmethod
    def _dir_from(gw, a, b, pairs):
        src, dst = (a, b) if gw is a else (b, a)
        return (src, dst) + pairs[(src.name, dst.name)]

    @staticmethod
    def _dir_to(gw, a, b, pairs):
        src, dst = (b, a) if gw is a else (a, b)
        return (src, dst) + pairs[(src.name, dst.name)]

    def down(self, name):
        """Tear a tunnel down in three phases, each one Write per gateway with both gateways at once: the
        policies; then the SAs they encrypted with and the SAD-dec entries (and selectors) of the SAs they
        decrypt with; then those SAs. A removal that fails (an entry already gone) is recorded as an event and
        the others still go."""
        with self.lock:
            rec = self.records
            t = rec.tunnel(name, states=("up",))
            if not t:
                raise ControllerError(f"no tunnel {name} is up")
            refuse_ike(rec, name, "deletes")
            row = (t.a, t.b, t.suite)
            a, b = self.gateways[row[0]], self.gateways[row[1]]
            sites = rec.sites(name) or {a.name: a.lan_prefix, b.name: b.lan_prefix}
            rows = [(sa.spi, sa.src, sa.dst, sa.out_slot, sa.in_slot, sa.state) for sa in rec.sas(tunnel=name, live=True)]
            rec.release_pair(sites, name)
            rec.set_tunnel_sas_state(name, "deleted")
            rec.set_tunnel_state(name, "down")
            iid = self.journal.record("delete", name)
            rec.commit()
            checkpoint("delete:recorded")
            failures = []
            # one Write per gateway and phase, both gateways at once; each removal on its own (a Write is not
            # atomic: what fails is reported and the rest still goes)
            if row[2] == "bypass":
                writes.remove_phase({g: [("policy", lambda g=g, o=o: te.spd(g, o, None, insert=False, sites=sites)),
                                         ("policy", lambda g=g, o=o: te.spd(o, g, None, insert=False, on=g, sites=sites)),
                                         ("route", lambda g=g, o=o: te.clear_route(g, sites[o.name], insert=False))]
                                     for g, o in ((a, b), (b, a))}, failures)
            else:
                writes.remove_phase({src: [("policy", lambda src=src, dst=dst: te.spd(src, dst, None, insert=False, sites=sites))]
                                     for src, dst in ((a, b), (b, a))}, failures)
                checkpoint("delete:policies")
                # the SAs it sends with go; so do the SAD-dec entries (and their selectors) of the SAs it receives
                # under (the peers stopped sending with them in the phase before)
                phase = {a: [], b: []}
                for spi, s, d, out_slot, in_slot, state in rows:
                    src, dst = self.gateways[s], self.gateways[d]
                    if state == "active":
                        phase[src].append((f"SA {spi:#010x} outbound", lambda src=src, out_slot=out_slot: gwp.sa_delete(src.switch, out_slot)))
                        src.free_slots.append(out_slot)
                    sel = sa_selectors(s, dst, self.gateways, sites)
                    phase[dst].append((f"SA {spi:#010x} SAD-dec", lambda src=src, dst=dst, spi=spi, in_slot=in_slot:
                                       gwp.sad_dec_write(dst.switch, src.address, dst.address, spi, in_slot, insert=False)))
                    if sel:
                        phase[dst].append((None, lambda dst=dst, in_slot=in_slot, sel=sel: gwp.selectors_write(dst.switch, in_slot, *sel, insert=False)))
                writes.remove_phase(phase, failures)
                checkpoint("delete:outbound")
                phase = {a: [], b: []}
                for spi, s, d, out_slot, in_slot, _ in rows:
                    dst = self.gateways[d]
                    phase[dst].append((f"SA {spi:#010x} inbound", lambda dst=dst, in_slot=in_slot: gwp.sa_delete(dst.switch, in_slot)))
                    dst.free_slots.append(in_slot)
                writes.remove_phase(phase, failures)
            for f in failures:
                self.event(name, f"removing {f} failed (reconciliation removes what is left)")
            self.journal.done(iid)
            self.event(name, "down")
            rec.commit()
