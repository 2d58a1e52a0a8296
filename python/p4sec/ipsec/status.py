"""The controller's live status: who may see it (`StatusAccess`, from the `status:` section of the configuration)
and what it shows (`snapshot`): the gateways and their switch connections, every tunnel with its SAs (SPIs, key
age, the next renewal, packets and bytes each switch counted, packets sent but not accepted, packets dropped by
reason on either end), its renewal history
and failures, and which replica leads with which term. The leader builds it; the status page (status_http) and
the Prometheus endpoint (status_metrics) serve it.

CONFIG (YAML, in the controller's configuration; absent: no status page, no /metrics):

    status:
      token_file: /etc/p4sec/status.token   # a bearer token (at least 16 characters; the first line of the file)
      interval: 1.0                         # seconds between two updates of the live page (0.2 .. 60)
"""
import concurrent.futures
import hmac
import pathlib
import threading
import time

from p4sec.ipsec import gateway as gwp
from p4sec.ipsec.config import ConfigError

EVENTS_PER_TUNNEL = 12      # the renewal history the page shows, newest first
MAX_COUNTER_READS = 512     # SA counter reads per snapshot (two per SA): beyond, the counters are left out
MIN_TOKEN = 16


class StatusAccess:
    """Who may read the status: a request with `Authorization: Bearer TOKEN`, or (when the REST API is served over
    TLS with client certificates verified against the controller's CA) any client with such a certificate."""

    def __init__(self, token, interval=1.0):
        self.token, self.interval = token, interval

    @classmethod
    def from_config(cls, cfg, where="config"):
        """The access of the `status:` section of `cfg`, or None (the status page is off). Precise ConfigErrors."""
        st = cfg.get("status")
        if st is None:
            return None
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


# the program's per-SA drop reasons: sa_counters[slot * 16 + status] (p4include/p4sec.p4, programs/ipsec_gateway.p4)
DROP_REASONS = {1: "no_sa", 2: "truncated", 3: "wrong_spi", 4: "icv_fail", 5: "bad_padding", 6: "bad_next_header", 7: "replay",
                8: "too_old", 9: "seq_overflow", 10: "sa_expired", 11: "bad_inner", 12: "selector_mismatch", 13: "wrong_encap"}


class Counters:
    """Reads SA counters from the switches on a small pool of its own (never the controller's lock).

    Drops are counted by the program per SA slot, and a slot is used by one SA after another: an SA's drops are
    what its slot counted since this process first saw the SA in it (the counts then are its baseline)."""

    def __init__(self, workers=4):
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="p4sec-status")
        self.baselines = {}     # (gateway, slot) -> (spi, {reason: packets} when first seen)
        self.lock = threading.Lock()

    def drops(self, slots):
        """slots: {gateway name: (switch, {slot: spi})} -> {(gateway, slot): {reason: packets since first seen}}
        (one Read per gateway; a gateway that does not answer is left out)."""
        def one(sw, by_slot):
            idx = [slot * 16 + r for slot in by_slot for r in DROP_REASONS]
            try:
                return sw.counter_cells(gwp.SA_COUNTERS, idx)
            except Exception:
                return None
        futs = {g: self.pool.submit(one, sw, by_slot) for g, (sw, by_slot) in slots.items()}
        out = {}
        with self.lock:
            for g, f in futs.items():
                cells = f.result()
                if cells is None:
                    continue
                for slot, spi in slots[g][1].items():
                    now = {name: cells.get(slot * 16 + r, (0, 0))[0] for r, name in DROP_REASONS.items()}
                    seen = self.baselines.get((g, slot))
                    if seen is None or seen[0] != spi:
                        seen = self.baselines[(g, slot)] = (spi, now)
                    out[(g, slot)] = {k: v - seen[1][k] for k, v in now.items() if v > seen[1][k]}
        return out

    def read(self, reads):
        """reads: {key: (switch, slot)} -> {key: stats dict or None}; errors count as None."""
        def one(sw, slot):
            try:
                st = gwp.sa_stats(sw, slot)
                return st if isinstance(st, dict) else None
            except Exception:
                return None
        futs = {k: self.pool.submit(one, sw, slot) for k, (sw, slot) in reads.items()}
        return {k: f.result() for k, f in futs.items()}


_COUNTERS = Counters()


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


def _controller(svc, replica):
    if not replica:
        return {"mode": "single", "leader": None, "term": None, "served_by": None, "serving_leads": True}
    return {"mode": "replicated", "leader": replica["name"], "term": replica.get("term"), "served_by": replica["name"],
            "serving_leads": True}


def snapshot(svc, replica=None, counters=_COUNTERS):
    """The status as the leading controller (`svc`, a Service) sees it now (a JSON-able dict)."""
    ctl = svc.ctl
    now = time.time()
    with ctl.lock:
        tunnels = {t["name"]: t for t in ctl.tunnels()}
        rows = ctl.db.execute("select spi, tunnel, src, dst, out_slot, in_slot, state, created from sa where state != 'deleted' "
                              "order by created").fetchall()
        events = {}
        names = list(tunnels) + [n for n in svc.cfg.get("profiles", {}) if n not in tunnels] + list(ctl.gateways)
        for name in names:
            events[name] = ctl.db.execute("select t, what from event where tunnel = ? order by rowid desc limit ?",
                                          (name, EVENTS_PER_TUNNEL)).fetchall()
        totals = {}
        for tunnel, what in ctl.db.execute("select tunnel, what from event where what like 'renew %'").fetchall():
            r = totals.setdefault(tunnel, [0, 0])
            r[1 if "failed" in what else 0] += 1
        gateways = dict(ctl.gateways)
        away = set(ctl.away)
    # the counters, outside the controller's lock: (spi, "out") on the sender's slot, (spi, "in") on the receiver's
    reads, src_of, dst_of = {}, {}, {}
    for spi, _, src, dst, out_slot, in_slot, state, _ in rows:
        src_of[spi], dst_of[spi] = src, dst
        if len(reads) >= MAX_COUNTER_READS:
            break
        if state == "active" and src in gateways and src not in away and out_slot is not None and out_slot >= 0:
            reads[(spi, "out")] = (gateways[src].switch, out_slot)
        if state in ("inbound", "active", "retiring") and dst in gateways and dst not in away and in_slot is not None and in_slot >= 0:
            reads[(spi, "in")] = (gateways[dst].switch, in_slot)
    stats = counters.read(reads)
    slots = {}
    for (spi, side), (sw, slot) in reads.items():
        g = (src_of if side == "out" else dst_of)[spi]
        slots.setdefault(g, (sw, {}))[1][slot] = spi
    drops = counters.drops(slots)
    sas = {}
    for spi, tunnel, src, dst, out_slot, in_slot, state, created in rows:
        out, inn = stats.get((spi, "out")), stats.get((spi, "in"))
        soft = (tunnels.get(tunnel) or {}).get("soft")
        sa = {"spi": f"{spi:#010x}", "src": src, "dst": dst, "state": state, "created": created, "age": max(0.0, now - created),
              "out": None if out is None else {k: out.get(k, 0) for k in ("packets", "bytes", "seq")},
              "in": None if inn is None else {k: inn.get(k, 0) for k in ("packets", "bytes")},
              "unreceived": max(0, out.get("packets", 0) - inn.get("packets", 0)) if out is not None and inn is not None else None,
              "dropped": {"out": drops.get((src, out_slot)) if out is not None else None,
                          "in": drops.get((dst, in_slot)) if inn is not None else None},
              "next_renewal": _next_renewal(soft, created, out, now) if state == "active" else {}}
        sas.setdefault(tunnel, []).append(sa)
    out_tunnels = []
    for name in names:
        if name in gateways:
            continue
        t = tunnels.get(name)
        if t is None:
            p = svc.cfg["profiles"][name]
            t = {"name": name, "a": p["a"], "b": p["b"], "suite": p.get("suite", "aes-gcm-128"), "encap": p.get("encap", "esp"),
                 "state": "down", "a_prefix": p.get("a_prefix"), "b_prefix": p.get("b_prefix"), "soft": p.get("soft"),
                 "hard": p.get("hard"), "created": None}
        renewals, failures = totals.get(name, (0, 0))
        evs = [{"t": t_, "what": w, "kind": event_kind(w)} for t_, w in events.get(name, [])]
        last = next((e["t"] for e in evs if e["kind"] == "renewal"), None)
        out_tunnels.append({
            "name": name, "a": t["a"], "b": t["b"], "a_prefix": t.get("a_prefix"), "b_prefix": t.get("b_prefix"),
            "suite": t.get("suite"), "encap": t.get("encap") or "esp", "keying": t.get("keying", "ike-less"),
            "kind": "host-to-site" if "@" in name or str(t["b"]).startswith("host:") else "site-to-site",
            "state": t["state"], "unreachable": t.get("unreachable", []), "created": t.get("created"),
            "soft": t.get("soft"), "hard": t.get("hard"), "renewals": renewals, "renewal_failures": failures,
            "last_renewal": last, "sas": sas.get(name, []), "events": evs})
    out_gateways = []
    for g in svc.cfg.get("gateways", []):
        gw = gateways.get(g["name"])
        sw = gw.switch if gw is not None else None
        arb = getattr(sw, "arbitration", None)
        out_gateways.append({
            "name": g["name"], "address": g["address"], "grpc": g["grpc"], "lan": g["lan"]["prefix"], "wan": g["wan"]["prefix"],
            "device_id": getattr(sw, "device_id", None), "election_id": getattr(sw, "election_id", None),
            "connected": gw is not None and g["name"] not in away,
            "primary": bool(arb is not None and arb.status.code == 0) and g["name"] not in away,
            "events": [{"t": t_, "what": w, "kind": event_kind(w)} for t_, w in events.get(g["name"], [])]})
    return {"now": now, "controller": _controller(svc, replica), "gateways": out_gateways, "tunnels": out_tunnels,
            "renewals_total": sum(r for r, _ in totals.values()), "renewal_failures_total": sum(f for _, f in totals.values()),
            "counters": {"read": sum(1 for v in stats.values() if v is not None), "failed": sum(1 for v in stats.values() if v is None),
                         "complete": len(reads) < MAX_COUNTER_READS}}
