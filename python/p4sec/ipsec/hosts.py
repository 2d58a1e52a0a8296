"""Host-to-site tunnels of the IPsec controller (road warriors with `p4sec-agent`): phase 1 (the gateway learns
the host's SA, a route to the host), phase 2 (the gateway sends), renewals asked for by the agent and teardown.
Each records its outcome and an intent before it writes, and passes named checkpoints (see
p4sec.ipsec.controller).

`HostTunnels` is a part of p4sec.ipsec.controller.IpsecController (its `hosts`; the controller's `host_*` methods
hand over to it). It counts the renewals it made (`renewals`) and drives the controller only through these of its
members: `db`, `lock`, `gateways` (taken once), `event`, `reconcile`, `retire_later`, `grace`, and its SA
helpers `make_sa`, `selectors`, `undo_in`."""
import json
import time

from p4sec.ipsec import gateway as gwp
from p4sec.ipsec import tunnel_entries as te
from p4sec.ipsec.ctlbase import HOST, SUITES, ControllerError, Gateway, _lpm, checkpoint


class HostTunnels:
    """The host-to-site operations of IpsecController (see the module's description). `ctl`: the controller;
    `journal`: its intent journal (p4sec.ipsec.recovery.IntentLog)."""

    def __init__(self, ctl, journal):
        self.ctl, self.journal = ctl, journal
        self.db, self.lock, self.gateways = ctl.db, ctl.lock, ctl.gateways
        self.renewals = 0       # host renewals done (the controller's `renewals` adds its own)

    def is_host_sa(self, spi):
        """Whether SA `spi` is a road warrior's (its agent renews it, not the controller)."""
        r = self.db.execute("select src, dst from sa where spi = ?", (spi,)).fetchone()
        return bool(r) and (r[0].startswith(HOST) or r[1].startswith(HOST))

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
            if self.db.execute("select 1 from tunnel where name = ? and state in ('up', 'pending')", (name,)).fetchone():
                raise ControllerError(f"tunnel {name} is already up")
            host = Gateway(HOST + client, None, host_address, inner if "/" in inner else f"{inner}/{128 if ':' in inner else 32}",
                           0, host_mac, 0, host_mac, host_address + ("/128" if ":" in host_address else "/32"))
            t0 = time.perf_counter()
            self.db.execute("insert or replace into tunnel values (?, ?, ?, ?, ?, ?, ?, 'pending')",
                            (name, gw_name, host.name, suite, json.dumps(soft), json.dumps(hard), time.time()))
            self.db.execute("insert or replace into kv values (?, ?)", (f"encap:{name}", encap or "esp"))
            up_spi, up_cfg = self.ctl.make_sa(name, host, gw, suite, soft, hard)        # host -> gateway
            down_spi, down_cfg = self.ctl.make_sa(name, gw, host, suite, soft, hard)    # gateway -> host
            out_slot, in_slot = gw.alloc_slot(), gw.alloc_slot()
            self.db.execute("insert into sa values (?, ?, ?, ?, ?, ?, ?, ?, 'active')",
                            (up_spi, name, host.name, gw.name, -1, in_slot, json.dumps(up_cfg), time.time()))
            self.db.execute("insert into sa values (?, ?, ?, ?, ?, ?, ?, ?, 'inbound')",
                            (down_spi, name, gw.name, host.name, out_slot, -1, json.dumps(down_cfg), time.time()))
            self.db.execute("insert or replace into kv values (?, ?)", (f"inner:{name}", host.lan_prefix))
            self.db.execute("insert or replace into kv values (?, ?)", (f"hostinfo:{name}", json.dumps({"address": host_address, "mac": host_mac})))
            iid = self.journal.record("host-up", name, up=up_spi, down=down_spi)
            self.db.commit()
            checkpoint("host-up:recorded")
            try:
                with gw.switch.batch():
                    gwp.sa_write(gw.switch, in_slot, up_cfg)
                    te.sad_dec(host, gw, up_spi, in_slot, self.ctl.selectors(name, host.name, gw))
                    _lpm(gw.switch, host.wan_prefix, host_mac, gw.wan_port)
            except Exception:
                self.db.execute("update tunnel set state = 'down' where name = ?", (name,))
                self.db.execute("update sa set state = 'deleted' where spi in (?, ?)", (up_spi, down_spi))
                self.journal.done(iid)
                self.db.commit()
                self.ctl.reconcile([gw_name])
                raise
            checkpoint("host-up:inbound")
            self.journal.done(iid)
            self.ctl.event(name, f"host phase 1 for {client} at {host_address}: SAD-dec {up_spi:#010x} on {gw_name} "
                             f"({1000 * (time.perf_counter() - t0):.2f} ms)")
            self.db.commit()
            return {"tunnel": name, "gateway": gw.address, "site": gw.lan_prefix, "inner": host.lan_prefix, "suite": suite,
                    "outbound": up_cfg, "inbound": down_cfg}

    def ready(self, client, profile):
        """Phase 2: the agent installed its SAs; the gateway now sends to the host (SAD-enc, then the policy)."""
        with self.lock:
            name = f"{profile}@{client}"
            row = self.db.execute("select a, b from tunnel where name = ? and state = 'pending'", (name,)).fetchone()
            if not row:
                raise ControllerError(f"no pending tunnel {name}")
            gw = self.gateways[row[0]]
            spi, out_slot, cfg = self.db.execute("select spi, out_slot, config from sa where tunnel = ? and src = ? and state = 'inbound'",
                                                 (name, gw.name)).fetchone()
            t0 = time.perf_counter()
            self.db.execute("update sa set state = 'active' where spi = ?", (spi,))
            self.db.execute("update tunnel set state = 'up' where name = ?", (name,))
            iid = self.journal.record("host-ready", name, fresh=[spi])
            self.db.commit()
            checkpoint("host-ready:recorded")
            try:
                with gw.switch.batch():
                    gwp.sa_write(gw.switch, out_slot, json.loads(cfg))
                    te.host_spd(gw, self.inner(name), out_slot)
            except Exception:
                self.db.execute("update sa set state = 'inbound' where spi = ?", (spi,))
                self.db.execute("update tunnel set state = 'pending' where name = ?", (name,))
                self.journal.done(iid)
                self.db.commit()
                self.ctl.reconcile([gw.name])
                raise
            checkpoint("host-ready:outbound")
            self.journal.done(iid)
            self.ctl.event(name, f"host phase 2: SAD-enc {spi:#010x} and policy on {gw.name} ({1000 * (time.perf_counter() - t0):.2f} ms); up")
            self.db.commit()

    def inner(self, name):
        """The inner address (a prefix) of host tunnel `name`'s host, as recorded (None if not recorded)."""
        r = self.db.execute("select value from kv where key = ?", (f"inner:{name}",)).fetchone()
        return r[0] if r else None

    def info(self, name):
        """{address, mac} of host tunnel `name`'s host as it announced them in phase 1 (None if not recorded)."""
        r = self.db.execute("select value from kv where key = ?", (f"hostinfo:{name}",)).fetchone()
        return json.loads(r[0]) if r else None

    def renew(self, client, profile):
        """Renewal of a host tunnel, asked for by its agent (the host's SAs reached their soft limit): the gateway
        learns the host's next SA (SAD-dec) at once; the next gateway->host SA is returned for the agent to install
        inbound first, and replaces the gateway's outbound SA in `renew_ready`."""
        with self.lock:
            name = f"{profile}@{client}"
            row = self.db.execute("select a, b, suite, soft, hard from tunnel where name = ? and state = 'up'", (name,)).fetchone()
            if not row:
                raise ControllerError(f"no tunnel {name} is up")
            gw = self.gateways[row[0]]
            suite, soft, hard = row[2], json.loads(row[3]), json.loads(row[4])
            old_up, up_cfg_old = self.db.execute("select spi, config from sa where tunnel = ? and dst = ? and state = 'active'", (name, gw.name)).fetchone()
            down_slot = self.db.execute("select out_slot from sa where tunnel = ? and src = ? and state = 'active'", (name, gw.name)).fetchone()[0]
            stale = self.db.execute("select spi from sa where tunnel = ? and src = ? and state = 'inbound'", (name, gw.name)).fetchone()
            if stale:
                # the agent asks again: it gave up the renewal it asked for before (nothing of that SA is on the
                # gateway yet; it would have been installed at RenewReady)
                self.db.execute("update sa set state = 'deleted' where spi = ?", stale)
                self.ctl.event(name, f"host renewal for {client}: unfinished renewal to SA {stale[0]:#010x} abandoned")
            host_addr = json.loads(up_cfg_old)["tunnel"][0]
            host = Gateway(row[1], None, host_addr, "", 0, "", 0, "", "")
            t0 = time.perf_counter()
            up_spi, up_cfg = self.ctl.make_sa(name, host, gw, suite, soft, hard)
            down_spi, down_cfg = self.ctl.make_sa(name, gw, host, suite, soft, hard)
            in_slot = gw.alloc_slot()
            self.db.execute("insert into sa values (?, ?, ?, ?, ?, ?, ?, ?, 'active')",
                            (up_spi, name, host.name, gw.name, -1, in_slot, json.dumps(up_cfg), time.time()))
            self.db.execute("insert into sa values (?, ?, ?, ?, ?, ?, ?, ?, 'inbound')",
                            (down_spi, name, gw.name, host.name, down_slot, -1, json.dumps(down_cfg), time.time()))
            self.db.execute("update sa set state = 'retiring' where spi = ?", (old_up,))
            iid = self.journal.record("host-renew", name, up=up_spi, down=down_spi, old=old_up)
            self.db.commit()
            checkpoint("host-renew:recorded")
            try:
                with gw.switch.batch():
                    gwp.sa_write(gw.switch, in_slot, up_cfg)
                    te.sad_dec(host, gw, up_spi, in_slot, self.ctl.selectors(name, host.name, gw))
            except Exception:
                self.ctl.undo_in(name, host, gw, up_spi, in_slot)
                self.db.execute("update sa set state = 'deleted' where spi in (?, ?)", (up_spi, down_spi))
                self.db.execute("update sa set state = 'active' where spi = ?", (old_up,))
                self.journal.done(iid)
                self.db.commit()
                raise
            checkpoint("host-renew:inbound")
            self.journal.done(iid)
            self.renewals += 1
            self.ctl.event(name, f"host renewal for {client}: SAD-dec {up_spi:#010x} on {gw.name} ({1000 * (time.perf_counter() - t0):.2f} ms); "
                             f"old SAD-dec {old_up:#010x} removed in {self.ctl.grace:g} s")
            self.db.commit()
            self.ctl.retire_later(old_up)
            return {"outbound": up_cfg, "inbound": down_cfg}

    def renew_ready(self, client, profile):
        """The agent installed the new gateway->host SA inbound: the gateway's outbound SA is swapped in place."""
        with self.lock:
            name = f"{profile}@{client}"
            row = self.db.execute("select a from tunnel where name = ? and state = 'up'", (name,)).fetchone()
            if not row:
                raise ControllerError(f"no tunnel {name} is up")
            gw = self.gateways[row[0]]
            new = self.db.execute("select spi, out_slot, config from sa where tunnel = ? and src = ? and state = 'inbound'", (name, gw.name)).fetchone()
            if not new:
                raise ControllerError(f"no renewal of {name} is waiting")
            old = self.db.execute("select spi from sa where tunnel = ? and src = ? and state = 'active'", (name, gw.name)).fetchone()
            self.db.execute("update sa set state = 'active' where spi = ?", (new[0],))
            if old:
                self.db.execute("update sa set state = 'deleted' where spi = ?", (old[0],))
            iid = self.journal.record("host-renew-ready", name, fresh=[new[0]])
            self.db.commit()
            checkpoint("host-renew-ready:recorded")
            try:
                gwp.sa_write(gw.switch, new[1], json.loads(new[2]))
            except Exception:
                self.db.execute("update sa set state = 'inbound' where spi = ?", (new[0],))
                if old:
                    self.db.execute("update sa set state = 'active' where spi = ?", (old[0],))
                self.journal.done(iid)
                self.db.commit()
                raise
            checkpoint("host-renew-ready:outbound")
            self.journal.done(iid)
            self.ctl.event(name, f"host renewal for {client}: SAD-enc {old[0] if old else 0:#010x} -> {new[0]:#010x} on {gw.name} slot {new[1]}")
            self.db.commit()

    def down(self, client, profile):
        """Tear a host tunnel down: the gateway's policy and outbound SA first, then the SAs it receives with,
        then the route to the host. A removal that fails is recorded as an event and the others still go."""
        with self.lock:
            name = f"{profile}@{client}"
            row = self.db.execute("select a, state from tunnel where name = ? and state in ('up', 'pending')", (name,)).fetchone()
            if not row:
                raise ControllerError(f"no tunnel {name} is up")
            gw = self.gateways[row[0]]
            rows = self.db.execute("select spi, src, dst, out_slot, in_slot, state, config from sa where tunnel = ? and state != 'deleted'",
                                   (name,)).fetchall()
            inner = self.inner(name)
            self.db.execute("update sa set state = 'deleted' where tunnel = ?", (name,))
            self.db.execute("update tunnel set state = 'down' where name = ?", (name,))
            iid = self.journal.record("host-down", name)
            self.db.commit()
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
                self.ctl.event(name, f"removing {f} failed (reconciliation removes what is left)")
            self.journal.done(iid)
            self.ctl.event(name, "down")
            self.db.commit()
