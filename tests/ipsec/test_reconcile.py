"""Reconciliation (p4sec.reconcile): the decoder of the switch's Read answer agrees with the p4runtime package;
with real switches, a controller adopts what is there, adds what is missing, removes orphans, and `rekey NAME`
renews that tunnel only."""
import os
import subprocess
import time

import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from conftest import ROOT
from p4sec.ipsec import gateway as gwp
from p4sec.ipsec import reconcile as rec
from p4sec.infra import runtime
from p4sec.ipsec.controller import Gateway, IpsecController
from p4sec.infra.netns import free_port
from test_site_to_site import net  # noqa: F401 (fixture)

# the gateway tables a tunnel writes to
TABLES = [gwp.spd(4), gwp.sad_dec(4), gwp.sa_selectors(4), gwp.lpm(4)]


class Offline(runtime.Switch):
    """A Switch without a connection (names resolved from a P4Info)."""

    def __init__(self, p4info):
        self.p4info, self._names, self._names_of, self._batch = p4info, {}, None, None


@pytest.fixture(scope="module")
def program(p4sec_bin, tmp_path_factory):
    out = tmp_path_factory.mktemp("gw")
    subprocess.run([str(p4sec_bin), "compile", str(ROOT / "programs" / "ipsec_gateway.p4"), "-o", str(out)], check=True)
    return out


def test_the_read_decoder_agrees_with_the_library(program):
    info = p4info_pb2.P4Info()
    text_format.Parse((program / "p4info.txtpb").read_text(), info)
    sw = Offline(info)
    entries = [
        rec.Entry(gwp.sad_dec(4), gwp.sad_dec_match("192.0.2.1", "198.51.100.1", 0x1234abcd), gwp.DEC_SA, {gwp.SA_INDEX: 70000}),
        rec.Entry(gwp.sad_dec(6), gwp.sad_dec_match("2001:db8::1", "2001:db8::2", 7), gwp.DEC_SA, {gwp.SA_INDEX: 0}),
        rec.Entry(gwp.spd(4), gwp.spd_match("10.1.3.0/24", "10.2.0.0/16"), gwp.PROTECT, {gwp.SA_INDEX: 3}, priority=10),
        rec.Entry(gwp.spd(6), gwp.spd_match("2001:db8:1::/48", "2001:db8:2::/48"), gwp.BYPASS, {}, priority=20),
        rec._route("10.2.0.0/16", "02:00:00:00:0b:01", "02:00:00:00:00:01", 2),
        rec._route("0.0.0.0/0", "02:00:00:00:0b:01", "02:00:00:00:00:01", 511),
        rec.Entry(gwp.PORT_SIDE, gwp.wan_port_match(2), gwp.FROM_WAN, {}),
        rec.Entry(gwp.sa_selectors(4), gwp.selectors_match(3, "10.2.0.0/16", "10.1.3.0/24"), gwp.SELECTOR_OK, {}, priority=gwp.SELECTOR_PRIORITY),
        rec.Entry(gwp.sa_selectors(6), gwp.selectors_match(0, "2001:db8:2::7/128", "2001:db8:1::/48"), gwp.SELECTOR_OK, {},
                  priority=gwp.SELECTOR_PRIORITY),
    ]
    resp = p4runtime_pb2.ReadResponse()
    for e in entries:
        sw._entry(e.table, e.match, e.action, e.params, e.priority, e=resp.entities.add().table_entry)
    resp.entities.add().extern_entry.extern_id = 5      # other entities are skipped
    got = rec.decode_table_entries(resp.SerializeToString())
    ids = rec.Ids(sw)
    assert got == {e.key(ids): e.value(ids) for e in entries}
    # and the library's own reading of the same answer, field by field
    for te in (x.table_entry for x in resp.entities if x.HasField("table_entry")):
        key = (te.table_id, tuple(sorted(rec._field_match(m.SerializeToString()) for m in te.match)), te.priority)
        assert got[key][0] == te.action.action.action_id
        assert got[key][1] == tuple(sorted((p.param_id, runtime.canonical(p.value)) for p in te.action.action.params))


@pytest.fixture
def two_gateways(p4sec_bin, net, program):  # noqa: F811
    pa, pb = free_port(), free_port()
    procs = [
        subprocess.Popen([str(p4sec_bin), "switch", "--grpc", f"127.0.0.1:{pa}", "--port", f"1={net['a1']}", "--port", f"2={net['wa']}"]),
        subprocess.Popen([str(p4sec_bin), "switch", "--grpc", f"127.0.0.1:{pb}", "--port", f"1={net['b1']}", "--port", f"2={net['wb']}"]),
    ]
    made = []

    def controller(db):
        sa, sb = runtime.Switch(f"127.0.0.1:{pa}"), runtime.Switch(f"127.0.0.1:{pb}")
        ctl = IpsecController(db, grace=0.3)
        ctl.add_gateway(Gateway("A", sa, "192.0.2.1", "10.1.0.0/16", 1, "02:00:00:00:0a:01", 2, "02:00:00:00:0b:02", "198.51.100.0/24"), program)
        ctl.add_gateway(Gateway("B", sb, "198.51.100.1", "10.2.0.0/16", 1, "02:00:00:00:0b:01", 2, "02:00:00:00:0a:02", "192.0.2.0/24"), program)
        made.append(ctl)
        return ctl
    yield controller
    for ctl in made:
        ctl.close()
        for gw in ctl.gateways.values():
            gw.switch.close()
    for p in procs:
        p.terminate()
        p.wait(timeout=10)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")
def test_reconcile_adopts_adds_and_removes(two_gateways, tmp_path):
    ctl = two_gateways(str(tmp_path / "a.db"))
    ctl.connect("A", "B", name="t1", a_prefix="10.1.1.0/24", b_prefix="10.2.1.0/24")
    ctl.connect("A", "B", name="t2", a_prefix="10.1.2.0/24", b_prefix="10.2.2.0/24")
    assert all(x["in_sync"] for x in ctl.reconcile(dry_run=True).values())
    a = ctl.gateways["A"].switch
    # someone removes a SAD-dec entry and an SA, and adds an entry the controller does not know
    t1 = {r["src"]: r for r in ctl.sas("t1") if r["state"] == "active"}
    gwp.sad_dec_write(a, "198.51.100.1", "192.0.2.1", t1["B"]["spi"], t1["B"]["in_slot"], insert=False)
    gwp.sa_delete(a, t1["B"]["in_slot"])
    a.table_insert(gwp.spd(4), gwp.spd_match("10.1.9.0/24", "10.2.9.0/24"), gwp.BYPASS, {}, priority=10)
    gwp.sa_write(a, 500, {**ctl.keys(t1["B"]["spi"]), "spi": 0x5555})
    check = ctl.reconcile(dry_run=True)
    assert not check["A"]["in_sync"] and check["B"]["in_sync"]
    assert "1 added" in check["A"]["summary"] and "1 removed" in check["A"]["summary"] and "1 SAs written" in check["A"]["summary"] \
        and "1 SAs removed" in check["A"]["summary"], check
    ctl.reconcile()
    assert all(x["in_sync"] for x in ctl.reconcile(dry_run=True).values())
    assert 500 not in rec.read_sas(a) and rec.read_sas(a)[t1["B"]["in_slot"]] == t1["B"]["spi"]

    # another controller with an empty store (the first one gone): everything on the switches is an orphan and goes
    ctl.close()
    for gw in ctl.gateways.values():
        gw.switch.close()
    time.sleep(0.2)
    other = two_gateways(str(tmp_path / "b.db"))
    a = other.gateways["A"].switch
    other.reconcile()
    assert rec.read_sas(a) == {} and rec.read_tables(a, [gwp.spd(4), gwp.sad_dec(4)]) == {}


def _selectors(sw):
    """{slot: (inner source, inner destination)} of the IPv4 sa_selectors entries on a switch (prefixes as value/mask)."""
    ids = rec.Ids(sw)
    tid, fields = ids.table(gwp.sa_selectors(4))
    slot_f, src_f, dst_f = fields[gwp.SA_SLOT], fields[gwp.src_addr(4)], fields[gwp.dst_addr(4)]
    out = {}
    for (t, match, prio), _ in rec.read_tables(sw, [gwp.sa_selectors(4)]).items():
        m = {fm[0]: fm[2:] for fm in match}
        out.setdefault(int.from_bytes(m[slot_f][0], "big"), []).append((m[src_f], m[dst_f]))
    return out


def _want_selector(src, dst):
    v, m = gwp.prefix_match(src), gwp.prefix_match(dst)
    return ((runtime.canonical(v[0]), runtime.canonical(v[1])), (runtime.canonical(m[0]), runtime.canonical(m[1])))


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")
def test_selectors_and_wan_port_are_part_of_the_desired_state(two_gateways, tmp_path):
    ctl = two_gateways(str(tmp_path / "a.db"))
    ctl.connect("A", "B", name="t1", a_prefix="10.1.1.0/24", b_prefix="10.2.1.0/24")
    ctl.connect("A", "B", name="t2", a_prefix="10.1.2.0/24", b_prefix="10.2.2.0/24")
    a = ctl.gateways["A"].switch
    # each inbound SA on A has its tunnel's selectors (from B's prefix to A's), the WAN port is marked
    sas = {(r["tunnel"], r["src"]): r for r in ctl.sas() if r["state"] == "active"}
    assert _selectors(a) == {sas[("t1", "B")]["in_slot"]: [_want_selector("10.2.1.0/24", "10.1.1.0/24")],
                             sas[("t2", "B")]["in_slot"]: [_want_selector("10.2.2.0/24", "10.1.2.0/24")]}
    assert len(rec.read_tables(a, [gwp.PORT_SIDE])) == 1
    assert all(x["in_sync"] for x in ctl.reconcile(dry_run=True).values())
    # a selector lost, an orphan one and a second WAN port added: reconciliation restores and removes
    slot = sas[("t1", "B")]["in_slot"]
    gwp.selectors_write(a, slot, "10.2.1.0/24", "10.1.1.0/24", insert=False)
    gwp.selectors_write(a, 77, "10.9.0.0/16", "10.1.0.0/16")
    gwp.wan_port_insert(a, 5)
    check = ctl.reconcile(dry_run=True)
    assert "1 added" in check["A"]["summary"] and "2 removed" in check["A"]["summary"] and check["B"]["in_sync"], check
    ctl.reconcile()
    assert all(x["in_sync"] for x in ctl.reconcile(dry_run=True).values())
    assert 77 not in _selectors(a) and _selectors(a)[slot] == [_want_selector("10.2.1.0/24", "10.1.1.0/24")]
    assert len(rec.read_tables(a, [gwp.PORT_SIDE])) == 1
    # a renewal moves t2's selectors to the new slot (the old ones go with the old SAD-dec entry); teardown removes
    # t1's
    ctl.rekey("t2")
    time.sleep(1.0)
    new = {r["src"]: r for r in ctl.sas("t2") if r["state"] == "active"}
    ctl.disconnect("t1")
    assert _selectors(a) == {new["B"]["in_slot"]: [_want_selector("10.2.2.0/24", "10.1.2.0/24")]}
    assert all(x["in_sync"] for x in ctl.reconcile(dry_run=True).values())
    # a controller restarted on the same store adopts them (nothing written)
    ctl.close()
    for gw in ctl.gateways.values():
        gw.switch.close()
    time.sleep(0.2)
    again = two_gateways(str(tmp_path / "a.db"))
    assert all(x["in_sync"] for x in again.reconcile(dry_run=True).values())


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")
def test_rekey_renews_the_named_tunnel_only(two_gateways, tmp_path):
    ctl = two_gateways(str(tmp_path / "a.db"))
    ctl.connect("A", "B", name="t1", a_prefix="10.1.1.0/24", b_prefix="10.2.1.0/24")
    ctl.connect("A", "B", name="t2", a_prefix="10.1.2.0/24", b_prefix="10.2.2.0/24")
    before = {t["name"]: set(t["active_spis"]) for t in ctl.tunnels()}
    ctl.rekey("t1")
    after = {t["name"]: set(t["active_spis"]) for t in ctl.tunnels()}
    assert after["t2"] == before["t2"], "t2 untouched"
    assert not (after["t1"] & before["t1"]) and len(after["t1"]) == 2, "both directions of t1 renewed"
    got = ctl.rekey_pair("A", "B")
    assert set(got) == {"t1", "t2"}
    assert not ({t["name"]: set(t["active_spis"]) for t in ctl.tunnels()}["t2"] & before["t2"])
    with pytest.raises(Exception, match="no tunnel nope is up"):
        ctl.rekey("nope")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")
def test_teardown_removes_everything_and_reports_what_was_gone(two_gateways, tmp_path):
    ctl = two_gateways(str(tmp_path / "a.db"))
    ctl.connect("A", "B", name="keep", a_prefix="10.1.1.0/24", b_prefix="10.2.1.0/24")
    a, b = ctl.gateways["A"].switch, ctl.gateways["B"].switch
    before = {n: (rec.read_sas(s), rec.read_tables(s, TABLES)) for n, s in (("A", a), ("B", b))}
    ctl.connect("A", "B", name="t", a_prefix="10.1.2.0/24", b_prefix="10.2.2.0/24")
    spi = next(r["spi"] for r in ctl.sas("t") if r["state"] == "active" and r["src"] == "A")
    ctl.renew(spi)                      # the old SA retires: its SAD-dec entry and slot are still on B
    rows = ctl.sas("t")
    t = {(r["src"], r["state"]): r for r in rows}
    assert ("A", "retiring") in t and ("A", "active") in t and ("B", "active") in t
    freed = {"A": set(), "B": set()}
    for r in rows:
        freed[r["dst"]].add(r["in_slot"])
        if r["state"] == "active":
            freed[r["src"]].add(r["out_slot"])
    # B's SAD-dec entry of the active A -> B SA is removed behind the controller's back
    act = t[("A", "active")]
    gwp.sad_dec_write(b, "192.0.2.1", "198.51.100.1", act["spi"], act["in_slot"], insert=False)
    ctl.disconnect("t")
    # everything of t is gone from both switches (the other tunnel's entries and SAs stay) ...
    for n, s in (("A", a), ("B", b)):
        assert (rec.read_sas(s), rec.read_tables(s, TABLES)) == before[n], n
    # ... its slots are free again, and the one removal that found nothing is an event naming the SA
    assert {n: set(g.free_slots) for n, g in ctl.gateways.items()} == freed
    assert all(len(g.free_slots) == len(set(g.free_slots)) for g in ctl.gateways.values())
    events = [e[2] for e in ctl.events("t")]
    failed = [e for e in events if "failed" in e]
    assert len(failed) == 1 and f"SA {act['spi']:#010x} SAD-dec" in failed[0] and "no entry" in failed[0], events
    assert events[-1] == "down"
    assert all(x["in_sync"] for x in ctl.reconcile(dry_run=True).values())
