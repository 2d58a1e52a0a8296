"""The controller's Prometheus metrics (text format 0.0.4), from a status snapshot (p4sec.ipsec.status): which
replica leads and its term, the gateways' switch connections, each tunnel's state and renewals, and per active SA
(labelled by tunnel and direction, so that a renewal continues the same series: a counter restarts at 0 with the
new SA) its packets and bytes, the packets sent but not accepted, the packets dropped by reason, its key age and
the time to its next renewal.

A follower replica exports only its own replica metrics: the tunnels' come from the leader alone (no duplicates
to add up in a query)."""

# name -> (type, help); every name the code exports (docs/grafana/p4sec.json is checked against them)
METRICS = {
    "p4sec_controller_leader": ("gauge", "1 if this controller process leads (a single controller always does), else 0."),
    "p4sec_controller_term": ("gauge", "The leader's lease term (its P4Runtime election id); 0 for a single controller."),
    "p4sec_controller_store_up": ("gauge", "1 while the controller's store commits (0: renewals wait for it, its tunnels are degraded)."),
    "p4sec_controller_renewals_pending": ("gauge", "SA renewals that failed and are retried until they land."),
    "p4sec_controller_gateway_connected": ("gauge", "1 while the controller's P4Runtime stream to the gateway's switch is up."),
    "p4sec_controller_tunnel_up": ("gauge", "1 if the tunnel is up (degraded counts as up: its SAs still work where reachable)."),
    "p4sec_controller_tunnel_state": ("gauge", "1 for the tunnel's current state (up, degraded, pending, down, lost)."),
    "p4sec_controller_tunnel_renewals_total": ("counter", "SA renewals of the tunnel recorded in the store."),
    "p4sec_controller_tunnel_renewal_failures_total": ("counter", "SA renewals of the tunnel that failed (the old SA stayed)."),
    "p4sec_controller_sa_packets_total": ("counter", "Packets the active SA protected: side=out on the sender, in (accepted) on the receiver."),
    "p4sec_controller_sa_bytes_total": ("counter", "Bytes the active SA protected: side=out on the sender, in on the receiver."),
    "p4sec_controller_sa_unreceived_packets": ("gauge", "Packets of the active SA sent but not (yet) accepted by the receiver: in flight, "
                                                        "lost on the way or refused there."),
    "p4sec_controller_sa_dropped_packets_total": ("counter", "Packets the active SA's slot dropped since the controller first saw the SA there, by "
                                                             "reason (replay, icv_fail, ...): side=out on the sender, in on the receiver."),
    "p4sec_controller_sa_key_age_seconds": ("gauge", "Seconds since the active SA's keys were made."),
    "p4sec_controller_sa_next_renewal_seconds": ("gauge", "Seconds until the active SA's soft lifetime in seconds is reached (its renewal)."),
    "p4sec_controller_sa_renewal_packets_left": ("gauge", "Packets the active SA may still send before its soft packet limit (its renewal)."),
}
STATES = ("up", "degraded", "pending", "down", "lost")


def _labels(**kv):
    esc = lambda v: str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return "{" + ",".join(f'{k}="{esc(v)}"' for k, v in kv.items()) + "}"


def render(snap, replica=None):
    """The metrics text: `snap` the leader's snapshot (None on a follower), `replica` this replica (or None)."""
    samples = {name: [] for name in METRICS}
    me = replica["name"] if replica else "controller"
    leads = snap is not None
    samples["p4sec_controller_leader"].append((_labels(replica=me), int(leads)))
    if leads:
        samples["p4sec_controller_term"].append((_labels(replica=me), (snap["controller"].get("term") or 0)))
        if "store" in snap:
            samples["p4sec_controller_store_up"].append((_labels(replica=me), int(snap["store"]["ok"])))
            samples["p4sec_controller_renewals_pending"].append((_labels(replica=me), snap["store"]["renewals_pending"]))
        for g in snap.get("gateways", []):
            samples["p4sec_controller_gateway_connected"].append((_labels(gateway=g["name"]), int(bool(g["connected"]))))
        for t in snap.get("tunnels", []):
            tl = dict(tunnel=t["name"])
            samples["p4sec_controller_tunnel_up"].append((_labels(**tl), int(t["state"] in ("up", "degraded"))))
            for s in STATES:
                samples["p4sec_controller_tunnel_state"].append((_labels(**tl, state=s), int(t["state"] == s)))
            samples["p4sec_controller_tunnel_renewals_total"].append((_labels(**tl), t["renewals"]))
            samples["p4sec_controller_tunnel_renewal_failures_total"].append((_labels(**tl), t["renewal_failures"]))
            for sa in t["sas"]:
                if sa["state"] != "active":
                    continue
                d = dict(tunnel=t["name"], src=sa["src"], dst=sa["dst"])
                for side in ("out", "in"):
                    if sa[side] is not None:
                        samples["p4sec_controller_sa_packets_total"].append((_labels(**d, side=side), sa[side]["packets"]))
                        samples["p4sec_controller_sa_bytes_total"].append((_labels(**d, side=side), sa[side]["bytes"]))
                for side, reasons in (sa.get("dropped") or {}).items():
                    for reason, n in sorted((reasons or {}).items()):
                        samples["p4sec_controller_sa_dropped_packets_total"].append((_labels(**d, side=side, reason=reason), n))
                if sa["unreceived"] is not None:
                    samples["p4sec_controller_sa_unreceived_packets"].append((_labels(**d), sa["unreceived"]))
                samples["p4sec_controller_sa_key_age_seconds"].append((_labels(**d), round(sa["age"], 3)))
                nr = sa.get("next_renewal") or {}
                if "in_seconds" in nr:
                    samples["p4sec_controller_sa_next_renewal_seconds"].append((_labels(**d), round(nr["in_seconds"], 3)))
                if "packets_left" in nr:
                    samples["p4sec_controller_sa_renewal_packets_left"].append((_labels(**d), nr["packets_left"]))
    out = []
    for name, (kind, text) in METRICS.items():
        out.append(f"# HELP {name} {text}\n# TYPE {name} {kind}\n")
        out.extend(f"{name}{labels} {value}\n" for labels, value in samples[name])
    return "".join(out)
