"""P4Runtime type translation (issue 22, item 4): a SAI P4-style program whose `port_id_t` and `nexthop_id_t`
are `@p4runtime_translation(..., string)` types, programmed over P4Runtime with string ids, packets forwarded
accordingly (seen in PacketIn metadata, also translated), entries read back with the same strings; automatic
allocation of next-hop ids freed with their entries; precise errors; and the production SAI P4 program
(PINS middleblock, with its translation annotations restored) accepting an entry with string ids."""
import json
import re
import subprocess

import grpc
import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc
from p4sec.infra.netns import free_port

from conftest import ROOT, require_shared
from test_p4runtime import Controller, update_errors
from test_p4runtime import push_pipeline as push
from test_packet_io import Stream, meta_ids

CPU = 255
PORTS = {"Ethernet0": 1, "Ethernet4": 2, "Ethernet8": 3, "CPU": CPU}
INVALID_ARGUMENT = grpc.StatusCode.INVALID_ARGUMENT.value[0]
RESOURCE_EXHAUSTED = grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]


def compile_program(p4sec_bin, src, out):
    subprocess.run([str(p4sec_bin), "compile", str(src), "-o", str(out)], check=True, capture_output=True)
    info = p4info_pb2.P4Info()
    text_format.Parse((out / "p4info.txtpb").read_text(), info)
    return out, info


@pytest.fixture(scope="module")
def sai(p4sec_bin, tmp_path_factory):
    return compile_program(p4sec_bin, ROOT / "tests" / "switch" / "programs" / "sai_translated.p4", tmp_path_factory.mktemp("sai"))


def start(p4sec_bin, tmp_path, *extra):
    port = free_port()
    proc = subprocess.Popen([str(p4sec_bin), "switch", "--grpc", f"127.0.0.1:{port}", "--cpu-port", str(CPU), *extra], stderr=subprocess.DEVNULL)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    grpc.channel_ready_future(channel).result(timeout=20)
    return proc, channel, p4runtime_pb2_grpc.P4RuntimeStub(channel)


@pytest.fixture
def switch(p4sec_bin, tmp_path):
    """A switch whose port_id_t strings are SONiC port names (--translate)."""
    (tmp_path / "ports.json").write_text(json.dumps(PORTS))
    proc, channel, stub = start(p4sec_bin, tmp_path, "--translate", f"port_id_t={tmp_path / 'ports.json'}")
    yield stub
    channel.close()
    proc.terminate()
    proc.wait(timeout=10)


class P4Info:
    def __init__(self, info):
        self.tables = {t.preamble.name.split(".")[-1]: t for t in info.tables}
        self.actions = {a.preamble.name.split(".")[-1]: a for a in info.actions}

    def entry(self, table, matches, action, params, kind=p4runtime_pb2.Update.INSERT, priority=0):
        t = self.tables[table]
        u = p4runtime_pb2.Update(type=kind)
        e = u.entity.table_entry
        e.table_id = t.preamble.id
        e.priority = priority
        fields = {f.name: f for f in t.match_fields}
        for name, m in matches.items():
            fm = e.match.add(field_id=fields[name].id)
            if isinstance(m, tuple):
                fm.lpm.value, fm.lpm.prefix_len = m
            elif fields[name].match_type == p4info_pb2.MatchField.OPTIONAL:
                fm.optional.value = m
            else:
                fm.exact.value = m
        a = self.actions[action]
        e.action.action.action_id = a.preamble.id
        pids = {p.name: p.id for p in a.params}
        for name, v in params.items():
            e.action.action.params.add(param_id=pids[name], value=v)
        return u


def read_entries(stub, table_id):
    req = p4runtime_pb2.ReadRequest(device_id=1)
    req.entities.add().table_entry.table_id = table_id
    return [e.table_entry for r in stub.Read(req) for e in r.entities]


FRAME_HDR = bytes.fromhex("020000000002" "020000000001" "0800")


def ipv4(dst):
    # version/ihl, tos, len, id, flags, ttl, proto, csum, src, dst
    return bytes([0x45, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0, 10, 9, 9, 9]) + bytes(dst)


def test_p4info_describes_translated_types(p4sec_bin, sai, tmp_path):
    """The P4Info says how a client writes translated values (`translated_type` with `sdn_string`, as the P4Runtime
    spec and the reference compiler have it; not `original_type`), in the text P4Info and in the binary one, and
    keeps `type_name` on the match fields and parameters of those types."""
    _, text_info = sai
    binfile = tmp_path / "sai.p4info.bin"
    subprocess.run([str(p4sec_bin), "compile", str(ROOT / "tests" / "switch" / "programs" / "sai_translated.p4"), "-o",
                    str(tmp_path / "out"), "--p4runtime-files", str(binfile)], check=True, capture_output=True)
    bin_info = p4info_pb2.P4Info()
    bin_info.ParseFromString(binfile.read_bytes())
    for info in (text_info, bin_info):
        for name in ("port_id_t", "nexthop_id_t"):
            t = info.type_info.new_types[name]
            assert t.WhichOneof("representation") == "translated_type", (name, t)
            assert t.translated_type.WhichOneof("sdn_type") == "sdn_string" and t.translated_type.uri == ""
            assert not any("p4runtime_translation" in a for a in t.annotations)
        typed = [f.type_name.name for tb in info.tables for f in tb.match_fields] + \
                [p.type_name.name for a in info.actions for p in a.params]
        assert "port_id_t" in typed and "nexthop_id_t" in typed


def test_string_ids_programmed_forwarded_and_read_back(switch, sai):
    stub = switch
    ctl = Controller(stub, 10)
    assert ctl.arbitration().status.code == 0
    push(ctl, sai)
    p = P4Info(sai[1])
    ctl.write(
        p.entry("nexthop_table", {"nexthop_id": b"nh-ethernet4"}, "set_port", {"port": b"Ethernet4"}),
        p.entry("nexthop_table", {"nexthop_id": b"nh-ethernet8"}, "set_port", {"port": b"Ethernet8"}),
        p.entry("ipv4_table", {"ipv4_dst": (bytes([10, 1, 0, 0]), 16)}, "set_nexthop_id", {"nexthop_id": b"nh-ethernet4"}),
        p.entry("ipv4_table", {"ipv4_dst": (bytes([10, 2, 0, 0]), 16)}, "set_nexthop_id", {"nexthop_id": b"nh-ethernet8"}),
    )
    # read back: the same strings
    nh = {e.match[0].exact.value: e.action.action.params[0].value for e in read_entries(stub, p.tables["nexthop_table"].preamble.id)}
    assert nh == {b"nh-ethernet4": b"Ethernet4", b"nh-ethernet8": b"Ethernet8"}
    routes = {e.match[0].lpm.value: e.action.action.params[0].value for e in read_entries(stub, p.tables["ipv4_table"].preamble.id)}
    assert routes == {bytes([10, 1, 0, 0]): b"nh-ethernet4", bytes([10, 2, 0, 0]): b"nh-ethernet8"}
    # packets: a PacketOut "received" on Ethernet0 is routed; the PacketIn names its ports as strings
    ids = meta_ids(sai[1])
    ctl.stream.cancel()
    s = Stream(stub, 11)
    assert s.next("arbitration").status.code == 0
    for dst, want in (([10, 1, 0, 7], b"Ethernet4"), ([10, 2, 3, 4], b"Ethernet8"), ([10, 3, 0, 1], b"0")):
        s.packet_out(FRAME_HDR + ipv4(dst), [(ids["packet_out"]["ingress_port"], b"Ethernet0"), (ids["packet_out"]["pad"], b"\x00")])
        pin = s.next("packet")
        md = {m.metadata_id: m.value for m in pin.metadata}
        assert md[ids["packet_in"]["ingress_port"]] == b"Ethernet0", md
        assert md[ids["packet_in"]["target_egress_port"]] == want, (dst, md)
    # an unknown port name in a PacketOut is refused precisely
    s.packet_out(FRAME_HDR + ipv4([10, 1, 0, 7]), [(ids["packet_out"]["ingress_port"], b"Ethernet99"), (ids["packet_out"]["pad"], b"\x00")])
    err = s.next("error")
    assert err.canonical_code == INVALID_ARGUMENT and "`Ethernet99` is not a known port_id_t" in err.message, err.message
    # a route moved to the other next hop, read back and forwarded accordingly
    ctl2 = Controller(stub, 12)
    assert ctl2.arbitration().status.code == 0
    ctl2.write(p.entry("ipv4_table", {"ipv4_dst": (bytes([10, 1, 0, 0]), 16)}, "set_nexthop_id", {"nexthop_id": b"nh-ethernet8"}, kind=p4runtime_pb2.Update.MODIFY))
    s2 = Stream(stub, 13)
    assert s2.next("arbitration").status.code == 0
    s2.packet_out(FRAME_HDR + ipv4([10, 1, 0, 7]), [(ids["packet_out"]["ingress_port"], b"Ethernet0"), (ids["packet_out"]["pad"], b"\x00")])
    md = {m.metadata_id: m.value for m in s2.next("packet").metadata}
    assert md[ids["packet_in"]["target_egress_port"]] == b"Ethernet8"
    s.close()
    s2.close()


def test_precise_errors_and_ids_freed_with_their_entries(switch, sai):
    stub = switch
    ctl = Controller(stub, 10)
    assert ctl.arbitration().status.code == 0
    push(ctl, sai)
    p = P4Info(sai[1])
    # an unknown port name, and an ACL on a port given by a number where the switch has names
    with pytest.raises(grpc.RpcError) as e:
        ctl.write(
            p.entry("nexthop_table", {"nexthop_id": b"nh-1"}, "set_port", {"port": b"Ethernet99"}),
            p.entry("ingress_acl", {"in_port": b"1"}, "drop", {}, priority=1),
            p.entry("ingress_acl", {"in_port": b"Ethernet0"}, "drop", {}, priority=1),
        )
    errs = update_errors(e.value)
    assert errs[0].canonical_code == INVALID_ARGUMENT and "`Ethernet99` is not a known port_id_t" in errs[0].message, errs[0].message
    assert "Ethernet0" in errs[0].message, "the message lists the known names"
    assert errs[1].canonical_code == INVALID_ARGUMENT and "`1` is not a known port_id_t" in errs[1].message
    assert errs[2].canonical_code == 0
    # a translated field is matched exactly: a ternary form is refused (wrong form)
    bad = p.entry("nexthop_table", {"nexthop_id": b"nh-1"}, "set_port", {"port": b"Ethernet0"})
    bad.entity.table_entry.match[0].ClearField("exact")
    bad.entity.table_entry.match[0].ternary.value = b"nh-1"
    bad.entity.table_entry.match[0].ternary.mask = b"\xff"
    with pytest.raises(grpc.RpcError) as e:
        ctl.write(bad)
    [err] = update_errors(e.value)
    assert err.canonical_code == INVALID_ARGUMENT and "translated type nexthop_id_t" in err.message, err.message
    # nexthop_id_t is bit<10>: 1023 ids can be allocated (0 stays unset); the next is RESOURCE_EXHAUSTED
    nh = lambda i, kind=p4runtime_pb2.Update.INSERT: p.entry("nexthop_table", {"nexthop_id": f"nh-{i}".encode()}, "set_port", {"port": b"Ethernet0"}, kind=kind)  # noqa: E731
    ctl.write(*[nh(i) for i in range(1023)])
    with pytest.raises(grpc.RpcError) as e:
        ctl.write(nh(1023))
    [err] = update_errors(e.value)
    assert err.canonical_code == RESOURCE_EXHAUSTED and "all 1023 values of nexthop_id_t are in use" in err.message, err.message
    # an id is freed with the last entry that uses it: after a delete the new id fits
    ctl.write(nh(5, p4runtime_pb2.Update.DELETE))
    ctl.write(nh(1023))
    got = {e.match[0].exact.value for e in read_entries(stub, p.tables["nexthop_table"].preamble.id)}
    assert len(got) == 1023 and b"nh-1023" in got and b"nh-5" not in got
    # deleting an id nobody uses is NOT_FOUND
    with pytest.raises(grpc.RpcError) as e:
        ctl.write(nh(5, p4runtime_pb2.Update.DELETE))
    assert update_errors(e.value)[0].canonical_code == grpc.StatusCode.NOT_FOUND.value[0]


def test_ports_default_to_their_numbers(p4sec_bin, sai, tmp_path):
    """Without --translate a port's SDN string is its decimal number."""
    proc, channel, stub = start(p4sec_bin, tmp_path)
    try:
        ctl = Controller(stub, 10)
        assert ctl.arbitration().status.code == 0
        push(ctl, sai)
        p = P4Info(sai[1])
        ctl.write(p.entry("nexthop_table", {"nexthop_id": b"a"}, "set_port", {"port": b"7"}))
        [e] = read_entries(stub, p.tables["nexthop_table"].preamble.id)
        assert e.action.action.params[0].value == b"7"
        for bad, code, text in ((b"Ethernet0", INVALID_ARGUMENT, "named by its decimal number"), (b"600", grpc.StatusCode.OUT_OF_RANGE.value[0], "does not fit port_id_t")):
            with pytest.raises(grpc.RpcError) as x:
                ctl.write(p.entry("nexthop_table", {"nexthop_id": b"b"}, "set_port", {"port": bad}))
            [err] = update_errors(x.value)
            assert err.canonical_code == code and text in err.message, err.message
    finally:
        channel.close()
        proc.terminate()
        proc.wait(timeout=10)


def test_production_sai_p4_accepts_string_ids(p4sec_bin, tmp_path):
    """PINS middleblock as the corpus holds it has its `@p4runtime_translation` annotations commented out
    (p4test's --pp output); restored, as in SAI P4, it loads and takes entries with string ids."""
    src = require_shared("conformance/production/pins/pins_middleblock.p4")
    text = re.sub(r"^// (@p4runtime_translation\()", r"\1", src.read_text(), flags=re.M)
    assert text.count("@p4runtime_translation(") >= 8
    (tmp_path / "middleblock.p4").write_text(text)
    compiled = compile_program(p4sec_bin, tmp_path / "middleblock.p4", tmp_path / "out")
    proc, channel, stub = start(p4sec_bin, tmp_path)
    try:
        ctl = Controller(stub, 10)
        assert ctl.arbitration().status.code == 0
        push(ctl, compiled)
        p = P4Info(compiled[1])
        ctl.write(
            p.entry("vrf_table", {"vrf_id": b"vrf-blue"}, "no_action", {}),
            p.entry("router_interface_table", {"router_interface_id": b"rif-1"}, "set_port_and_src_mac", {"port": b"3", "src_mac": bytes.fromhex("020000000001")}),
        )
        [vrf] = read_entries(stub, p.tables["vrf_table"].preamble.id)
        assert vrf.match[0].exact.value == b"vrf-blue"
        [rif] = read_entries(stub, p.tables["router_interface_table"].preamble.id)
        assert rif.match[0].exact.value == b"rif-1"
        assert {x.value for x in rif.action.action.params} >= {b"3"}
    finally:
        channel.close()
        proc.terminate()
        proc.wait(timeout=10)
