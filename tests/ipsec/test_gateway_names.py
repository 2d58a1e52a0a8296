"""p4sec.gateway names what the controller and the agent write to in programs/ipsec_gateway.p4: every table,
action, parameter, match field, extern instance, counter and digest it names must exist in the program's P4Info."""
import subprocess

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

from conftest import ROOT
from p4sec.ipsec import gateway as gwp


def test_every_name_exists_in_the_gateway_program(p4sec_bin, tmp_path):
    subprocess.run([str(p4sec_bin), "compile", str(ROOT / "programs" / "ipsec_gateway.p4"), "-o", str(tmp_path)], check=True)
    info = p4info_pb2.P4Info()
    text_format.Parse((tmp_path / "p4info.txtpb").read_text(), info)
    tables = {t.preamble.name: t for t in info.tables}
    actions = {a.preamble.name: {p.name for p in a.params} for a in info.actions}
    for t in gwp.tables():
        assert t in tables, t
    for a in gwp.actions():
        assert a in actions, a
    assert actions[gwp.PROTECT] == actions[gwp.DEC_SA] == {gwp.SA_INDEX}
    assert actions[gwp.set_nhop(4)] == actions[gwp.set_nhop(6)] == set(gwp.NHOP_PARAMS)
    for v in (4, 6):
        fields = lambda t: {f.name for f in tables[t].match_fields}
        assert fields(gwp.sad_dec(v)) == {gwp.src_addr(v), gwp.dst_addr(v), gwp.ESP_SPI}
        assert {gwp.src_addr(v), gwp.dst_addr(v)} <= fields(gwp.spd(v))
        assert fields(gwp.local_addr(v)) == {gwp.dst_addr(v)} and fields(gwp.lpm(v)) == {gwp.dst_addr(v)}
        assert fields(gwp.sa_selectors(v)) == {gwp.SA_SLOT, gwp.src_addr(v), gwp.dst_addr(v), gwp.proto(v)}
        assert {a.id for a in tables[gwp.spd(v)].action_refs} >= {next(x.preamble.id for x in info.actions if x.preamble.name == n)
                                                                   for n in (gwp.PROTECT, gwp.BYPASS)}
    assert any(i.preamble.name == gwp.SAD for e in info.externs for i in e.instances)
    assert {f.name for f in tables[gwp.PORT_SIDE].match_fields} == {gwp.INGRESS_PORT}
    counters = {c.preamble.name: c.size for c in info.counters}
    assert gwp.SA_COUNTERS in counters
    assert counters[gwp.WAN_DROPS] > max(gwp.WAN_DENIED, gwp.WAN_SPOOFED) and counters[gwp.ESP_STATUS] > gwp.SELECTOR_MISMATCH
    assert gwp.SA_EVENT_DIGEST in {d.preamble.name for d in info.digests}
