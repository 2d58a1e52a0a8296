"""P4Runtime 1.4 features with the official stubs against a `p4sec switch` without ports (frames enter as
PacketOut on the CPU port and come back as PacketIn with a `result` header, tests/switch/programs/runtime14.p4):
value sets of struct and tuple types against multi-key selects, per-colour meter counters, idle timeouts; and
the log of P4Runtime connections."""
import subprocess
import time

import p4sec  # noqa: F401
import grpc
import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from conftest import ROOT
from test_p4runtime import free_port, update_errors
from test_packet_io import Stream, meta_ids

CPU = 255
ELECTION = 7
U = p4runtime_pb2.Update
OK = grpc.StatusCode.OK.value[0]
INVALID_ARGUMENT = grpc.StatusCode.INVALID_ARGUMENT.value[0]
RESOURCE_EXHAUSTED = grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
MT = p4info_pb2.MatchField
DST = bytes.fromhex("0a0000000001")
DST2 = bytes.fromhex("0a0000000002")
ETH_TYPE = 0x88B5


@pytest.fixture(scope="module")
def compiled(p4sec_bin, tmp_path_factory):
    out = tmp_path_factory.mktemp("rt14")
    subprocess.run([str(p4sec_bin), "compile", str(ROOT / "tests" / "switch" / "programs" / "runtime14.p4"), "-o", str(out)], check=True)
    info = p4info_pb2.P4Info()
    text_format.Parse((out / "p4info.txtpb").read_text(), info)
    return out, info


def push(stub, compiled, election_id=ELECTION):
    out, info = compiled
    req = p4runtime_pb2.SetForwardingPipelineConfigRequest(device_id=1, action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
    req.election_id.low = election_id
    req.config.p4info.CopyFrom(info)
    req.config.p4_device_config = (out / "program.json").read_bytes()
    stub.SetForwardingPipelineConfig(req)


class Ids:
    def __init__(self, info):
        by_name = lambda xs: {x.preamble.name.split(".")[-1]: x for x in xs}  # noqa: E731
        self.tables = by_name(info.tables)
        self.actions = by_name(info.actions)
        self.vs = by_name(info.value_sets)
        self.meter = info.meters[0].preamble.id
        self.meta = meta_ids(info)


@pytest.fixture
def sw(p4sec_bin, compiled):
    port = free_port()
    proc = subprocess.Popen([str(p4sec_bin), "switch", "--grpc", f"127.0.0.1:{port}", "--cpu-port", str(CPU)], stderr=subprocess.DEVNULL)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    grpc.channel_ready_future(channel).result(timeout=20)
    stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
    s = Stream(stub, ELECTION)
    assert s.next("arbitration").status.code == OK
    push(stub, compiled)
    yield stub, s, Ids(compiled[1])
    s.close()
    channel.close()
    proc.terminate()
    proc.wait(timeout=10)


def write(stub, *updates):
    req = p4runtime_pb2.WriteRequest(device_id=1, updates=updates)
    req.election_id.low = ELECTION
    return stub.Write(req)


def codes(stub, *updates):
    try:
        write(stub, *updates)
        return [OK] * len(updates)
    except grpc.RpcError as e:
        return [x.canonical_code for x in update_errors(e)]


def errors(stub, *updates):
    with pytest.raises(grpc.RpcError) as e:
        write(stub, *updates)
    return [(x.canonical_code, x.message) for x in update_errors(e.value)]


def read(stub, fill):
    req = p4runtime_pb2.ReadRequest(device_id=1)
    fill(req.entities.add())
    return [e for r in stub.Read(req) for e in r.entities]


def send(s, ids, proto=0, port=0, dst=DST, eth_type=ETH_TYPE, pad=40):
    """One frame through the pipeline: its result header as a dict."""
    frame = dst + bytes.fromhex("020000000001") + eth_type.to_bytes(2, "big") + bytes([proto]) + port.to_bytes(2, "big") + bytes(4) + bytes(pad)
    s.packet_out(frame, [(ids.meta["packet_out"]["egress_port"], b"\x01"), (ids.meta["packet_out"]["pad"], b"\x00")])
    pin = s.next("packet")
    assert pin.payload[:17] == frame[:17]
    r = pin.payload[17:21]
    # len: the packet's length as the pipeline counts it (with the 2-byte packet_out header it entered with)
    return {"vs": r[0], "color": r[1], "dcolor": r[2], "idle": r[3], "len": len(frame) + 2}


# ---------------------------------------------------------------- value sets


def vs_update(ids, name, members):
    """A MODIFY of value set `name`; members: lists of (field id, kind, value(s))."""
    u = U(type=U.MODIFY)
    v = u.entity.value_set_entry
    v.value_set_id = ids.vs[name].preamble.id
    for fields in members:
        m = v.members.add()
        for fid, kind, val in fields:
            f = m.match.add(field_id=fid)
            if kind == "exact":
                f.exact.value = val
            elif kind == "ternary":
                f.ternary.value, f.ternary.mask = val
            elif kind == "lpm":
                f.lpm.value, f.lpm.prefix_len = val
            elif kind == "range":
                f.range.low, f.range.high = val
    return u


def read_vs(stub, ids, name):
    got = read(stub, lambda e: setattr(e.value_set_entry, "value_set_id", ids.vs[name].preamble.id))
    assert len(got) == 1
    out = []
    for m in got[0].value_set_entry.members:
        fields = []
        for f in m.match:
            kind = f.WhichOneof("field_match_type")
            x = getattr(f, kind)
            val = {"exact": lambda: x.value, "ternary": lambda: (x.value, x.mask), "lpm": lambda: (x.value, x.prefix_len)}[kind]()
            fields.append((f.field_id, kind, val))
        out.append(fields)
    return out


def test_value_set_p4info_lists_one_match_field_per_element(compiled):
    info = compiled[1]
    vs = {v.preamble.name.split(".")[-1]: v for v in info.value_sets}
    fields = lambda v: [(m.id, m.name, m.bitwidth, m.match_type) for m in v.match]  # noqa: E731
    # as p4c: struct fields by name with their @match kind (exact by default), ids from 1 in field order
    assert fields(vs["pvs"]) == [(1, "proto", 8, MT.TERNARY), (2, "port", 16, MT.EXACT)]
    assert vs["pvs"].size == 4
    assert fields(vs["lvs"]) == [(1, "port", 16, MT.LPM)]
    # tuples (which p4c's P4Runtime serializer does not take) have unnamed exact elements
    assert fields(vs["tvs"]) == [(1, "", 8, MT.EXACT), (2, "", 16, MT.EXACT)]
    assert vs["tvs"].size == 2


def test_struct_and_tuple_value_sets_match_multi_key_selects(sw):
    stub, s, ids = sw
    assert send(s, ids, 0x11, 80)["vs"] == 0  # nothing installed yet
    write(
        stub,
        vs_update(ids, "pvs", [[(1, "ternary", (b"\x10", b"\xf0")), (2, "exact", b"\x00\x50")], [(2, "exact", b"\x00\x16")]]),
        vs_update(ids, "tvs", [[(1, "exact", b"\x06"), (2, "exact", b"\x01\xbb")]]),
        vs_update(ids, "lvs", [[(1, "lpm", (b"\x1f\x00", 8))]]),
    )
    assert send(s, ids, 0x11, 80)["vs"] == 1  # proto matches 0x10/0xf0, port 80
    assert send(s, ids, 0x1F, 80)["vs"] == 1
    assert send(s, ids, 0x21, 80)["vs"] == 0  # proto outside the mask: no member
    assert send(s, ids, 0x11, 81)["vs"] == 0  # port not 80
    assert send(s, ids, 0x99, 22)["vs"] == 1  # second member: proto left out (don't care), port 22
    assert send(s, ids, 6, 443)["vs"] == 2  # the tuple set
    assert send(s, ids, 7, 443)["vs"] == 0
    assert send(s, ids, 6, 0x1F45)["vs"] == 3  # not in pvs/tvs; the LPM set takes 0x1f00/8
    assert send(s, ids, 6, 0x2045)["vs"] == 0
    # members read back as written (the left-out ternary field is absent)
    assert read_vs(stub, ids, "pvs") == [[(1, "ternary", (b"\x10", b"\xf0")), (2, "exact", b"\x50")], [(2, "exact", b"\x16")]]
    assert read_vs(stub, ids, "tvs") == [[(1, "exact", b"\x06"), (2, "exact", b"\x01\xbb")]]
    assert read_vs(stub, ids, "lvs") == [[(1, "lpm", (b"\x1f\x00", 8))]]
    # MODIFY replaces the members
    write(stub, vs_update(ids, "tvs", [[(1, "exact", b"\x07"), (2, "exact", b"\x01\xbb")]]))
    assert send(s, ids, 6, 443)["vs"] == 0
    assert send(s, ids, 7, 443)["vs"] == 2


def test_value_set_errors(sw):
    stub, s, ids = sw
    good = [(1, "exact", b"\x06"), (2, "exact", b"\x01\xbb")]
    write(stub, vs_update(ids, "tvs", [good]))
    # too wide: OUT_OF_RANGE, as the specification has it
    [(code, msg)] = errors(stub, vs_update(ids, "tvs", [[(1, "exact", b"\x06"), (2, "exact", b"\x01\x00\x00")]]))
    assert code == grpc.StatusCode.OUT_OF_RANGE.value[0] and "17 significant bits, the field has 16" in msg, msg
    cases = [
        ([[(1, "exact", b"\x06")]], "exact field 2 is missing"),
        ([good + [(3, "exact", b"\x01")]], "no match field id 3"),
        ([good + [(2, "exact", b"\x01")]], "given twice"),
        ([[(1, "lpm", (b"\x06", 8)), (2, "exact", b"\x01")]], "is matched as exact"),
    ]
    for members, message in cases:
        [(code, msg)] = errors(stub, vs_update(ids, "tvs", members))
        assert code == INVALID_ARGUMENT and message in msg, (members, msg)
    [(code, msg)] = errors(stub, vs_update(ids, "pvs", [[(1, "exact", b"\x01"), (2, "exact", b"\x02")]]))
    assert code == INVALID_ARGUMENT and "`proto`" in msg and "matched as ternary" in msg
    [(code, msg)] = errors(stub, vs_update(ids, "pvs", [[(1, "ternary", (b"\x11", b"\xf0")), (2, "exact", b"\x02")]]))
    assert code == INVALID_ARGUMENT and "outside the mask" in msg
    [(code, msg)] = errors(stub, vs_update(ids, "lvs", [[(1, "lpm", (b"\x1f\x00", 17))]]))
    assert code == INVALID_ARGUMENT and "prefix length 17" in msg
    [(code, msg)] = errors(stub, vs_update(ids, "tvs", [good] * 3))
    assert code == RESOURCE_EXHAUSTED and "at most 2" in msg
    # nothing changed by the failed writes
    assert read_vs(stub, ids, "tvs") == [good]
    assert send(s, ids, 6, 443)["vs"] == 2


def test_value_set_compile_errors(p4sec_bin, tmp_path):
    src = (ROOT / "tests" / "switch" / "programs" / "runtime14.p4").read_text()
    bad = {
        "one key": src.replace("state low { transition select(hdr.tag.port) { lvs:", "state low { transition select(hdr.tag.port) { pvs:"),
        "widths": src.replace("value_set<tuple<bit<8>, bit<16>>>(2) tvs;", "value_set<tuple<bit<8>, bit<8>>>(2) tvs;"),
    }
    expect = {"one key": "value set `pvs` has 2 elements", "widths": "element 2 has 8 bits, select key 2 has 16"}
    for name, text in bad.items():
        f = tmp_path / "bad.p4"
        f.write_text(text)
        r = subprocess.run([str(p4sec_bin), "compile", str(f), "-o", str(tmp_path / "out")], capture_output=True, text=True)
        assert r.returncode != 0 and expect[name] in r.stderr, (name, r.stderr)


# ---------------------------------------------------------------- per-colour meter counters


def colour_counts(cd):
    return [(c.packet_count, c.byte_count) for c in (cd.green, cd.yellow, cd.red)]


def read_meter(stub, ids, index=0):
    got = read(stub, lambda e: (setattr(e.meter_entry, "meter_id", ids.meter), e.meter_entry.index.SetInParent(), setattr(e.meter_entry.index, "index", index)))
    assert len(got) == 1
    return got[0].meter_entry


def test_indexed_meter_counts_packets_per_colour(sw):
    stub, s, ids = sw
    n = [send(s, ids, pad=p)["len"] for p in (40, 50, 60)]
    m = read_meter(stub, ids)
    assert m.HasField("counter_data")
    # an unconfigured meter marks everything green
    assert colour_counts(m.counter_data) == [(3, sum(n)), (0, 0), (0, 0)]
    assert colour_counts(read_meter(stub, ids, 1).counter_data) == [(0, 0)] * 3
    u = U(type=U.MODIFY)
    u.entity.meter_entry.meter_id = ids.meter
    u.entity.meter_entry.index.index = 0
    c = u.entity.meter_entry.config
    c.cir, c.cburst, c.pir, c.pburst = 1, 1, 1, 2
    write(stub, u)
    got = [send(s, ids, pad=40) for _ in range(4)]
    colours = [r["color"] for r in got]
    assert colours[:2] == [0, 1] and 2 in colours[2:], colours  # green, yellow, then red
    want = [(3 + colours.count(0), sum(n) + got[0]["len"] * colours.count(0)), (colours.count(1), got[0]["len"] * colours.count(1)), (colours.count(2), got[0]["len"] * colours.count(2))]
    m = read_meter(stub, ids)
    assert colour_counts(m.counter_data) == want
    # writing only the counters keeps the configuration
    u = U(type=U.MODIFY)
    u.entity.meter_entry.meter_id = ids.meter
    u.entity.meter_entry.index.index = 0
    u.entity.meter_entry.counter_data.yellow.packet_count = 9
    u.entity.meter_entry.counter_data.yellow.byte_count = 900
    write(stub, u)
    m = read_meter(stub, ids)
    assert colour_counts(m.counter_data) == [(0, 0), (9, 900), (0, 0)]
    assert (m.config.cir, m.config.pburst) == (1, 2)
    u.entity.meter_entry.counter_data.red.packet_count = -1
    assert codes(stub, u) == [INVALID_ARGUMENT]


def test_direct_meter_counts_packets_per_colour(sw):
    stub, s, ids = sw
    t = ids.tables["meter_t"]
    u = U(type=U.INSERT)
    e = u.entity.table_entry
    e.table_id = t.preamble.id
    e.match.add(field_id=t.match_fields[0].id).exact.value = ETH_TYPE.to_bytes(2, "big")
    e.action.action.action_id = ids.actions["metered"].preamble.id
    write(stub, u)
    lens = [send(s, ids, pad=p)["len"] for p in (40, 41)]

    def direct():
        got = read(stub, lambda x: setattr(x.direct_meter_entry.table_entry, "table_id", t.preamble.id))
        assert len(got) == 1
        return got[0].direct_meter_entry

    d = direct()
    assert not d.HasField("config")  # unconfigured: every packet green, and counted
    assert colour_counts(d.counter_data) == [(2, sum(lens)), (0, 0), (0, 0)]
    # configure: one green, then yellow, then red
    cfg = U(type=U.MODIFY)
    dm = cfg.entity.direct_meter_entry
    dm.table_entry.CopyFrom(e)
    dm.table_entry.ClearField("action")
    dm.config.cir, dm.config.cburst, dm.config.pir, dm.config.pburst = 1, 1, 1, 2
    write(stub, cfg)
    colours = [send(s, ids, pad=40)["dcolor"] for _ in range(3)]
    assert colours[:2] == [0, 1], colours
    d = direct()
    assert (d.config.cir, d.config.pburst) == (1, 2)
    assert [c for c, _ in colour_counts(d.counter_data)] == [2 + colours.count(0), colours.count(1), colours.count(2)]
    # the table entry answers with the same counters when asked for them
    got = read(stub, lambda x: (setattr(x.table_entry, "table_id", t.preamble.id), x.table_entry.meter_counter_data.SetInParent()))
    assert colour_counts(got[0].table_entry.meter_counter_data) == colour_counts(d.counter_data)
    # counters alone are written, the configuration stays
    w = U(type=U.MODIFY)
    w.entity.direct_meter_entry.table_entry.CopyFrom(dm.table_entry)
    w.entity.direct_meter_entry.counter_data.red.packet_count = 4
    w.entity.direct_meter_entry.counter_data.red.byte_count = 400
    write(stub, w)
    d = direct()
    assert colour_counts(d.counter_data) == [(0, 0), (0, 0), (4, 400)]
    assert d.config.pburst == 2


# ---------------------------------------------------------------- idle timeouts


def idle_entry(ids, dst, timeout_ns, kind=U.INSERT):
    t = ids.tables["idle_t"]
    u = U(type=kind)
    e = u.entity.table_entry
    e.table_id = t.preamble.id
    e.match.add(field_id=t.match_fields[0].id).exact.value = dst
    e.action.action.action_id = ids.actions["seen"].preamble.id
    e.idle_timeout_ns = timeout_ns
    return u


def no_notification(s, seconds):
    try:
        n = s.next("idle_timeout_notification", timeout=seconds)
    except Exception:  # queue.Empty
        return True
    raise AssertionError(f"unexpected notification: {n}")


def test_idle_timeouts(sw, compiled):
    stub, s, ids = sw
    info = compiled[1]
    behaviour = {t.preamble.name.split(".")[-1]: t.idle_timeout_behavior for t in info.tables}
    assert behaviour == {"meter_t": p4info_pb2.Table.NO_TIMEOUT, "idle_t": p4info_pb2.Table.NOTIFY_CONTROL}
    # a table without support_timeout takes no idle timeout
    t = ids.tables["meter_t"]
    u = U(type=U.INSERT)
    e = u.entity.table_entry
    e.table_id = t.preamble.id
    e.match.add(field_id=t.match_fields[0].id).exact.value = b"\x08\x00"
    e.action.action.action_id = ids.actions["metered"].preamble.id
    e.idle_timeout_ns = 10**9
    [(code, msg)] = errors(stub, u)
    assert code == INVALID_ARGUMENT and "does not support idle timeouts" in msg
    assert codes(stub, idle_entry(ids, DST, -5)) == [INVALID_ARGUMENT]

    start = time.monotonic()
    write(stub, idle_entry(ids, DST, 400_000_000), idle_entry(ids, DST2, 0))
    n = s.next("idle_timeout_notification", timeout=5)
    waited = time.monotonic() - start
    assert 0.35 <= waited < 1.5, waited
    assert len(n.table_entry) == 1 and n.timestamp > 0
    te = n.table_entry[0]
    assert (te.table_id, te.match[0].exact.value, te.idle_timeout_ns) == (ids.tables["idle_t"].preamble.id, DST, 400_000_000)
    # once per idle period; the entry without a timeout is never reported
    no_notification(s, 1.0)
    got = read(stub, lambda x: (setattr(x.table_entry, "table_id", ids.tables["idle_t"].preamble.id), x.table_entry.time_since_last_hit.SetInParent()))
    by_dst = {x.table_entry.match[0].exact.value: x.table_entry for x in got}
    assert by_dst[DST].idle_timeout_ns == 400_000_000 and by_dst[DST2].idle_timeout_ns == 0
    assert by_dst[DST].time_since_last_hit.elapsed_ns >= 1_300_000_000
    # a hit starts a new period: the time since the last hit is small, and a new notification follows
    assert send(s, ids, dst=DST)["idle"] == 1
    hit = time.monotonic()
    got = read(stub, lambda x: (setattr(x.table_entry, "table_id", ids.tables["idle_t"].preamble.id), x.table_entry.time_since_last_hit.SetInParent()))
    since = {x.table_entry.match[0].exact.value: x.table_entry.time_since_last_hit.elapsed_ns for x in got}
    assert since[DST] < 300_000_000, since
    n = s.next("idle_timeout_notification", timeout=5)
    assert 0.3 <= time.monotonic() - hit < 1.5
    assert [x.match[0].exact.value for x in n.table_entry] == [DST]
    # without time_since_last_hit in the request, it is not answered
    got = read(stub, lambda x: setattr(x.table_entry, "table_id", ids.tables["idle_t"].preamble.id))
    assert not any(x.table_entry.HasField("time_since_last_hit") for x in got)
    # MODIFY to 0: no more notifications
    write(stub, idle_entry(ids, DST, 0, U.MODIFY))
    send(s, ids, dst=DST)
    no_notification(s, 1.0)


# ---------------------------------------------------------------- connection log


def test_connections_are_logged(p4sec_bin, compiled):
    port = free_port()
    proc = subprocess.Popen([str(p4sec_bin), "switch", "--grpc", f"127.0.0.1:{port}", "--cpu-port", str(CPU), "--log", "info"], stderr=subprocess.PIPE, text=True)
    try:
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        grpc.channel_ready_future(channel).result(timeout=20)
        stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
        a = Stream(stub, 5)
        assert a.next("arbitration").status.code == OK
        push(stub, compiled, 5)
        b = Stream(stub, 9)
        assert b.next("arbitration").status.code == OK
        assert a.next("arbitration").status.code == grpc.StatusCode.ALREADY_EXISTS.value[0]
        b.close()
        assert a.next("arbitration").status.code == OK  # primary again
        with pytest.raises(grpc.RpcError):
            push(stub, compiled, 9)  # not the primary: refused, and logged
        a.close()
        time.sleep(0.5)
        channel.close()
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    lines = [x for x in err.splitlines() if "P4Runtime" in x]
    text = "\n".join(lines)

    def find(*parts):
        hits = [x for x in lines if all(p in x for p in parts)]
        assert hits, f"no line with {parts} in:\n{text}"
        return hits[0]

    opened = [x for x in lines if "stream channel opened by 127.0.0.1:" in x]
    assert len(opened) == 2, text
    find("arbitration: device 1, election id 5, role default: primary")
    find("arbitration: device 1, election id 9, role default: primary")
    find("(election id 5) lost primary")
    find("(election id 9) is now the primary controller")
    find("SetForwardingPipelineConfig VERIFY_AND_COMMIT from 127.0.0.1:", "election id 5", "done", "2 tables")
    find("SetForwardingPipelineConfig VERIFY_AND_COMMIT from 127.0.0.1:", "election id 9", "failed", "PermissionDenied")
    find("stream channel of 127.0.0.1:", "closed (device 1, election id 9, was primary)")
    find("(election id 9) lost primary")
    find("stream channel of 127.0.0.1:", "closed (device 1, election id 5, was primary)")
    find("no primary controller")
    # the order of events: 9 took over from 5, then left
    assert text.index("election id 9, role default: primary") < text.index("election id 9, was primary")
