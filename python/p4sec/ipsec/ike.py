"""IKEv2-negotiated tunnels: the p4sec controller's endpoint for strongSwan's charon (the p4sec kernel-ipsec plugin,
ikev2/plugin). charon negotiates with any standard IKEv2 peer; what it would give the kernel (get_spi, add_sa,
update_sa, query_sa, del_sa, add_policy, del_policy) comes here as JSON lines over a UNIX socket and becomes the
controller's own operations on the gateway's SAD/SPD, recorded in its store like the IKE-less tunnels: a controller
restart or a switch that lost its state gets them back by reconciliation.

The model in the store: one tunnel per CHILD_SA reqid of a gateway (`ike-<gateway>-<reqid>`, peer `ike:<address>`,
its traffic selectors as the tunnel's sites), one `sa` row per SA. An inbound SA gets a slot, its selectors and a
SAD-dec entry; the outbound SA of a reqid takes the reqid's slot (a rekey's new SA replaces the old one in place, one
atomic swap: make-before-break); the outbound policy (SPD protect) points at that slot. Time lifetimes are charon's
(it rekeys and expires on its own timers); byte and packet lifetimes are the switch's, whose soft/hard events go
back to charon as expire events (a `subscribe` connection). The gateway punts IKE (UDP 500 and 4500 to its address,
and charon's answers) between the WAN and the port where charon runs (SPD bypass entries and a route).

Not supported (refused with the reason, which charon logs): traffic selectors with protocols or ports, ranges that
are not subnets, several selectors per CHILD_SA, IPComp, transport mode, changing an SA's addresses (MOBIKE or a NAT
mapping change: charon rekeys instead).
"""
import ipaddress
import json
import logging
import os
import socket
import threading
import time

from p4sec.infra import runtime
from p4sec.ipsec import gateway as gwp
from p4sec.ipsec.ctlbase import SWITCH_MAC, ControllerError

log = logging.getLogger("p4sec.ike")

PEER = "ike:"
IKE_PORTS = (500, 4500)
IKE_PRIORITY = 100          # the IKE bypass entries come before every tunnel's policy
POLICY_PRIORITY = 30        # an IKE tunnel's SPD entry (IKE-less site-to-site: 10, hosts: 20)
MODE_TUNNEL = 2             # ipsec_mode_t
POLICY_OUT = 1              # policy_dir_t (IN 0, OUT 1, FWD 2)
POLICY_IPSEC = 1            # policy_type_t (IPSEC 1, PASS 2, DROP 3)

# IKEv2 transform IDs (RFC 7296, RFC 4106, RFC 7634) -> the esp_sad cipher, by key material length
CIPHERS = {
    (12, 16): "AesCbc128", (12, 32): "AesCbc256",
    (13, 20): "AesCtr128", (13, 36): "AesCtr256",
    (20, 20): "AesGcm128", (20, 36): "AesGcm256",
    (28, 36): "ChaCha20Poly1305",
    (11, 0): "Null",
}
AEAD = {20, 28}
INTEGS = {1: "HmacMd5_96", 2: "HmacSha1_96", 12: "HmacSha256_128"}
AUTH_UNDEFINED = 1024


class IkeError(ControllerError):
    pass


def _prefix(ts, what):
    """The prefix of a traffic selector from the plugin, or IkeError saying why it cannot be one."""
    if not ts.get("exact"):
        raise IkeError(f"{what} traffic selector {ts.get('net')} is an address range, not a subnet (p4sec's SPD "
                       "matches prefixes)")
    if ts.get("proto") or ts.get("from_port", 0) != 0 or ts.get("to_port", 65535) != 65535:
        raise IkeError(f"{what} traffic selector {ts['net']} limits protocol {ts.get('proto')} or ports "
                       f"{ts.get('from_port')}-{ts.get('to_port')}: only whole-prefix selectors are supported")
    return str(ipaddress.ip_network(ts["net"], strict=False))


def _one(tss, what):
    if len(tss) != 1:
        raise IkeError(f"{len(tss)} {what} traffic selectors in one CHILD_SA: the p4sec gateway takes one per "
                       "CHILD_SA (configure one CHILD_SA per pair of subnets)")
    return _prefix(tss[0], what)


def _limit(pair):
    """Lifetime [rekey (soft), life (hard)] of the plugin -> (soft, hard), 0 meaning none."""
    soft, hard = pair
    return soft or None, hard or None


def sa_config_from(req):
    """The esp_sad configuration of the SA charon negotiated (add_sa), or IkeError."""
    if req.get("mode") != MODE_TUNNEL:
        raise IkeError(f"mode {req.get('mode')} (ipsec_mode_t): the p4sec gateway does tunnel mode only")
    if req.get("ipcomp"):
        raise IkeError("IPComp is not supported by the p4sec gateway")
    enc_key, int_key = bytes.fromhex(req["enc_key"]), bytes.fromhex(req["int_key"])
    cipher = CIPHERS.get((req["enc_alg"], len(enc_key)))
    if cipher is None:
        raise IkeError(f"encryption transform {req['enc_alg']} with {len(enc_key)} bytes of key material is not an "
                       "ESP cipher of the p4sec gateway (AES-GCM-16 128/256, AES-CBC 128/256, AES-CTR, "
                       "ChaCha20-Poly1305)")
    if req["enc_alg"] in AEAD:
        if req["int_alg"] not in (0, AUTH_UNDEFINED):
            raise IkeError(f"integrity transform {req['int_alg']} with an AEAD cipher")
        integ = "None"
    else:
        integ = INTEGS.get(req["int_alg"])
        if integ is None:
            raise IkeError(f"integrity transform {req['int_alg']} is not supported (HMAC-SHA-256-128, HMAC-SHA1-96, "
                           "HMAC-MD5-96)")
    life = req.get("lifetime") or {"bytes": [0, 0], "packets": [0, 0]}
    sb, hb = _limit(life["bytes"])
    sp, hp = _limit(life["packets"])
    cfg = {"spi": req["spi"], "cipher": cipher, "integ": integ, "enc_key": list(enc_key), "auth_key": list(int_key),
           "esn": bool(req.get("esn")), "replay_window": int(req.get("replay_window") or 0),
           "tunnel": [req["src"], req["dst"]],
           # time lifetimes are charon's own timers; bytes and packets are counted by the switch
           "soft": {"packets": sp, "bytes": sb, "seconds": None}, "hard": {"packets": hp, "bytes": hb, "seconds": None},
           "initial_seq": 0}
    if req.get("encap"):
        cfg["udp_encap"] = [req.get("src_port") or 4500, req.get("dst_port") or 4500]
    return cfg


def suite_name(cfg):
    return cfg["cipher"] + ("" if cfg["integ"] == "None" else "/" + cfg["integ"])


def punt_entries(gw, port, mac):
    """The entries that punt IKE for gateway `gw` to its charon (switch `port`, interface `mac`): UDP 500/4500 to
    the gateway's address out of that port (a route), and SPD bypass both ways for those ports."""
    v = gwp.version(gw.address)
    host = f"{gw.address}/{128 if v == 6 else 32}"
    any_ = "::/0" if v == 6 else "0.0.0.0/0"
    out = [_Route(host, mac, port)]
    for p in IKE_PORTS:
        for src, dst, sport, dport in ((any_, host, (0, 65535), (p, p)), (host, any_, (p, p), (0, 65535))):
            m = gwp.spd_match(src, dst)
            m[gwp.proto(v)] = ("ternary", b"\x11", b"\xff")
            m["meta.sport"] = ("range", sport[0].to_bytes(2, "big"), sport[1].to_bytes(2, "big"))
            m["meta.dport"] = ("range", dport[0].to_bytes(2, "big"), dport[1].to_bytes(2, "big"))
            out.append(_Table(gwp.spd(v), m, gwp.BYPASS, {}, IKE_PRIORITY))
    return out


def policy_entries(gw, pol):
    """The entries of an IKE tunnel's outbound policy `pol` (as recorded): a route to the peer out of the WAN
    port, and the SPD entry that protects its traffic with the SA in its slot."""
    v = gwp.version(pol["src"])
    peer = pol["peer"]
    return [_Route(f"{peer}/{128 if ':' in peer else 32}", gw.wan_mac, gw.wan_port),
            _Table(gwp.spd(v), gwp.spd_match(pol["src"], pol["dst"]), gwp.PROTECT, {gwp.SA_INDEX: pol["slot"]},
                   POLICY_PRIORITY, phase=2)]


def desired(ctl, out, switch_mac):
    """reconcile.desired_state's hook (installed by IpsecController): the IKE punting of the gateways that have it,
    the peers' routes and the IKE tunnels' policies, all from the store (whether or not an endpoint runs)."""
    from p4sec.ipsec.reconcile import Entry
    for key, value in ctl.db.execute("select key, value from kv where key like 'ikeport:%' or key like 'ikepol:%'").fetchall():
        if key.startswith("ikeport:"):
            name = key[len("ikeport:"):]
            if name in out and name in ctl.gateways:
                port, mac = json.loads(value)
                out[name].entries.extend(e.entry(Entry) for e in punt_entries(ctl.gateways[name], port, mac))
            continue
        pol = json.loads(value)
        if pol["gw"] in out and pol["gw"] in ctl.gateways and pol.get("slot") is not None:
            out[pol["gw"]].entries.extend(e.entry(Entry) for e in policy_entries(ctl.gateways[pol["gw"]], pol))


def check_config(cfg, path):
    """The `ike:` section of a controller configuration, checked (ControllerError naming what is wrong):

        ike:
          socket: /run/p4sec/ike.sock          # where the gateways' charons (plugin p4sec) connect
          gateways:                            # the gateways whose IKE is punted to a charon
            S1: {port: 3, mac: "02:00:00:00:0c:01"}   # the switch port charon's interface is on, and its MAC
    """
    ike = cfg.get("ike")
    if ike is None:
        return None
    where = f"{path}: ike"
    if not isinstance(ike, dict):
        raise ControllerError(f"{where}: expected a mapping with socket and gateways")
    if not isinstance(ike.get("socket"), str) or not ike["socket"]:
        raise ControllerError(f"{where}.socket: the path of the UNIX socket charon's p4sec plugin connects to is missing")
    gws = ike.get("gateways")
    names = {g.get("name") for g in cfg.get("gateways") or [] if isinstance(g, dict)}
    if not isinstance(gws, dict) or not gws:
        raise ControllerError(f"{where}.gateways: expected a mapping of gateway name to {{port, mac}}")
    for name, g in gws.items():
        if name not in names:
            raise ControllerError(f"{where}.gateways: unknown gateway {name!r} (gateways: {', '.join(sorted(map(str, names)))})")
        if not isinstance(g, dict) or not isinstance(g.get("port"), int) or isinstance(g.get("port"), bool) or not 0 < g["port"] < 512:
            raise ControllerError(f"{where}.gateways.{name}.port: the switch port of charon's interface (1-511) is missing or wrong")
        try:
            runtime.mac(str(g.get("mac")))
        except Exception:
            raise ControllerError(f"{where}.gateways.{name}.mac: {g.get('mac')!r} is not a MAC address") from None
    return ike


def start_from_config(cfg, ctl):
    """The IKE endpoint of a controller configuration's `ike:` section (None without one), its gateways' IKE
    punted; a reconciliation then brings back the IKE tunnels' policies recorded in the store."""
    ike = cfg.get("ike")
    if not ike:
        return None
    ep = IkeEndpoint(ctl, ike["socket"])
    for name, g in ike["gateways"].items():
        ep.attach(name, g["port"], g["mac"])
    ctl.reconcile()
    return ep


class IkeEndpoint:
    """The controller's endpoint for the charons of its gateways: `attach` a gateway (the switch port and MAC where
    its charon runs: IKE is punted there), then charon's p4sec plugin connects to `path`."""

    def __init__(self, ctl, path):
        self.ctl, self.path = ctl, path
        self.ike = {}               # gateway name -> (port, mac) of its charon
        self.subscribers = {}       # gateway name -> [socket]
        self.lock = threading.Lock()
        self.requests = 0
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
            ctl.db.execute("insert or replace into kv values (?, ?)", (f"ikeport:{gw_name}", json.dumps([int(port), mac])))
            ctl.db.commit()
            for e in self._punt_entries(gw):
                e.insert(gw.switch)
            ctl._event(gw_name, f"IKE punted to port {port} ({mac})")
            ctl.db.commit()

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
        stale = ctl.db.execute("select spi from sa where state != 'deleted' and ((src = ? and dst like 'ike:%') or "
                               "(dst = ? and src like 'ike:%'))", (gw.name, gw.name)).fetchall()
        for (spi,) in stale:
            self.op_del_sa(gw, {"spi": spi})
        pols = [k for (k,) in ctl.db.execute("select key from kv where key like ?", (f"ikepol:{gw.name}|%",)).fetchall()]
        for key in pols:
            pol = json.loads(ctl.db.execute("select value from kv where key = ?", (key,)).fetchone()[0])
            ctl.db.execute("delete from kv where key = ?", (key,))
            ctl.db.commit()
            for e in self._policy_entries(gw, pol) if pol.get("slot") is not None else ():
                e.delete(gw.switch)
        ctl._event(gw.name, f"charon started: {len(stale)} SAs and {len(pols)} policies of an earlier charon removed")
        ctl.db.commit()
        return {}

    def op_flush_sas(self, gw, req):
        return {}

    def op_flush_policies(self, gw, req):
        return {}

    def op_get_spi(self, gw, req):
        return {"spi": self.ctl._new_spi()}

    @staticmethod
    def _tunnel(gw, reqid):
        return f"ike-{gw.name}-{reqid}"

    def op_add_sa(self, gw, req):
        ctl = self.ctl
        cfg = sa_config_from(req)
        spi, inbound = req["spi"], bool(req.get("inbound"))
        peer = req["src"] if inbound else req["dst"]
        if (req["dst"] if inbound else req["src"]) != gw.address:
            raise IkeError(f"SA {spi:#010x} between {req['src']} and {req['dst']} does not end at gateway {gw.name} "
                           f"({gw.address})")
        if ctl.db.execute("select 1 from sa where spi = ? and state != 'deleted'", (spi,)).fetchone():
            raise IkeError(f"SPI {spi:#010x} is in use")
        ctl.db.execute("delete from sa where spi = ?", (spi,))
        local_ts, remote_ts = (req["dst_ts"], req["src_ts"]) if inbound else (req["src_ts"], req["dst_ts"])
        local, remote = _one(local_ts, "local"), _one(remote_ts, "remote")
        site = ipaddress.ip_network(gw.lan_prefix, strict=False)
        if ipaddress.ip_network(local).version != site.version or not ipaddress.ip_network(local).subnet_of(site):
            raise IkeError(f"local traffic selector {local} is outside gateway {gw.name}'s site {gw.lan_prefix}")
        if ipaddress.ip_network(remote).version != ipaddress.ip_network(local).version:
            raise IkeError(f"traffic selectors {local} and {remote} are of different IP versions")
        name, peer_name = self._tunnel(gw, req["reqid"]), PEER + peer
        sites = {gw.name: local, peer_name: remote}
        row = ctl.db.execute("select state from tunnel where name = ?", (name,)).fetchone()
        if not row or row[0] != "up":
            ctl.db.execute("insert or replace into tunnel values (?, ?, ?, ?, ?, ?, ?, 'up')",
                           (name, gw.name, peer_name, suite_name(cfg), json.dumps(cfg["soft"]), json.dumps(cfg["hard"]), time.time()))
            ctl.db.execute("insert or replace into kv values (?, ?)", (f"sites:{name}", json.dumps(sites)))
            ctl.db.execute("insert or replace into kv values (?, ?)", (f"encap:{name}", "udp" if cfg.get("udp_encap") else "esp"))
            ctl._event(name, f"up: IKEv2 CHILD_SA with {peer} ({local} <-> {remote}, {suite_name(cfg)})")
        t0 = time.perf_counter()
        if inbound:
            slot = gw.alloc_slot()
            ctl.db.execute("insert into sa values (?, ?, ?, ?, ?, ?, ?, ?, 'active')",
                           (spi, name, peer_name, gw.name, -1, slot, json.dumps(cfg), time.time()))
            ctl.db.commit()
            try:
                with gw.switch.batch():
                    gwp.sa_write(gw.switch, slot, cfg)
                    gwp.selectors_write(gw.switch, slot, remote, local)
                    gwp.sad_dec_write(gw.switch, peer, gw.address, spi, slot)
            except Exception:
                ctl.db.execute("update sa set state = 'deleted' where spi = ?", (spi,))
                ctl.db.commit()
                ctl.reconcile([gw.name])
                raise
            ctl._event(name, f"inbound SA {spi:#010x} from {peer} in slot {slot} ({1000 * (time.perf_counter() - t0):.2f} ms)")
        else:
            old = ctl.db.execute("select spi, out_slot from sa where tunnel = ? and src = ? and state = 'active'",
                                 (name, gw.name)).fetchone()
            slot = old[1] if old else gw.alloc_slot()
            if old:
                ctl.db.execute("update sa set state = 'deleted' where spi = ?", (old[0],))
            ctl.db.execute("insert into sa values (?, ?, ?, ?, ?, ?, ?, ?, 'active')",
                           (spi, name, gw.name, peer_name, slot, -1, json.dumps(cfg), time.time()))
            ctl.db.commit()
            gwp.sa_write(gw.switch, slot, cfg)     # a rekey: one swap in place, the policy keeps its slot
            ctl._event(name, f"outbound SA {spi:#010x} to {peer} in slot {slot}"
                             + (f" (replaces {old[0]:#010x} in place)" if old else "")
                             + f" ({1000 * (time.perf_counter() - t0):.2f} ms)")
            self._policies_for(gw, name, slot)
        ctl.db.commit()
        return {}

    def _policies_for(self, gw, tunnel, slot):
        """The outbound policies of a reqid waiting for its SA (or pointing at another slot): installed now."""
        for key, value in self.ctl.db.execute("select key, value from kv where key like 'ikepol:%'").fetchall():
            pol = json.loads(value)
            if pol["gw"] == gw.name and pol["tunnel"] == tunnel and pol.get("slot") != slot:
                had = pol.get("slot")
                pol["slot"] = slot
                self.ctl.db.execute("update kv set value = ? where key = ?", (json.dumps(pol), key))
                self.ctl.db.commit()
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
        row = self.ctl.db.execute("select spi, tunnel, src, dst, out_slot, in_slot, state, config from sa where spi = ?",
                                  (req["spi"],)).fetchone()
        if not row or gw.name not in (row[2], row[3]):
            return None
        return row

    def op_query_sa(self, gw, req):
        row = self._row(gw, req)
        if not row or row[6] == "deleted":
            raise IkeError(f"no SA {req['spi']:#010x} on {gw.name}")
        slot = row[4] if row[2] == gw.name else row[5]
        st = gwp.sa_stats(gw.switch, slot) or {}
        return {"bytes": int(st.get("bytes", 0)), "packets": int(st.get("packets", 0)), "idle": None}

    def op_del_sa(self, gw, req):
        ctl = self.ctl
        row = self._row(gw, req)
        if not row or row[6] == "deleted":
            return {}       # replaced in place by its successor, or never installed
        spi, tunnel, src, dst, out_slot, in_slot, state, cfg = row
        ctl.db.execute("update sa set state = 'deleted' where spi = ?", (spi,))
        ctl.db.commit()
        if dst == gw.name:
            sites = ctl._tunnel_sites(tunnel) or {}
            peer = json.loads(cfg)["tunnel"][0]
            with gw.switch.batch():
                gwp.sad_dec_write(gw.switch, peer, gw.address, spi, in_slot, insert=False)
                if sites:
                    gwp.selectors_write(gw.switch, in_slot, sites[src], sites[gw.name], insert=False)
                gwp.sa_delete(gw.switch, in_slot)
            gw.free_slots.append(in_slot)
            ctl._event(tunnel, f"inbound SA {spi:#010x} deleted")
        else:
            self._drop_policies(gw, tunnel)
            gwp.sa_delete(gw.switch, out_slot)
            gw.free_slots.append(out_slot)
            ctl._event(tunnel, f"outbound SA {spi:#010x} deleted")
        if not ctl.db.execute("select 1 from sa where tunnel = ? and state != 'deleted'", (tunnel,)).fetchone():
            ctl.db.execute("update tunnel set state = 'down' where name = ?", (tunnel,))
            ctl.db.execute("delete from kv where key in (?, ?)", (f"sites:{tunnel}", f"encap:{tunnel}"))
            ctl._event(tunnel, "down: its last SA was deleted")
        ctl.db.commit()
        return {}

    def _drop_policies(self, gw, tunnel):
        """The outbound SA of `tunnel` goes: its policies stop pointing at the slot (removed from the SPD, kept
        recorded while charon holds them)."""
        for key, value in self.ctl.db.execute("select key, value from kv where key like 'ikepol:%'").fetchall():
            pol = json.loads(value)
            if pol["gw"] == gw.name and pol["tunnel"] == tunnel and pol.get("slot") is not None:
                self._policy_entries(gw, pol)[1].delete(gw.switch)
                pol["slot"] = None
                self.ctl.db.execute("update kv set value = ? where key = ?", (json.dumps(pol), key))
        self.ctl.db.commit()

    def _policy_key(self, gw, req):
        return f"ikepol:{gw.name}|{_prefix(req['src_ts'], 'source')}|{_prefix(req['dst_ts'], 'destination')}"

    def op_add_policy(self, gw, req):
        if req.get("dir") != POLICY_OUT:
            return {}       # inbound and forward policies: the inbound SAs' selectors are the gateway's check
        if req.get("type") != POLICY_IPSEC:
            raise IkeError(f"policy type {req.get('type')} (pass/drop shunts) is not supported by the p4sec plugin")
        ctl = self.ctl
        key = self._policy_key(gw, req)
        r = ctl.db.execute("select value from kv where key = ?", (key,)).fetchone()
        tunnel = self._tunnel(gw, req.get("reqid"))
        if r:
            pol = json.loads(r[0])
            if pol["tunnel"] != tunnel:
                raise IkeError(f"{pol['src']} -> {pol['dst']} is protected by {pol['tunnel']} already")
            pol["count"] += 1
            ctl.db.execute("update kv set value = ? where key = ?", (json.dumps(pol), key))
            ctl.db.commit()
            return {}
        pol = {"gw": gw.name, "tunnel": tunnel, "src": _prefix(req["src_ts"], "source"),
               "dst": _prefix(req["dst_ts"], "destination"), "peer": req["dst"], "count": 1, "slot": None}
        ctl.db.execute("insert into kv values (?, ?)", (key, json.dumps(pol)))
        ctl.db.commit()
        out = ctl.db.execute("select out_slot from sa where tunnel = ? and src = ? and state = 'active'", (tunnel, gw.name)).fetchone()
        if out:
            self._policies_for(gw, tunnel, out[0])
        ctl._event(tunnel, f"policy {pol['src']} -> {pol['dst']} via {pol['peer']}")
        ctl.db.commit()
        return {}

    def op_del_policy(self, gw, req):
        if req.get("dir") != POLICY_OUT:
            return {}
        ctl = self.ctl
        key = self._policy_key(gw, req)
        r = ctl.db.execute("select value from kv where key = ?", (key,)).fetchone()
        if not r:
            return {}
        pol = json.loads(r[0])
        pol["count"] -= 1
        if pol["count"] > 0:
            ctl.db.execute("update kv set value = ? where key = ?", (json.dumps(pol), key))
        else:
            ctl.db.execute("delete from kv where key = ?", (key,))
            ctl.db.commit()
            if pol.get("slot") is not None:
                self._policy_entries(gw, pol)[1].delete(gw.switch)
                others = [json.loads(v)["peer"] for k, v in ctl.db.execute("select key, value from kv where key like 'ikepol:%'").fetchall()
                          if json.loads(v)["gw"] == gw.name]
                if pol["peer"] not in others:
                    self._policy_entries(gw, pol)[0].delete(gw.switch)
            ctl._event(pol["tunnel"], f"policy {pol['src']} -> {pol['dst']} removed")
        ctl.db.commit()
        return {}

    # ------------------------------------------------------------------ lifetime events to charon

    def _sa_event(self, gw_name, spi, event):
        """controller._on_digest's hook: an IKE SA's soft (1) or hard (2) lifetime reached on the switch goes to
        charon as an expire event; True if the SA is one of ours."""
        row = self.ctl.db.execute("select src, dst, config from sa where spi = ?", (spi,)).fetchone()
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
        self.ctl._event(gw_name, f"{'hard' if event == 2 else 'soft'} lifetime of IKE SA {spi:#010x}: charon told "
                                 f"({len(subs)} listening)")
        return True


class _Table:
    """A table entry of the IKE path, written directly or handed to reconciliation."""

    def __init__(self, table, match, action, params, priority, phase=1):
        self.table, self.match, self.action, self.params, self.priority, self.phase = table, match, action, params, priority, phase

    def insert(self, switch, exists_ok=True):
        try:
            switch.table_insert(self.table, self.match, self.action, self.params, priority=self.priority)
        except Exception as e:
            if not (exists_ok and "exist" in str(e).lower()):
                raise
            self.modify(switch)

    def modify(self, switch):
        switch.table_modify(self.table, self.match, self.action, self.params, priority=self.priority)

    def delete(self, switch):
        try:
            switch.table_delete(self.table, self.match, priority=self.priority)
        except Exception as e:
            if "no entry" not in str(e).lower():
                raise

    def entry(self, Entry):
        return Entry(self.table, self.match, self.action, self.params, priority=self.priority, phase=self.phase)


class _Route(_Table):
    """A route of the IKE path (no priority: LPM)."""

    def __init__(self, prefix, mac, port):
        net, plen = prefix.split("/")
        v = gwp.version(prefix)
        super().__init__(gwp.lpm(v), {gwp.dst_addr(v): ("lpm", runtime.addr(net), int(plen))}, gwp.set_nhop(v),
                         {"dst_mac": runtime.mac(mac), "src_mac": runtime.mac(SWITCH_MAC), "port": port}, 0)
