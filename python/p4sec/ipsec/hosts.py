"""Host-to-site tunnels of the IPsec controller (road warriors with `p4sec-agent`): phase 1 (the gateway learns
the host's SA, a route to the host), phase 2 (the gateway sends), renewals asked for by the agent and teardown.
Each records its outcome and an intent before it writes, and passes named checkpoints (see
p4sec.ipsec.controller).

`HostTunnels` is a part of p4sec.ipsec.controller.IpsecController (its `hosts`; the controller's `host_*` methods
hand over to it). It counts the renewals it made (`renewals`). It does not see the controller: it is handed what
it uses (SEAM): the store's records (p4sec.ipsec.store.Records), the controller's lock and gateways, its intent
journal, its functions `event`, `reconcile` and `retire_later`, its SA helpers `make_sa`, `selectors` and
`undo_in`, and the grace period of old SAs (`grace`, seconds)."""
import json
import time

from p4sec.ipsec import gateway as gwp
from p4sec.ipsec import tunnel_entries as te
from p4sec.ipsec.ctlbase import HOST, SUITES, ControllerError, Gateway, _lpm, checkpoint


# what HostTunnels is handed (its constructor's parameters, in order)
SEAM = ("records", "lock", "gateways", "journal", "event", "reconcile", "retire_later", "make_sa", "selectors", "undo_in",
        "grace")


class HostTunnels:
    """The host-to-site operations of IpsecController (see the module's description): `records` (the store's),
    `lock` (the controller's), `gateways` (the controller's, name -> Gateway), `journal` (its intent journal,
    p4sec.ipsec.recovery.IntentLog), `event(tunnel, what)`, `reconcile(names)`, `retire_later(spi)` (retire an old
    SA after the grace period), `make_sa(tunnel, src, dst, suite, soft, hard)` -> (spi, config),
    `selectors(tunnel, src_name, dst)`, `undo_in(tunnel, src, dst, spi, in_slot)` (remove an SA installed
    inbound), `grace` (seconds, for the events)."""

    def __init__(self, records, lock, gateways, journal, event, reconcile, retire_later, make_sa, selectors, undo_in, grace):
        self.records, self.lock, self.gateways, self.journal = records, lock, gateways, journal
        self.event, self.reconcile, self.retire_later = event, reconcile, retire_later
        self.make_sa, self.selectors, self.undo_in, self.grace = make_sa, selectors, undo_in, grace
        self.renewals = 0       # host renewals done (the controller's `renewals` adds its own)

    def is_host_sa(self, spi):
        """Whether SA `spi` is a road warrior's (its agent renews it, not the controller)."""
        r = self.records.sa(spi)
        return bool(r) and (r.src.startswith(HOST) or r.dst.startswith(HOST))

    def up(self, client, profile, gw_name, host_address, host_mac, inner, suite="aes-gcm-128", soft=None, hard=None, encap=None):
        """Phase 1 of a host-to-site tunnel for `client` (an agent) to the site behind gateway `gw_name`: the
        gateway learns the SA the host will send with (SAD-dec) and a route to the host; the host's SAs are
        returned for the agent to install. The gateway starts sending only after `ready`. `encap` "udp": the
        SAs send ESP in UDP (RFC 3948, port 4500 both ways), also after renewals."""
        if suite not in SUITES:
            raise ControllerError(f"unknown cipher suite {suite!r}")
        if encap not in (None, "esp", "udp"):
            raise ControllerError(f"unknown encapsulation {encap!r} (esp, udp)")
        with self.lock:
            gw = self.gateways.get(gw_name)
            if gw is None:
                raise ControllerError(f"no gateway {gw_name}")
            name = f"{profile}@{client}"
            rec = self.records
            if rec.tunnel(name, states=("up", "pending")):
                raise ControllerError(f"tunnel {name} is already up")
            host = Gateway(HOST + client, None, host_address, inner if "/" in inner else f"{inner}/{128 if ':' in inner else 32}",
                           0, host_mac, 0, host_mac, host_address + ("/128" if ":" in host_address else "/32"))
            t0 = time.perf_counter()
            rec.put_tunnel(name, gw_name, host.name, suite, soft, hard, "pending")
            rec.put_encap(name, encap or "esp")
            up_spi, up_cfg = self.make_sa(name, host, gw, suite, soft, hard)        # host -> gateway
            down_spi, down_cfg = self.make_sa(name, gw, host, suite, soft, hard)    # gateway -> host
            out_slot, in_slot = gw.alloc_slot(), gw.alloc_slot()
            rec.add_sa(up_spi, name, host.name, gw.name, -1, in_slot, up_cfg, "active")
            rec.add_sa(down_spi, name, gw.name, host.name, out_slot, -1, down_cfg, "inbound")
            rec.put_inner(name, host.lan_prefix)
            rec.put_host_info(name, {"address": host_address, "mac": host_mac})
            iid = self.journal.record("host-up", name, up=up_spi, down=down_spi)
            rec.commit()
            checkpoint("host-up:recorded")
            try:
                with gw.switch.batch():
                    gwp.sa_write(gw.switch, in_slot, up_cfg)
                    te.sad_dec(host, gw, up_spi, in_slot, self.selectors(name, host.name, gw))
                    _lpm(gw.switch, host.wan_prefix, host_mac, gw.wan_port)
            except Exception:
                rec.set_tunnel_state(name, "down")
                rec.set_sa_state((up_spi, down_spi), "deleted")
                self.journal.done(iid)
                rec.commit()
                self.reconcile([gw_name])
                raise
            checkpoint("host-up:inbound")
            self.journal.done(iid)
            self.event(name, f"host phase 1 for {client} at {host_address}: SAD-dec {up_spi:#010x} on {gw_name} "
                       f"({1000 * (time.perf_counter() - t0):.2f} ms)")
            rec.commit()
            return {"tunnel": name, "gateway": gw.address, "site": gw.lan_prefix, "inner": host.lan_prefix, "suite": suite,
                    "outbound": up_cfg, "inbound": down_cfg}

    def ready(self, client, profile):
        """Phase 2: the agent installed its SAs; the gateway now sends to the host (SAD-enc, then the policy)."""
        with self.lock:
            name = f"{profile}@{client}"
            rec = self.records
            t = rec.tunnel(name, states=("pending",))
            if not t:
                raise ControllerError(f"no pending tunnel {name}")
            gw = self.gateways[t.a]
            sa = rec.sas(tunnel=name, src=gw.name, states=("inbound",))[0]
            spi, out_slot, cfg = sa.spi, sa.out_slot, sa.config
            t0 = time.perf_counter()
            rec.set_sa_state(spi, "active")
            rec.set_tunnel_state(name, "up")
            iid = self.journal.record("host-ready", name, fresh=[spi])
            rec.commit()
            checkpoint("host-ready:recorded")
            try:
                with gw.switch.batch():
                    gwp.sa_write(gw.switch, out_slot, json.loads(cfg))
                    te.host_spd(gw, self.inner(name), out_slot)
            except Exception:
                rec.set_sa_state(spi, "inbound")
                rec.set_tunnel_state(name, "pending")
                self.journal.done(iid)
                rec.commit()
                self.reconcile([gw.name])
                raise
            checkpoint("host-ready:outbound")
            self.journal.done(iid)
            self.event(name, f"host phase 2: SAD-enc {spi:#010x} and policy on {gw.name} ({1000 * (time.perf_counter() - t0):.2f} ms); up")
            rec.commit()

    def inner(self, name):
        """The inner address (a prefix) of host tunnel `name`'s host, as recorded (None if not recorded)."""
        return self.records.inner(name)

    def info(self, name):
        """{address, mac} of host tunnel `name`'s host as it announced them in phase 1 (None if not recorded)."""
        return self.records.host_info(name)

    def renew(self, client, profile):
        """Renewal of a host tunnel, asked for by its agent (the host's SAs reached their soft limit): the gateway
        learns the host's next SA (SAD-dec) at once; the next gateway->host SA is returned for the agent to install
        inbound first, and replaces the gateway's outbound SA in `renew_ready`."""
        with self.lock:
            name = f"{profile}@{client}"
            rec = self.records
            row = rec.tunnel(name, states=("up",))
            if not row:
                raise ControllerError(f"no tunnel {name} is up")
            gw = self.gateways[row.a]
            suite, soft, hard = row.suite, json.loads(row.soft), json.loads(row.hard)
            old = rec.sas(tunnel=name, dst=gw.name, states=("active",))[0]
            old_up, up_cfg_old = old.spi, old.config
            down_slot = rec.sas(tunnel=name, src=gw.name, states=("active",))[0].out_slot
            stale = rec.sas(tunnel=name, src=gw.name, states=("inbound",))
            if stale:
                # the agent asks again: it gave up the renewal it asked for before (nothing of that SA is on the
                # gateway yet; it would have been installed at RenewReady)
                rec.set_sa_state(stale[0].spi, "deleted")
                self.event(name, f"host renewal for {client}: unfinished renewal to SA {stale[0].spi:#010x} abandoned")
            host_addr = json.loads(up_cfg_old)["tunnel"][0]
            host = Gateway(row.b, None, host_addr, "", 0, "", 0, "", "")
            t0 = time.perf_counter()
            up_spi, up_cfg = self.make_sa(name, host, gw, suite, soft, hard)
            down_spi, down_cfg = self.make_sa(name, gw, host, suite, soft, hard)
            in_slot = gw.alloc_slot()
            rec.add_sa(up_spi, name, host.name, gw.name, -1, in_slot, up_cfg, "active")
            rec.add_sa(down_spi, name, gw.name, host.name, down_slot, -1, down_cfg, "inbound")
            rec.set_sa_state(old_up, "retiring")
            iid = self.journal.record("host-renew", name, up=up_spi, down=down_spi, old=old_up)
            rec.commit()
            checkpoint("host-renew:recorded")
            try:
                with gw.switch.batch():
                    gwp.sa_write(gw.switch, in_slot, up_cfg)
                    te.sad_dec(host, gw, up_spi, in_slot, self.selectors(name, host.name, gw))
            except Exception:
                self.undo_in(name, host, gw, up_spi, in_slot)
                rec.set_sa_state((up_spi, down_spi), "deleted")
                rec.set_sa_state(old_up, "active")
                self.journal.done(iid)
                rec.commit()
                raise
            checkpoint("host-renew:inbound")
            self.journal.done(iid)
            self.renewals += 1
            self.event(name, f"host renewal for {client}: SAD-dec {up_spi:#010x} on {gw.name} ({1000 * (time.perf_counter() - t0):.2f} ms); "
                       f"old SAD-dec {old_up:#010x} removed in {self.grace:g} s")
            rec.commit()
            self.retire_later(old_up)
            return {"outbound": up_cfg, "inbound": down_cfg}

    def renew_ready(self, client, profile):
        """The agent installed the new gateway->host SA inbound: the gateway's outbound SA is swapped in place."""
        with self.lock:
            name = f"{profile}@{client}"
            rec = self.records
            row = rec.tunnel(name, states=("up",))
            if not row:
                raise ControllerError(f"no tunnel {name} is up")
            gw = self.gateways[row.a]
            new = next(((s.spi, s.out_slot, s.config) for s in rec.sas(tunnel=name, src=gw.name, states=("inbound",))), None)
            if not new:
                raise ControllerError(f"no renewal of {name} is waiting")
            old = next(((s.spi,) for s in rec.sas(tunnel=name, src=gw.name, states=("active",))), None)
            rec.set_sa_state(new[0], "active")
            if old:
                rec.set_sa_state(old[0], "deleted")
            iid = self.journal.record("host-renew-ready", name, fresh=[new[0]])
            rec.commit()
            checkpoint("host-renew-ready:recorded")
            try:
                gwp.sa_write(gw.switch, new[1], json.loads(new[2]))
            except Exception:
                rec.set_sa_state(new[0], "inbound")
                if old:
                    rec.set_sa_state(old[0], "active")
                self.journal.done(iid)
                rec.commit()
                raise
            checkpoint("host-renew-ready:outbound")
            self.journal.done(iid)
            self.event(name, f"host renewal for {client}: SAD-enc {old[0] if old else 0:#010x} -> {new[0]:#010x} on {gw.name} slot {new[1]}")
            rec.commit()

    def down(self, client, profile):
        """Tear a host tunnel down: the gateway's policy and outbound SA first, then the SAs it receives with,
        then the route to the host. A removal that fails is recorded as an event and the others still go."""
        with self.lock:
            name = f"{profile}@{client}"
            rec = self.records
            row = rec.tunnel(name, states=("up", "pending"))
            if not row:
                raise ControllerError(f"no tunnel {name} is up")
            gw = self.gateways[row.a]
            rows = [(s.spi, s.src, s.dst, s.out_slot, s.in_slot, s.state, s.config) for s in rec.sas(tunnel=name, live=True)]
            inner = self.inner(name)
            rec.set_tunnel_sas_state(name, "deleted")
            rec.set_tunnel_state(name, "down")
            iid = self.journal.record("host-down", name)
            rec.commit()
            checkpoint("host-down:recorded")
            host_addr = None
            failures = []
            # the policy and the gateway's outbound SA first, then what it receives with, then the route
            for spi, src, dst, out_slot, in_slot, state, cfg in rows:
                if src == gw.name:      # gateway -> host (a renewal's next SA shares the slot)
                    try:
                        if state == "active":
                            te.host_spd(gw, inner, out_slot, insert=False)
                            gwp.sa_delete(gw.switch, out_slot)
                    except Exception as e:
                        failures.append(f"SA {spi:#010x}: {e}")
                    if state in ("active", "inbound") and out_slot not in gw.free_slots:
                        gw.free_slots.append(out_slot)
            checkpoint("host-down:outbound")
            for spi, src, dst, out_slot, in_slot, state, cfg in rows:
                if dst == gw.name:      # host -> gateway (the active SA and any old one still retiring)
                    host_addr = json.loads(cfg)["tunnel"][0]
                    try:
                        te.sad_dec(Gateway(src, None, host_addr, "", 0, "", 0, "", ""), gw, spi, in_slot, (inner, gw.lan_prefix) if inner else None,
                                      insert=False)
                        gwp.sa_delete(gw.switch, in_slot)
                        gw.free_slots.append(in_slot)
                    except Exception as e:
                        failures.append(f"SA {spi:#010x}: {e}")
            checkpoint("host-down:inbound")
            if host_addr is not None:
                try:
                    _lpm(gw.switch, host_addr + ("/128" if ":" in host_addr else "/32"), insert=False)
                except Exception as e:
                    failures.append(f"route to {host_addr}: {e}")
            for f in failures:
                self.event(name, f"removing {f} failed (reconciliation removes what is left)")
            self.journal.done(iid)
            self.event(name, "down")
            rec.commit()
