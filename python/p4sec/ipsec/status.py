"""The controller's live status: who may see it (`StatusAccess`, from the `status:` section of the configuration)
and what it shows (`Source.snapshot`): the gateways and their switch connections, every tunnel with its SAs (SPIs,
key age, the next renewal, packets and bytes each switch counted, packets sent but not accepted, packets dropped
by reason on either end), its renewal history and failures, and which replica leads with which term. The leader
builds it; the status page (status_http) and the Prometheus endpoint (status_metrics) serve it.

CONFIG (YAML, in the controller's configuration; absent: no status page, no /metrics):

    status:
      token_file: /etc/p4sec/status.token   # a bearer token (at least 16 characters; the first line of the file)
      interval: 1.0                         # seconds between two updates of the live page (0.2 .. 60)
"""
import hmac
import json
import pathlib
import time

from p4sec.ipsec.config import ConfigError
from p4sec.ipsec.status_reads import IN_REASONS, OUT_REASONS, Counters, StoreReader
from p4sec.ipsec.ike import PEER as IKE_PEER

EVENTS_PER_TUNNEL = 12      # the renewal history the page shows, newest first
DETAILED = 200              # tunnels shown with their SAs, counters and history; the others with their state only
MIN_TOKEN = 16


class StatusAccess:
    """Who may read the status: a request with `Authorization: Bearer TOKEN`, or (when the REST API is served over
    TLS with client certificates verified against the controller's CA) any client with such a certificate."""

    def __init__(self, token, interval=1.0):
        self.token, self.interval = token, interval

    @classmethod
    def from_config(cls, cfg, where="config"):
        """The access of the `status:` section of `cfg`, or None (the status page is off). Precise ConfigErrors."""
        if "status" not in cfg:
            return None
        st = cfg["status"]
        if not isinstance(st, dict):
            raise ConfigError(f"{where}: status: expected a mapping {{token_file: FILE, interval: SECONDS}}")
        unknown = set(st) - {"token_file", "interval"}
        if unknown:
            raise ConfigError(f"{where}: status: unknown setting(s) {', '.join(sorted(unknown))} (token_file, interval)")
        tf = st.get("token_file")
        if not isinstance(tf, str) or not tf:
            raise ConfigError(f"{where}: status: `token_file` is missing (a file holding the bearer token the page asks for)")
        try:
            lines = pathlib.Path(tf).read_text().splitlines()
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"{where}: status: token_file {tf}: {e}") from e
        token = lines[0].strip() if lines else ""
        if len(token) < MIN_TOKEN or any(c.isspace() or not c.isprintable() for c in token):
            raise ConfigError(f"{where}: status: token_file {tf}: the token (its first line) must be at least {MIN_TOKEN} printable "
                              "characters without spaces (e.g. `openssl rand -hex 24`)")
        interval = st.get("interval", 1.0)
        if isinstance(interval, bool) or not isinstance(interval, (int, float)) or not 0.2 <= interval <= 60:
            raise ConfigError(f"{where}: status: `interval` must be a number of seconds from 0.2 to 60, not {interval!r}")
        return cls(token, float(interval))

    def allows(self, handler):
        """Whether the request `handler` (a BaseHTTPRequestHandler) carries the token or a verified client certificate."""
        got = handler.headers.get("Authorization", "")
        if got.startswith("Bearer ") and hmac.compare_digest(got[7:].strip().encode(), self.token.encode()):
            return True
        peer = getattr(handler.connection, "getpeercert", None)
        try:
            return bool(peer and peer())
        except ValueError:      # TLS not negotiated yet
            return False


def event_kind(what):
    """How the page marks an event: a failure, a renewal, the retirement of an old SA, or anything else."""
    if "failed" in what or "interrupted" in what or "unreachable" in what or "degraded" in what or "may be left over" in what:
        return "failure"
    if what.startswith("renew "):
        return "renewal"
    if what.startswith("old SAD-dec"):
        return "retired"
    return "info"


def _next_renewal(soft, created, out, now):
    """When the SA reaches its soft lifetime (the renewal): the time if limited in seconds, what is left of the
    packets and bytes if limited in those (from the sender's counters)."""
    soft = soft or {}
    nr = {}
    if soft.get("seconds"):
        nr["at"] = created + soft["seconds"]
        nr["in_seconds"] = max(0.0, nr["at"] - now)
    if soft.get("packets") and out is not None:
        nr["packets_left"] = max(0, soft["packets"] - out.get("packets", 0))
    if soft.get("bytes") and out is not None:
        nr["bytes_left"] = max(0, soft["bytes"] - out.get("bytes", 0))
    return nr


def _events(rows):
    return [{"t": t, "what": w, "kind": event_kind(w)} for t, w in rows]


class Source:
    """The status of one running Service (the leader's): its store read on a connection of its own, its switches'
    counters read on a pool of its own; the controller's lock is taken only to copy its gateways."""

    def __init__(self, svc):
        self.svc, self.store, self.counters = svc, StoreReader(svc), Counters()

    def close(self):
        self.store.close()
        self.counters.close()

    def _tunnels(self, away):
        """Every tunnel in the store (and every profile not in it, down), in the order of their creation."""
        st, cfg, ctl = self.store, self.svc.cfg, self.svc.ctl
        rec = st.records
        sites_of, encap_of = rec.all_sites(), rec.all_encaps()
        store_ok, store_why = ctl.db.health()
        out = []
        for name, a, b, suite, soft, hard, created, state in rec.tunnels():
            sites = sites_of.get(name) or {}
            gone = sorted({a, b} & away)
            why = []
            if state == "up":       # degraded while a gateway is away, a renewal is pending or the store fails (p4sec.ipsec.failsafe)
                active = rec.active_spis(name)
                why = ctl.faults.degraded_by(name, a, b, active, store_ok, store_why)
            out.append({"name": name, "a": a, "b": b, "a_prefix": sites.get(a), "b_prefix": sites.get(b), "suite": suite,
                        "encap": "udp" if encap_of.get(name) == "udp" else "esp", "state": "degraded" if why else state,
                        "degraded_by": why, "unreachable": gone, "created": created, "soft": json.loads(soft or "null"),
                        "hard": json.loads(hard or "null")})
        known = {t["name"] for t in out}
        for name, p in cfg.get("profiles", {}).items():
            if name not in known:
                out.append({"name": name, "a": p["a"], "b": p["b"], "a_prefix": p.get("a_prefix"), "b_prefix": p.get("b_prefix"),
                            "suite": p.get("suite", "aes-gcm-128"), "encap": p.get("encap", "esp"), "state": "down", "unreachable": [],
                            "created": None, "soft": p.get("soft"), "hard": p.get("hard")})
        return out

    def snapshot(self, replica=None):
        """The status as the leading controller sees it now (a JSON-able dict)."""
        ctl, now = self.svc.ctl, time.time()
        with ctl.lock:
            gateways, away = dict(ctl.gateways), set(ctl.away)
        tunnels = self._tunnels(away)
        detailed = {t["name"] for t in tunnels[:DETAILED]}
        rows = [r for r in self.store.records.live_sa_states() if r[1] in detailed]
        totals = self.store.renewal_totals()
        # the counters: the sender's slot (out) and the receiver's (in) of each SA, within the reads' budget
        stat_units, drop_units = {}, {}
        for spi, _, src, dst, out_slot, in_slot, state, _ in rows:
            for side, gw, slot, live, reasons in (("out", src, out_slot, state == "active", OUT_REASONS),
                                                  ("in", dst, in_slot, state in ("inbound", "active", "retiring"), IN_REASONS)):
                if live and gw in gateways and gw not in away and slot is not None and slot >= 0:
                    stat_units.setdefault(spi, {})[side] = (gateways[gw].switch, slot)
                    drop_units[(gw, slot)] = (gateways[gw].switch, spi, reasons)
        stats, drops = self.counters.stats(stat_units), self.counters.drops(drop_units)
        soft = {t["name"]: t["soft"] for t in tunnels}
        sas = {}
        for spi, tunnel, src, dst, out_slot, in_slot, state, created in rows:
            counted_at, st = stats.get(spi, (None, {}))
            out, inn = st.get("out"), st.get("in")
            sides = stat_units.get(spi, {})
            sas.setdefault(tunnel, []).append({
                "spi": f"{spi:#010x}", "src": src, "dst": dst, "state": state, "created": created, "age": max(0.0, now - created),
                "counted_at": counted_at,
                "out": None if out is None else {k: out.get(k, 0) for k in ("packets", "bytes", "seq")},
                "in": None if inn is None else {k: inn.get(k, 0) for k in ("packets", "bytes")},
                "unreceived": max(0, out.get("packets", 0) - inn.get("packets", 0)) if out is not None and inn is not None else None,
                "dropped": {"out": drops.get((src, out_slot), (0, None))[1] if "out" in sides else None,
                            "in": drops.get((dst, in_slot), (0, None))[1] if "in" in sides else None},
                "next_renewal": _next_renewal(soft.get(tunnel), created, out, now) if state == "active" else {}})
        for t in tunnels:
            renewals, failures = totals.get(t["name"], (0, 0))
            evs = _events(self.store.events(t["name"], EVENTS_PER_TUNNEL)) if t["name"] in detailed else []
            # an IKEv2-negotiated tunnel has charon's peer as its b side (p4sec.ipsec.ike: `ike:ADDRESS`)
            ikev2 = str(t["b"]).startswith(IKE_PEER)
            t.update(keying=t.get("keying", "ikev2" if ikev2 else "ike-less"),
                     kind="host-to-site" if str(t["b"]).startswith("host:") else "site-to-site",
                     renewals=renewals, renewal_failures=failures, last_renewal=next((e["t"] for e in evs if e["kind"] == "renewal"), None),
                     detailed=t["name"] in detailed, sas=sas.get(t["name"], []), events=evs)
        out_gateways = []
        for g in self.svc.cfg.get("gateways", []):
            gw = gateways.get(g["name"])
            sw = gw.switch if gw is not None else None
            arb = getattr(sw, "arbitration", None)
            connected = gw is not None and g["name"] not in away
            out_gateways.append({
                "name": g["name"], "address": g["address"], "grpc": g["grpc"], "lan": g["lan"]["prefix"], "wan": g["wan"]["prefix"],
                "device_id": getattr(sw, "device_id", None), "election_id": getattr(sw, "election_id", None), "connected": connected,
                "primary": connected and arb is not None and arb.status.code == 0,
                "events": _events(self.store.events(g["name"], EVENTS_PER_TUNNEL))})
        store_ok, store_why = ctl.db.health()
        return {"now": now, "controller": _controller(replica), "gateways": out_gateways, "tunnels": tunnels,
                "store": {"ok": store_ok, "health": store_why, "renewals_pending": len(ctl.faults.pending)},
                "renewals_total": sum(r for r, _ in totals.values()), "renewal_failures_total": sum(f for _, f in totals.values()),
                "counters": {"sas": len(stat_units), "counted": len(stats), "oldest": min((t for t, _ in stats.values()), default=None),
                             "complete": len(detailed) == len(tunnels)}}


def _controller(replica):
    if not replica:
        return {"mode": "single", "leader": None, "term": None, "served_by": None, "serving_leads": True}
    return {"mode": "replicated", "leader": replica["name"], "term": replica.get("term"), "served_by": replica["name"],
            "serving_leads": True}
