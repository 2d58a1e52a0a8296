"""The p4sec controller's endpoint for strongSwan's charon (its p4sec kernel-ipsec plugin, ikev2/plugin): a UNIX
socket speaking JSON lines. Each request of charon (get_spi, add_sa, update_sa, query_sa, del_sa, add_policy,
del_policy, flush_*, and charon_start when a charon connects first) becomes the controller's operations on the
gateway, recorded in its store (the model: p4sec.ipsec.ike); a `subscribe` connection receives the SAs' lifetime
events from the switch (expire, soft or hard) for charon. The answer is one line: {"ok":true,...} or
{"ok":false,"error":"why"} (charon logs the reason)."""
import ipaddress
import json
import logging
import os
import socket
import threading
import time

from p4sec.ipsec import gateway as gwp
from p4sec.ipsec.ctlbase import ControllerError
from p4sec.ipsec.ike import (PEER, check_config, POLICY_DROP, POLICY_IPSEC, POLICY_OUT, IkeError, _prefix, policy_entries, punt_entries,
                             sa_config_from, selector_pairs, suite_name)

log = logging.getLogger("p4sec.ike")


class IkeEndpoint:
    """The controller's endpoint for the charons of its gateways: `attach` a gateway (the switch port and MAC where
    its charon runs: IKE is punted there), then charon's p4sec plugin connects to `path`."""

    def __init__(self, ctl, path):
        self.ctl, self.path = ctl, path
        self.ike = {}               # gateway name -> (port, mac) of its charon
        self.subscribers = {}       # gateway name -> [socket]
        self.lock = threading.Lock()
        self.requests = 0
        self.last_use = {}          # spi -> (packets, monotonic time the count was first seen at that value)
        ctl.sa_event_listeners = getattr(ctl, "sa_event_listeners", []) + [self._sa_event]
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        if os.path.exists(path):
            os.unlink(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        os.chmod(path, 0o600)
        self.sock.listen(16)
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True, name="ike-endpoint").start()

    # ------------------------------------------------------------------ the gateway side of IKE

    def attach(self, gw_name, port, mac):
        """Punt IKE for gateway `gw_name`: UDP 500/4500 to its address goes out of `port` (to `mac`, charon's
        interface) and charon's IKE from its address is let through (SPD bypass), both recorded in the store."""
        ctl = self.ctl
        with ctl.lock:
            gw = ctl.gateways.get(gw_name)
            if gw is None:
                raise IkeError(f"no gateway {gw_name}")
            self.ike[gw_name] = (int(port), mac)
            ctl.records.put_ike_port(gw_name, port, mac)
            ctl.records.commit()
            for e in self._punt_entries(gw):
                e.insert(gw.switch)
            ctl.event(gw_name, f"IKE punted to port {port} ({mac})")
            ctl.records.commit()

    def _punt_entries(self, gw):
        return punt_entries(gw, *self.ike[gw.name])

    def _policy_entries(self, gw, pol):
        return policy_entries(gw, pol)

    # ------------------------------------------------------------------ the socket

    def _accept(self):
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True, name="ike-conn").start()

    def _serve(self, conn):
        f = conn.makefile("rb")
        try:
            for line in f:
                try:
                    req = json.loads(line)
                    if not isinstance(req, dict) or not isinstance(req.get("op"), str):
                        raise IkeError("a request is a JSON object with an \"op\"")
                    if req["op"] == "subscribe":
                        with self.lock:
                            self.subscribers.setdefault(req.get("gw"), []).append(conn)
                        continue
                    answer = dict(self.handle(req), ok=True)
                except (IkeError, ControllerError) as e:
                    answer = {"ok": False, "error": str(e)}
                    log.warning("IKE %s refused: %s", req.get("op") if isinstance(req, dict) else "request", e)
                except Exception as e:      # a switch that refused a write, a malformed request
                    answer = {"ok": False, "error": f"{type(e).__name__}: {e}"}
                    log.warning("IKE request failed: %s", answer["error"])
                conn.sendall(json.dumps(answer, separators=(",", ":")).encode() + b"\n")
        except OSError:
            pass
        finally:
            with self.lock:
                for subs in self.subscribers.values():
                    if conn in subs:
                        subs.remove(conn)
            conn.close()

    def close(self):
        self._stop.set()
        try:
            self.sock.close()
        finally:
            if os.path.exists(self.path):
                os.unlink(self.path)

    # ------------------------------------------------------------------ charon's operations

    def handle(self, req):
        op = req["op"]
        fn = getattr(self, "op_" + op, None)
        if fn is None:
            raise IkeError(f"unknown operation {op!r}")
        gw = self.ctl.gateways.get(req.get("gw"))
        if gw is None:
            raise IkeError(f"no gateway {req.get('gw')!r} in the controller (charon.plugins.p4sec.gateway)")
        self.requests += 1
        with self.ctl.lock:
            return fn(gw, req) or {}

    def op_charon_start(self, gw, req):
        """A charon of this gateway started: the IKE tunnels an earlier one left (it crashed, or was restarted
        without deleting its SAs) are removed; the new charon negotiates afresh."""
        ctl = self.ctl
        rec = ctl.records
        stale = rec.sas_with_peers(gw.name, PEER)
        for spi in stale:
            self.op_del_sa(gw, {"spi": spi})
        pols = rec.ike_policies(gw.name)
        for pol in pols:
            rec.delete_ike_policy(pol)
            rec.commit()
            for e in self._policy_entries(gw, pol) if pol.get("slot") is not None else ():
                e.delete(gw.switch)
        ctl.event(gw.name, f"charon started: {len(stale)} SAs and {len(pols)} policies of an earlier charon removed")
        rec.commit()
        return {}

    def op_flush_sas(self, gw, req):
        return {}

    def op_flush_policies(self, gw, req):
        return {}

    def op_get_spi(self, gw, req):
        return {"spi": self.ctl.new_spi()}

    @staticmethod
    def _tunnel(gw, reqid):
        return f"ike-{gw.name}-{reqid}"

    def op_add_sa(self, gw, req):
        ctl = self.ctl
        cfg = sa_config_from(req)
        spi, inbound = req["spi"], bool(req.get("inbound"))
        peer = req["src"] if inbound else req["dst"]
        if ipaddress.ip_address(req["dst"] if inbound else req["src"]) != ipaddress.ip_address(gw.address):
            raise IkeError(f"SA {spi:#010x} between {req['src']} and {req['dst']} does not end at gateway {gw.name} "
                           f"({gw.address})")
        rec = ctl.records
        if rec.spi_taken(spi, live=True):
            raise IkeError(f"SPI {spi:#010x} is in use")
        rec.delete_sa(spi)
        local_ts, remote_ts = (req["dst_ts"], req["src_ts"]) if inbound else (req["src_ts"], req["dst_ts"])
        pairs = selector_pairs(gw, local_ts, remote_ts)
        remote, local = pairs[0]
        name, peer_name = self._tunnel(gw, req["reqid"]), PEER + peer
        sites = {gw.name: local, peer_name: remote}
        row = rec.tunnel(name)
        if not row or row.state != "up":
            rec.put_tunnel(name, gw.name, peer_name, suite_name(cfg), cfg["soft"], cfg["hard"], "up")
            rec.put_sites(name, sites)
            rec.put_encap(name, "udp" if cfg.get("udp_encap") else "esp")
            ctl.event(name, f"up: IKEv2 CHILD_SA with {peer} ({local} <-> {remote}, {suite_name(cfg)})")
        t0 = time.perf_counter()
        if inbound:
            slot = gw.alloc_slot()
            rec.add_sa(spi, name, peer_name, gw.name, -1, slot, cfg, "active")
            if len(pairs) > 1:      # the first pair is the tunnel's sites; the others are recorded with the SA
                rec.put_ike_selectors(spi, pairs[1:])
            rec.commit()
            try:
                with gw.switch.batch():
                    gwp.sa_write(gw.switch, slot, cfg)
                    for r, l in pairs:
                        gwp.selectors_write(gw.switch, slot, r, l)
                    gwp.sad_dec_write(gw.switch, peer, gw.address, spi, slot)
            except Exception:
                rec.set_sa_state(spi, "deleted")
                rec.commit()
                ctl.reconcile([gw.name])
                raise
            ctl.event(name, f"inbound SA {spi:#010x} from {peer} in slot {slot} ({1000 * (time.perf_counter() - t0):.2f} ms)")
        else:
            old = next(((s.spi, s.out_slot) for s in rec.sas(tunnel=name, src=gw.name, states=("active",))), None)
            slot = old[1] if old else gw.alloc_slot()
            if old:
                rec.set_sa_state(old[0], "deleted")
            rec.add_sa(spi, name, gw.name, peer_name, slot, -1, cfg, "active")
            rec.commit()
            gwp.sa_write(gw.switch, slot, cfg)     # a rekey: one swap in place, the policy keeps its slot
            ctl.event(name, f"outbound SA {spi:#010x} to {peer} in slot {slot}"
                            + (f" (replaces {old[0]:#010x} in place)" if old else "")
                             + f" ({1000 * (time.perf_counter() - t0):.2f} ms)")
            self._policies_for(gw, name, slot)
        rec.commit()
        return {}

    def _policies_for(self, gw, tunnel, slot):
        """The outbound policies of a reqid waiting for its SA (or pointing at another slot): installed now."""
        rec = self.ctl.records
        for pol in rec.ike_policies():
            if pol["gw"] == gw.name and pol["tunnel"] == tunnel and pol.get("slot") != slot:
                had = pol.get("slot")
                pol["slot"] = slot
                rec.put_ike_policy(pol)
                rec.commit()
                entry = self._policy_entries(gw, pol)
                if had is None:
                    for e in entry:
                        e.insert(gw.switch, exists_ok=True)
                else:
                    entry[1].modify(gw.switch)

    def op_update_sa(self, gw, req):
        raise IkeError(f"SA {req['spi']:#010x}: moving an SA to other addresses or ports (MOBIKE, a changed NAT "
                       f"mapping: {req.get('new_src')}:{req.get('new_src_port')} -> {req.get('new_dst')}:"
                       f"{req.get('new_dst_port')}) is not supported by the p4sec gateway; charon rekeys instead")

    def _row(self, gw, req):
        sa = self.ctl.records.sa(req["spi"])
        if not sa or gw.name not in (sa.src, sa.dst):
            return None
        return (sa.spi, sa.tunnel, sa.src, sa.dst, sa.out_slot, sa.in_slot, sa.state, sa.config)

    def op_query_sa(self, gw, req):
        row = self._row(gw, req)
        if not row or row[6] == "deleted":
            raise IkeError(f"no SA {req['spi']:#010x} on {gw.name}")
        slot = row[4] if row[2] == gw.name else row[5]
        st = gwp.sa_stats(gw.switch, slot) or {}
        packets = int(st.get("packets", 0))
        # the switch keeps counts, not times: the SA was last used no later than when its count last changed
        # between two queries (charon queries at least every `inactivity` period when that is configured)
        now = time.monotonic()
        seen = self.last_use.get(req["spi"])
        if seen is None or seen[0] != packets:
            seen = (packets, now)
            self.last_use[req["spi"]] = seen
        return {"bytes": int(st.get("bytes", 0)), "packets": packets, "idle": int(now - seen[1]) if packets else None}

    def op_del_sa(self, gw, req):
        ctl = self.ctl
        row = self._row(gw, req)
        if not row or row[6] == "deleted":
            return {}       # replaced in place by its successor, or never installed
        spi, tunnel, src, dst, out_slot, in_slot, state, cfg = row
        self.last_use.pop(spi, None)
        rec = ctl.records
        rec.set_sa_state(spi, "deleted")
        rec.commit()
        if dst == gw.name:
            sites = ctl.tunnel_sites(tunnel) or {}
            peer = json.loads(cfg)["tunnel"][0]
            extra = rec.ike_selectors(spi)
            rec.delete_ike_selectors(spi)
            rec.commit()
            with gw.switch.batch():
                gwp.sad_dec_write(gw.switch, peer, gw.address, spi, in_slot, insert=False)
                for r, l in ([(sites[src], sites[gw.name])] if sites else []) + (extra or []):
                    gwp.selectors_write(gw.switch, in_slot, r, l, insert=False)
                gwp.sa_delete(gw.switch, in_slot)
            gw.free_slots.append(in_slot)
            ctl.event(tunnel, f"inbound SA {spi:#010x} deleted")
        else:
            self._drop_policies(gw, tunnel)
            gwp.sa_delete(gw.switch, out_slot)
            gw.free_slots.append(out_slot)
            ctl.event(tunnel, f"outbound SA {spi:#010x} deleted")
        if not rec.tunnel_has_live_sas(tunnel):
            rec.set_tunnel_state(tunnel, "down")
            rec.forget_sites_and_encap(tunnel)
            ctl.event(tunnel, "down: its last SA was deleted")
        rec.commit()
        return {}

    def _drop_policies(self, gw, tunnel):
        """The outbound SA of `tunnel` goes: its policies stop pointing at the slot (removed from the SPD, kept
        recorded while charon holds them)."""
        rec = self.ctl.records
        for pol in rec.ike_policies():
            if pol["gw"] == gw.name and pol["tunnel"] == tunnel and pol.get("slot") is not None:
                self._policy_entries(gw, pol)[1].delete(gw.switch)
                pol["slot"] = None
                rec.put_ike_policy(pol)
        rec.commit()

    @staticmethod
    def _policy_ends(req):
        """(source, destination) prefixes of a policy request: with the gateway, what names its record."""
        return _prefix(req["src_ts"], "source"), _prefix(req["dst_ts"], "destination")

    def op_add_policy(self, gw, req):
        if req.get("dir") != POLICY_OUT:
            return {}       # inbound and forward policies: the inbound SAs' selectors are the gateway's check
        if req.get("type") == POLICY_DROP:
            return {}       # the SPD discards what no policy matches (charon's fallback drop policies hold already)
        if req.get("type") != POLICY_IPSEC:
            raise IkeError(f"policy type {req.get('type')} (pass shunts) is not supported by the p4sec plugin")
        ctl = self.ctl
        rec = ctl.records
        src, dst = self._policy_ends(req)
        pol = rec.ike_policy(gw.name, src, dst)
        tunnel = self._tunnel(gw, req.get("reqid"))
        if pol:
            if pol["tunnel"] != tunnel:
                raise IkeError(f"{pol['src']} -> {pol['dst']} is protected by {pol['tunnel']} already")
            pol["count"] += 1
            rec.put_ike_policy(pol)
            rec.commit()
            return {}
        pol = {"gw": gw.name, "tunnel": tunnel, "src": src, "dst": dst, "peer": req["dst"], "count": 1, "slot": None}
        rec.put_ike_policy(pol)
        rec.commit()
        out = rec.sas(tunnel=tunnel, src=gw.name, states=("active",))
        if out:
            self._policies_for(gw, tunnel, out[0].out_slot)
        ctl.event(tunnel, f"policy {pol['src']} -> {pol['dst']} via {pol['peer']}")
        rec.commit()
        return {}

    def op_del_policy(self, gw, req):
        if req.get("dir") != POLICY_OUT or req.get("type") != POLICY_IPSEC:
            return {}       # only outbound IPsec policies are recorded (add_policy)
        ctl = self.ctl
        rec = ctl.records
        pol = rec.ike_policy(gw.name, *self._policy_ends(req))
        if not pol:
            return {}
        pol["count"] -= 1
        if pol["count"] > 0:
            rec.put_ike_policy(pol)
        else:
            rec.delete_ike_policy(pol)
            rec.commit()
            if pol.get("slot") is not None:
                self._policy_entries(gw, pol)[1].delete(gw.switch)
                others = [p["peer"] for p in rec.ike_policies(gw.name)]
                if pol["peer"] not in others:
                    self._policy_entries(gw, pol)[0].delete(gw.switch)
            ctl.event(pol["tunnel"], f"policy {pol['src']} -> {pol['dst']} removed")
        rec.commit()
        return {}

    # ------------------------------------------------------------------ lifetime events to charon

    def _sa_event(self, gw_name, spi, event):
        """controller._on_digest's hook: an IKE SA's soft (1) or hard (2) lifetime reached on the switch goes to
        charon as an expire event; True if the SA is one of ours."""
        sa = self.ctl.records.sa(spi)
        row = (sa.src, sa.dst, sa.config) if sa else None
        if not row or not (row[0].startswith(PEER) or row[1].startswith(PEER)):
            return False
        dst = json.loads(row[2])["tunnel"][1]
        msg = json.dumps({"event": "expire", "proto": 50, "spi": spi, "dst": dst, "hard": 1 if event == 2 else 0},
                         separators=(",", ":")).encode() + b"\n"
        with self.lock:
            subs = list(self.subscribers.get(gw_name, []))
        for s in subs:
            try:
                s.sendall(msg)
            except OSError:
                pass
        self.ctl.event(gw_name, f"{'hard' if event == 2 else 'soft'} lifetime of IKE SA {spi:#010x}: charon told "
                                f"({len(subs)} listening)")
        return True


def start_from_config(cfg, ctl, path="configuration"):
    """The IKE endpoint of a controller configuration's `ike:` section (None without one; checked first: a
    ControllerError names what is wrong), its gateways' IKE punted; a reconciliation then brings back the IKE
    tunnels' policies recorded in the store."""
    ike = check_config(cfg, path)
    if not ike:
        return None
    ep = IkeEndpoint(ctl, ike["socket"])
    for name, g in ike["gateways"].items():
        ep.attach(name, g["port"], g["mac"])
    ctl.reconcile()
    return ep
