"""IKEv2-negotiated tunnels: strongSwan's charon (with the p4sec kernel-ipsec plugin, ikev2/plugin) negotiates with
any standard IKEv2 peer; what it would give the kernel reaches the controller's endpoint (p4sec.ipsec.ike_endpoint)
and becomes the controller's own operations on the gateway's SAD/SPD, recorded in its store like the IKE-less
tunnels: a controller restart or a switch that lost its state gets them back by reconciliation. This module holds
what the controller and reconciliation need without the endpoint: the SA configuration from charon's parameters,
the entries of the IKE path and of the IKE tunnels' policies (derived from the store) and the `ike:` configuration.

The model in the store: one tunnel per CHILD_SA reqid of a gateway (`ike-<gateway>-<reqid>`, peer `ike:<address>`,
its traffic selectors as the tunnel's sites), one `sa` row per SA. An inbound SA gets a slot, its selectors and a
SAD-dec entry; the outbound SA of a reqid takes the reqid's slot (a rekey's new SA replaces the old one in place, one
atomic swap: make-before-break); the outbound policy (SPD protect) points at that slot. Time lifetimes are charon's
(it rekeys and expires on its own timers); byte and packet lifetimes are the switch's, whose soft/hard events go
back to charon as expire events (a `subscribe` connection). The gateway punts IKE (UDP 500 and 4500 to its address,
and charon's answers) between the WAN and the port where charon runs (SPD bypass entries and a route).

Not supported (refused with the reason, which charon logs): traffic selectors with protocols or ports, ranges that
are not subnets, IPComp, transport mode, changing an SA's addresses (MOBIKE or a NAT
mapping change: charon rekeys instead).
"""
import ipaddress

from p4sec.infra import runtime
from p4sec.ipsec import gateway as gwp
from p4sec.ipsec.ctlbase import SWITCH_MAC, ControllerError

PEER = "ike:"
IKE_PORTS = (500, 4500)
IKE_PRIORITY = 100          # the IKE bypass entries come before every tunnel's policy
POLICY_PRIORITY = 30        # an IKE tunnel's SPD entry (IKE-less site-to-site: 10, hosts: 20)
MODE_TUNNEL = 2             # ipsec_mode_t
POLICY_OUT = 1              # policy_dir_t (IN 0, OUT 1, FWD 2)
POLICY_IPSEC, POLICY_PASS, POLICY_DROP = 1, 2, 3    # policy_type_t

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


def selector_pairs(gw, local_ts, remote_ts):
    """The (remote, local) prefix pairs of a CHILD_SA's traffic selectors (every remote selector with every local
    one of the same IP version: what its inbound SA may carry), or IkeError: a local selector outside the gateway's
    site, none of the same version on both sides, a selector that is no prefix."""
    if not local_ts or not remote_ts:
        raise IkeError("a CHILD_SA without traffic selectors")
    site = ipaddress.ip_network(gw.lan_prefix, strict=False)
    local = [_prefix(ts, "local") for ts in local_ts]
    remote = [_prefix(ts, "remote") for ts in remote_ts]
    for p in local:
        n = ipaddress.ip_network(p)
        if n.version != site.version or not n.subnet_of(site):
            raise IkeError(f"local traffic selector {p} is outside gateway {gw.name}'s site {gw.lan_prefix}")
    pairs = [(r, p) for r in remote for p in local if ipaddress.ip_network(r).version == ipaddress.ip_network(p).version]
    if not pairs:
        raise IkeError(f"traffic selectors {', '.join(local)} and {', '.join(remote)} are of different IP versions")
    return pairs


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


def desired(records, gateways, out, switch_mac):
    """reconcile.desired_state's hook (installed by IpsecController): the IKE punting of the gateways that have it,
    the peers' routes and the IKE tunnels' policies, all from the store's `records` (whether or not an endpoint
    runs); `gateways`: the controller's (name -> Gateway)."""
    from p4sec.ipsec.reconcile import Entry
    for name, (port, mac) in records.ike_ports().items():
        if name in out and name in gateways:
            out[name].entries.extend(e.entry(Entry) for e in punt_entries(gateways[name], port, mac))
    for pol in records.ike_policies():
        if pol["gw"] in out and pol["gw"] in gateways and pol.get("slot") is not None:
            out[pol["gw"]].entries.extend(e.entry(Entry) for e in policy_entries(gateways[pol["gw"]], pol))
    for spi, pairs in records.ike_selectors().items():
        # an inbound SA's traffic selectors beyond the first pair (the tunnel's sites)
        sa = records.sa(spi)
        if sa and sa.state in ("inbound", "active", "retiring") and sa.dst in out:
            for r, l in pairs:
                out[sa.dst].entries.append(Entry(gwp.sa_selectors(gwp.version(r)), gwp.selectors_match(sa.in_slot, r, l),
                                                 gwp.SELECTOR_OK, {}, priority=gwp.SELECTOR_PRIORITY))


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
