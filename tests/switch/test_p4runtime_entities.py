"""P4Runtime entities beyond table entries, with the official stubs: registers, indexed counters, meters,
multicast groups and clone sessions (write, read back, precise errors)."""
import subprocess

import p4sec  # noqa: F401
import grpc
import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from test_p4runtime import Controller, push_pipeline, switch, update_errors  # noqa: F401

PROGRAM = r"""
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; }
struct hs { h_t h; }
struct m { bit<32> r; }
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {
    value_set<bit<8>>(4) pvs;
    state start { p.extract(hdr.h); transition select(hdr.h.a) { pvs: accept; default: accept; } }
}
control V(inout hs hdr, inout m meta) { apply { } }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    register<bit<32>>(16) regs;
    register<bit<72>>(4) wide;
    counter(8, CounterType.packets_and_bytes) ctrs;
    meter(4, MeterType.bytes) mtr;
    direct_counter(CounterType.packets_and_bytes) dc;
    action hit() { dc.count(); }
    table t { key = { hdr.h.a : exact; } actions = { hit; NoAction; } counters = dc; default_action = NoAction(); }
    apply {
        t.apply();
        regs.read(meta.r, 0);
        ctrs.count(0);
        bit<2> color;
        mtr.execute_meter(0, color);
        sm.mcast_grp = (bit<16>)meta.r;
    }
}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.h); } }
V1Switch(P(), V(), I(), E(), V(), D()) main;
"""


@pytest.fixture(scope="module")
def compiled(p4sec_bin, tmp_path_factory):
    out = tmp_path_factory.mktemp("ent")
    src = out / "ent.p4"
    src.write_text(PROGRAM)
    subprocess.run([str(p4sec_bin), "compile", str(src), "-o", str(out)], check=True)
    info = p4info_pb2.P4Info()
    text_format.Parse((out / "p4info.txtpb").read_text(), info)
    return out, info


def ids(info, kind):
    return {x.preamble.name: x.preamble.id for x in getattr(info, kind)}


def read(stub, fill):
    req = p4runtime_pb2.ReadRequest(device_id=1)
    fill(req.entities.add())
    return [e for r in stub.Read(req) for e in r.entities]


@pytest.fixture
def ctl(switch, compiled):
    stub, _ = switch
    c = Controller(stub, 1)
    c.arbitration()
    push_pipeline(c, compiled)
    return c


def test_registers(ctl, compiled):
    regs = ids(compiled[1], "registers")
    u = p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY)
    u.entity.register_entry.register_id = regs["I.regs"]
    u.entity.register_entry.index.index = 3
    u.entity.register_entry.data.bitstring = b"\x12\x34\x56\x78"
    w = p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY)
    w.entity.register_entry.register_id = regs["I.wide"]  # no index: every cell
    w.entity.register_entry.data.bitstring = bytes.fromhex("ab0102030405060708")
    ctl.write(u, w)

    def one(e):
        e.register_entry.register_id = regs["I.regs"]
        e.register_entry.index.index = 3

    got = read(ctl.stub, one)
    assert len(got) == 1 and got[0].register_entry.data.bitstring == b"\x12\x34\x56\x78"
    every = read(ctl.stub, lambda e: setattr(e.register_entry, "register_id", regs["I.regs"]))
    assert len(every) == 16
    assert [x.register_entry.data.bitstring for x in every].count(b"\x00") == 15
    wide = read(ctl.stub, lambda e: setattr(e.register_entry, "register_id", regs["I.wide"]))
    assert [x.register_entry.data.bitstring for x in wide] == [bytes.fromhex("ab0102030405060708")] * 4

    too_wide = p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY)
    too_wide.entity.register_entry.register_id = regs["I.regs"]
    too_wide.entity.register_entry.index.index = 0
    too_wide.entity.register_entry.data.bitstring = b"\x01\x00\x00\x00\x00"
    out_of_range = p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY)
    out_of_range.entity.register_entry.register_id = regs["I.regs"]
    out_of_range.entity.register_entry.index.index = 16
    out_of_range.entity.register_entry.data.bitstring = b"\x01"
    insert = p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT)
    insert.entity.register_entry.register_id = regs["I.regs"]
    insert.entity.register_entry.data.bitstring = b"\x01"
    with pytest.raises(grpc.RpcError) as e:
        ctl.write(too_wide, out_of_range, insert)
    errs = update_errors(e.value)
    assert "33 significant bits" in errs[0].message
    assert errs[1].canonical_code == grpc.StatusCode.OUT_OF_RANGE.value[0] and "index 16" in errs[1].message
    assert "can only be modified" in errs[2].message
    # nothing of the failed batch landed
    assert read(ctl.stub, one)[0].register_entry.data.bitstring == b"\x12\x34\x56\x78"


def test_counters_and_meters(ctl, compiled):
    ctr = ids(compiled[1], "counters")["I.ctrs"]
    u = p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY)
    u.entity.counter_entry.counter_id = ctr
    u.entity.counter_entry.index.index = 5
    u.entity.counter_entry.data.packet_count = 7
    u.entity.counter_entry.data.byte_count = 700
    ctl.write(u)
    got = read(ctl.stub, lambda e: setattr(e.counter_entry, "counter_id", ctr))
    assert [(x.counter_entry.index.index, x.counter_entry.data.packet_count, x.counter_entry.data.byte_count) for x in got if x.counter_entry.data.packet_count] == [(5, 7, 700)]

    mtr = ids(compiled[1], "meters")["I.mtr"]
    m = p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY)
    m.entity.meter_entry.meter_id = mtr
    m.entity.meter_entry.index.index = 2
    m.entity.meter_entry.config.cir = 1000
    m.entity.meter_entry.config.cburst = 100
    m.entity.meter_entry.config.pir = 2000
    m.entity.meter_entry.config.pburst = 200
    ctl.write(m)
    got = read(ctl.stub, lambda e: setattr(e.meter_entry, "meter_id", mtr))
    configured = [(x.meter_entry.index.index, x.meter_entry.config.cir, x.meter_entry.config.pburst) for x in got if x.meter_entry.HasField("config")]
    assert configured == [(2, 1000, 200)]
    bad = p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY)
    bad.entity.meter_entry.meter_id = mtr
    bad.entity.meter_entry.index.index = 1
    bad.entity.meter_entry.config.cir = 5000
    bad.entity.meter_entry.config.pir = 100
    with pytest.raises(grpc.RpcError) as e:
        ctl.write(bad)
    assert "below the committed rate" in update_errors(e.value)[0].message
    # a single-rate burst on these two-rate meters, or a negative count, is refused with the object named
    eburst = p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY)
    eburst.entity.meter_entry.meter_id = mtr
    eburst.entity.meter_entry.index.index = 1
    eburst.entity.meter_entry.config.cir = 1000
    eburst.entity.meter_entry.config.pir = 2000
    eburst.entity.meter_entry.config.eburst = 10
    negative = p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY)
    negative.entity.counter_entry.counter_id = ctr
    negative.entity.counter_entry.index.index = 1
    negative.entity.counter_entry.data.packet_count = -1
    with pytest.raises(grpc.RpcError) as e:
        ctl.write(eburst, negative)
    errs = update_errors(e.value)
    assert "eburst" in errs[0].message and "I.mtr" in errs[0].message, errs[0].message
    assert "cannot be negative" in errs[1].message, errs[1].message
    assert not any(x.meter_entry.index.index == 1 and x.meter_entry.HasField("config")
                   for x in read(ctl.stub, lambda e: setattr(e.meter_entry, "meter_id", mtr)))
    # resetting to the default (no config)
    reset = p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY)
    reset.entity.meter_entry.meter_id = mtr
    reset.entity.meter_entry.index.index = 2
    ctl.write(reset)
    got = read(ctl.stub, lambda e: setattr(e.meter_entry, "meter_id", mtr))
    assert not any(x.meter_entry.HasField("config") for x in got)


def mc(kind, gid, replicas):
    u = p4runtime_pb2.Update(type=kind)
    g = u.entity.packet_replication_engine_entry.multicast_group_entry
    g.multicast_group_id = gid
    for port, inst in replicas:
        g.replicas.add(egress_port=port, instance=inst)
    return u


def clone(kind, sid, ports):
    u = p4runtime_pb2.Update(type=kind)
    c = u.entity.packet_replication_engine_entry.clone_session_entry
    c.session_id = sid
    for p in ports:
        c.replicas.add(egress_port=p)
    return u


def read_groups(stub):
    got = read(stub, lambda e: e.packet_replication_engine_entry.multicast_group_entry.SetInParent())
    return {x.packet_replication_engine_entry.multicast_group_entry.multicast_group_id:
            sorted((r.egress_port, r.instance) for r in x.packet_replication_engine_entry.multicast_group_entry.replicas) for x in got}


def test_multicast_groups_and_clone_sessions(ctl):
    I, M, D = p4runtime_pb2.Update.INSERT, p4runtime_pb2.Update.MODIFY, p4runtime_pb2.Update.DELETE
    ctl.write(mc(I, 5, [(1, 0), (2, 0), (3, 1)]), mc(I, 6, [(4, 0)]), clone(I, 100, [7]))
    assert read_groups(ctl.stub) == {5: [(1, 0), (2, 0), (3, 1)], 6: [(4, 0)]}
    ctl.write(mc(M, 5, [(9, 2)]), mc(D, 6, []))
    assert read_groups(ctl.stub) == {5: [(9, 2)]}
    sessions = read(ctl.stub, lambda e: e.packet_replication_engine_entry.clone_session_entry.SetInParent())
    assert [(s.packet_replication_engine_entry.clone_session_entry.session_id, s.packet_replication_engine_entry.clone_session_entry.replicas[0].egress_port) for s in sessions] == [(100, 7)]
    with pytest.raises(grpc.RpcError) as e:
        ctl.write(mc(I, 5, [(1, 0)]), mc(M, 77, [(1, 0)]), mc(I, 0, [(1, 0)]), mc(I, 8, [(1, 0), (1, 0)]), clone(I, 101, [1, 2]), clone(D, 102, []))
    codes = [x.canonical_code for x in update_errors(e.value)]
    assert codes == [grpc.StatusCode.ALREADY_EXISTS.value[0], grpc.StatusCode.NOT_FOUND.value[0], grpc.StatusCode.INVALID_ARGUMENT.value[0],
                     grpc.StatusCode.INVALID_ARGUMENT.value[0], grpc.StatusCode.UNIMPLEMENTED.value[0], grpc.StatusCode.NOT_FOUND.value[0]]
    assert read_groups(ctl.stub) == {5: [(9, 2)]}


def table_update(info, kind, key):
    t = next(x for x in info.tables if x.preamble.name == "I.t")
    a = next(x for x in info.actions if x.preamble.name == "I.hit")
    u = p4runtime_pb2.Update(type=kind)
    e = u.entity.table_entry
    e.table_id = t.preamble.id
    e.match.add(field_id=1).exact.value = bytes([key])
    e.action.action.action_id = a.preamble.id
    return u


def test_direct_counters_and_value_sets(ctl, compiled):
    info = compiled[1]
    tid = next(x.preamble.id for x in info.tables if x.preamble.name == "I.t")
    ctl.write(table_update(info, p4runtime_pb2.Update.INSERT, 3), table_update(info, p4runtime_pb2.Update.INSERT, 4))
    u = p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY)
    u.entity.direct_counter_entry.table_entry.table_id = tid
    u.entity.direct_counter_entry.table_entry.match.add(field_id=1).exact.value = b"\x04"
    u.entity.direct_counter_entry.data.packet_count = 11
    u.entity.direct_counter_entry.data.byte_count = 1100
    ctl.write(u)
    got = read(ctl.stub, lambda e: setattr(e.direct_counter_entry.table_entry, "table_id", tid))
    counts = {x.direct_counter_entry.table_entry.match[0].exact.value: x.direct_counter_entry.data.packet_count for x in got}
    assert counts == {b"\x03": 0, b"\x04": 11}
    missing = p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY)
    missing.entity.direct_counter_entry.table_entry.table_id = tid
    missing.entity.direct_counter_entry.table_entry.match.add(field_id=1).exact.value = b"\x09"
    with pytest.raises(grpc.RpcError) as e:
        ctl.write(missing)
    assert update_errors(e.value)[0].canonical_code == grpc.StatusCode.NOT_FOUND.value[0]

    vs = info.value_sets[0].preamble.id
    v = p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY)
    v.entity.value_set_entry.value_set_id = vs
    v.entity.value_set_entry.members.add().match.add(field_id=1).exact.value = b"\x07"
    t = v.entity.value_set_entry.members.add().match.add(field_id=1).ternary
    t.value, t.mask = b"\x10", b"\xf0"
    ctl.write(v)
    got = read(ctl.stub, lambda e: setattr(e.value_set_entry, "value_set_id", vs))
    # members read back as written: an exact match, then a ternary one
    ms = got[0].value_set_entry.members
    assert [m.match[0].WhichOneof("field_match_type") for m in ms] == ["exact", "ternary"]
    assert (ms[0].match[0].exact.value, ms[1].match[0].ternary.value, ms[1].match[0].ternary.mask) == (b"\x07", b"\x10", b"\xf0")
    too_many = p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY)
    too_many.entity.value_set_entry.value_set_id = vs
    for i in range(5):
        too_many.entity.value_set_entry.members.add().match.add(field_id=1).exact.value = bytes([i + 1])
    with pytest.raises(grpc.RpcError) as e:
        ctl.write(too_many)
    assert "at most 4" in update_errors(e.value)[0].message


def pipeline_request(ctl, compiled, action):
    out, info = compiled
    req = p4runtime_pb2.SetForwardingPipelineConfigRequest(device_id=1, action=action)
    req.election_id.low = ctl.election_id
    if action != p4runtime_pb2.SetForwardingPipelineConfigRequest.COMMIT:
        req.config.p4info.CopyFrom(info)
        req.config.p4_device_config = (out / "program.json").read_bytes()
    ctl.stub.SetForwardingPipelineConfig(req)


def test_reconcile_keeps_state_and_save_then_commit(ctl, compiled):
    R = p4runtime_pb2.SetForwardingPipelineConfigRequest
    info = compiled[1]
    tid = next(x.preamble.id for x in info.tables if x.preamble.name == "I.t")
    regs = ids(info, "registers")
    ctl.write(table_update(info, p4runtime_pb2.Update.INSERT, 5))
    r = p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY)
    r.entity.register_entry.register_id = regs["I.regs"]
    r.entity.register_entry.index.index = 1
    r.entity.register_entry.data.bitstring = b"\x2a"
    ctl.write(r, mc(p4runtime_pb2.Update.INSERT, 9, [(3, 0)]))

    def state():
        entries = read(ctl.stub, lambda e: setattr(e.table_entry, "table_id", tid))
        reg = read(ctl.stub, lambda e: (setattr(e.register_entry, "register_id", regs["I.regs"]), e.register_entry.index.__setattr__("index", 1)))
        return len(entries), reg[0].register_entry.data.bitstring, sorted(read_groups(ctl.stub))

    assert state() == (1, b"\x2a", [9])
    pipeline_request(ctl, compiled, R.RECONCILE_AND_COMMIT)
    assert state() == (1, b"\x2a", [9])
    pipeline_request(ctl, compiled, R.VERIFY_AND_SAVE)
    assert state() == (1, b"\x2a", [9]), "saving does not change the running pipeline"
    pipeline_request(ctl, compiled, R.COMMIT)
    assert state() == (0, b"\x00", [])
    with pytest.raises(grpc.RpcError) as e:
        pipeline_request(ctl, compiled, R.COMMIT)
    assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
