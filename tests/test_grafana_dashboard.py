"""docs/grafana/p4sec.json, the Grafana dashboard for the switch's and the controller's Prometheus metrics: an
importable dashboard model whose every query names only metrics, and labels, that the code exports (the switch's
from crates/switch/src/metrics.rs, the controller's as p4sec.ipsec.status_metrics renders them)."""
import json
import re

from conftest import ROOT
from p4sec.ipsec import status_metrics

DASHBOARD = ROOT / "docs" / "grafana" / "p4sec.json"
METRIC = re.compile(r"\bp4sec_[a-z0-9_]+\b")
# PromQL words that are no label names, and the labels Prometheus adds to every scraped series
PROMQL = {"by", "without", "on", "ignoring", "group_left", "group_right"}
SCRAPE_LABELS = {"instance", "job"}


def switch_metrics():
    """(metric names, label names) of the switch's /metrics, read from the code that writes them."""
    src = (ROOT / "crates" / "switch" / "src" / "metrics.rs").read_text()
    names = set(re.findall(r'"(p4sec_[a-z0-9_]+)"', src))
    labels = set(re.findall(r'[{,](\w+)=\\"', src))
    return names, labels


def controller_metrics():
    """(metric names, label names) of the controller's /metrics, from rendering a snapshot with one tunnel, both of
    its SAs counted."""
    sa = lambda s, d: {"spi": "0x00001000", "src": s, "dst": d, "state": "active", "age": 3.0, "out": {"packets": 5, "bytes": 500, "seq": 5},
                       "in": {"packets": 4, "bytes": 400}, "unreceived": 1,
                       "dropped": {"out": {}, "in": {"replay": 2}}, "next_renewal": {"in_seconds": 10.0, "packets_left": 95}}
    snap = {"controller": {"term": 3}, "gateways": [{"name": "S1", "connected": True}],
            "tunnels": [{"name": "S1-S2", "state": "up", "renewals": 2, "renewal_failures": 0, "sas": [sa("S1", "S2"), sa("S2", "S1")]}]}
    text = status_metrics.render(snap, {"name": "r1"})
    samples = [line for line in text.splitlines() if line and not line.startswith("#")]
    names = {re.match(r"[a-z0-9_]+", s).group(0) for s in samples}
    labels = {k for s in samples for k in re.findall(r'[{,](\w+)="', s)}
    return names, labels


def exprs(dash):
    """Every PromQL expression of the dashboard: panel targets and template variable queries."""
    out = []
    for p in dash["panels"]:
        out += [t["expr"] for t in p.get("targets", [])]
    for v in dash["templating"]["list"]:
        q = v.get("query")
        out.append(q["query"] if isinstance(q, dict) else q)
    return out


def test_the_controller_renders_every_metric_it_declares():
    names, _ = controller_metrics()
    assert names == set(status_metrics.METRICS)


def test_dashboard_is_an_importable_model():
    dash = json.loads(DASHBOARD.read_text())
    assert dash["title"] and dash["uid"] and isinstance(dash["schemaVersion"], int)
    assert [i["name"] for i in dash["__inputs"]] == ["DS_PROMETHEUS"] and dash["__inputs"][0]["pluginId"] == "prometheus"
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    for p in dash["panels"]:
        assert {"h", "w", "x", "y"} <= set(p["gridPos"]) and p["gridPos"]["x"] + p["gridPos"]["w"] <= 24, p["title"]
        if p["type"] != "row":
            assert p["targets"] and p["datasource"]["uid"] == "${DS_PROMETHEUS}", p["title"]
            assert len({t["refId"] for t in p["targets"]}) == len(p["targets"]), p["title"]
    # panels do not overlap
    cells = set()
    for p in dash["panels"]:
        g = p["gridPos"]
        area = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not area & cells, f"panel {p['title']!r} overlaps another"
        cells |= area


def test_every_metric_and_label_the_dashboard_queries_is_exported():
    sw_names, sw_labels = switch_metrics()
    ctl_names, ctl_labels = controller_metrics()
    assert "p4sec_port_rx_packets_total" in sw_names and "p4sec_table_entries" in sw_names       # the parsing found them
    assert {"port", "iface", "table", "outcome", "worker", "result"} <= sw_labels
    dash = json.loads(DASHBOARD.read_text())
    used = set()
    for e in exprs(dash):
        found = set(METRIC.findall(e))
        assert found, f"a query names no p4sec metric: {e}"
        unknown = found - sw_names - ctl_names
        assert not unknown, f"{e}: not exported by the switch nor the controller: {sorted(unknown)}"
        used |= found
        labels = set(re.findall(r"(\w+)\s*(?:=~|!~|!=|=)\s*\"", e))
        for group in re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", e):
            labels |= {x.strip() for x in group.split(",") if x.strip()}
        labels |= set(re.findall(r"label_values\(\s*\w+\s*,\s*(\w+)\s*\)", e))
        bad = labels - sw_labels - ctl_labels - SCRAPE_LABELS - PROMQL
        assert not bad, f"{e}: labels no code exports: {sorted(bad)}"
    # and the dashboard shows every controller metric and every switch metric family
    assert not (ctl_names | sw_names) - used, f"metrics without a panel: {sorted((ctl_names | sw_names) - used)}"
