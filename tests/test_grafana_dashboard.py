"""docs/grafana/p4sec.json, the Grafana dashboard for the switch's and the controller's Prometheus metrics: an
importable dashboard model whose every query is valid PromQL (parsed by promql-parser) naming only metrics, and
labels, that the code exports: the switch's from crates/switch/src/metrics.rs, the controller's as
p4sec.ipsec.status_metrics renders them (read back with prometheus_client's parser of the text format)."""
import json
import re

import promql_parser
from prometheus_client.parser import text_string_to_metric_families

from conftest import ROOT
from p4sec.ipsec import status_metrics

DASHBOARD = ROOT / "docs" / "grafana" / "p4sec.json"
# the labels Prometheus adds to every scraped series
SCRAPE_LABELS = {"instance", "job"}


def switch_metrics():
    """(metric names, label names) of the switch's /metrics, read from the code that writes them."""
    src = (ROOT / "crates" / "switch" / "src" / "metrics.rs").read_text()
    names = set(re.findall(r'"(p4sec_[a-z0-9_]+)"', src))
    labels = set(re.findall(r'[{,](\w+)=\\"', src))
    return names, labels


def controller_metrics():
    """(metric names, label names) of the controller's /metrics, from rendering a snapshot with one tunnel, both of
    its SAs counted, one with drops."""
    sa = lambda s, d: {"spi": "0x00001000", "src": s, "dst": d, "state": "active", "age": 3.0, "out": {"packets": 5, "bytes": 500, "seq": 5},
                       "in": {"packets": 4, "bytes": 400}, "unreceived": 1,
                       "dropped": {"out": {}, "in": {"replay": 2}},
                       "next_renewal": {"in_seconds": 10.0, "packets_left": 95}}
    snap = {"controller": {"term": 3}, "gateways": [{"name": "S1", "connected": True}], "store": {"ok": True, "renewals_pending": 0},
            "tunnels": [{"name": "S1-S2", "state": "up", "renewals": 2, "renewal_failures": 0, "sas": [sa("S1", "S2"), sa("S2", "S1")]}]}
    names, labels = set(), set()
    for fam in text_string_to_metric_families(status_metrics.render(snap, {"name": "r1"})):
        for sample in fam.samples:
            names.add(sample.name)
            labels |= set(sample.labels)
    return names, labels


def exprs(dash):
    """Every PromQL expression of the dashboard (panel targets) and the template variables' label_values queries."""
    out, variables = [], []
    for p in dash["panels"]:
        out += [t["expr"] for t in p.get("targets", [])]
    for v in dash["templating"]["list"]:
        q = v.get("query")
        variables.append(q["query"] if isinstance(q, dict) else q)
    return out, variables


def selectors(node, names, labels):
    """The metric names and label names a parsed PromQL expression uses (walking its tree)."""
    kind = type(node).__name__
    if kind == "VectorSelector":
        names.add(node.name)
        labels |= {m.name for m in node.matchers.matchers}
    elif kind == "MatrixSelector":
        selectors(node.vector_selector, names, labels)
    elif kind == "AggregateExpr":
        if node.modifier is not None:
            labels |= set(node.modifier.labels)
        selectors(node.expr, names, labels)
        if node.param is not None:
            selectors(node.param, names, labels)
    elif kind == "BinaryExpr":
        m = node.modifier
        if m is not None and m.matching is not None:
            labels |= set(m.matching.labels)
        if m is not None:
            labels |= set(m.group_labels or [])
        selectors(node.lhs, names, labels)
        selectors(node.rhs, names, labels)
    elif kind == "Call":
        for a in node.args:
            selectors(a, names, labels)
    elif kind in ("ParenExpr", "UnaryExpr", "SubqueryExpr"):
        selectors(node.expr, names, labels)
    else:
        assert kind in ("NumberLiteral", "StringLiteral"), f"unexpected PromQL node {kind}"


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
    known_labels = sw_labels | ctl_labels | SCRAPE_LABELS
    dash = json.loads(DASHBOARD.read_text())
    queries, variables = exprs(dash)
    used = set()
    for e in queries:
        # the dashboard's variables ($switch, $tunnel) stand for label regexes
        tree = promql_parser.parse(re.sub(r"\$\w+", ".*", e))
        names, labels = set(), set()
        selectors(tree, names, labels)
        assert names, f"a query names no metric: {e}"
        unknown = names - sw_names - ctl_names
        assert not unknown, f"{e}: not exported by the switch nor the controller: {sorted(unknown)}"
        assert not labels - known_labels, f"{e}: labels no code exports: {sorted(labels - known_labels)}"
        used |= names
    for q in variables:
        m = re.fullmatch(r"label_values\((\w+),\s*(\w+)\)", q)
        assert m and m.group(1) in sw_names | ctl_names and m.group(2) in known_labels, q
    # and the dashboard shows every controller metric and every switch metric family
    assert not (ctl_names | sw_names) - used, f"metrics without a panel: {sorted((ctl_names | sw_names) - used)}"
