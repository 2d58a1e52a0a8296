"""Action profiles and selectors, direct meters and digest de-duplication over P4Runtime, with the official
stubs against a `p4sec switch` without ports: frames enter the pipeline as PacketOut on the CPU port and come
back as PacketIn with a `result` header (tests/switch/programs/profiles.p4) telling which actions ran."""
import queue
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
NOT_FOUND = grpc.StatusCode.NOT_FOUND.value[0]
ALREADY_EXISTS = grpc.StatusCode.ALREADY_EXISTS.value[0]
FAILED_PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION.value[0]
RESOURCE_EXHAUSTED = grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
UNIMPLEMENTED = grpc.StatusCode.UNIMPLEMENTED.value[0]

DST = bytes.fromhex("0a0000000001")  # the selector and profile tables match this destination
DST2 = bytes.fromhex("0a0000000002")
ETH_TYPE = 0x88B5


@pytest.fixture(scope="module")
def compiled(p4sec_bin, tmp_path_factory):
    out = tmp_path_factory.mktemp("profiles")
    subprocess.run([str(p4sec_bin), "compile", str(ROOT / "tests" / "switch" / "programs" / "profiles.p4"), "-o", str(out)], check=True)
    info = p4info_pb2.P4Info()
    text_format.Parse((out / "p4info.txtpb").read_text(), info)
    return out, info


@pytest.fixture
def sw(p4sec_bin, compiled):
    """A switch with the pipeline pushed by the primary controller: (stub, stream, ids)."""
    port = free_port()
    proc = subprocess.Popen([str(p4sec_bin), "switch", "--grpc", f"127.0.0.1:{port}", "--cpu-port", str(CPU)], stderr=subprocess.PIPE)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    grpc.channel_ready_future(channel).result(timeout=20)
    stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
    s = Stream(stub, ELECTION)
    assert s.next("arbitration").status.code == OK
    push(stub, compiled, ELECTION)
    yield stub, s, Ids(compiled[1])
    s.close()
    channel.close()
    proc.terminate()
    proc.wait(timeout=10)


class Ids:
    def __init__(self, info):
        by_alias = lambda xs: {x.preamble.alias: x for x in xs}  # noqa: E731
        self.tables = by_alias(info.tables)
        self.actions = by_alias(info.actions)
        self.profiles = by_alias(info.action_profiles)
        self.sel = self.profiles["ecmp"].preamble.id
        self.prof = self.profiles["prof"].preamble.id
        self.digest = info.digests[0].preamble.id
        self.meta = meta_ids(info)

    def action(self, name, tag=None):
        a = self.actions[name]
        msg = p4runtime_pb2.Action(action_id=a.preamble.id)
        if tag is not None:
            msg.params.add(param_id=a.params[0].id, value=bytes([tag]))
        return msg


def member(ids, kind, profile, mid, action=None):
    u = U(type=kind)
    m = u.entity.action_profile_member
    m.action_profile_id, m.member_id = profile, mid
    if action is not None:
        m.action.CopyFrom(action)
    return u


def group(ids, kind, profile, gid, members=(), max_size=0):
    u = U(type=kind)
    g = u.entity.action_profile_group
    g.action_profile_id, g.group_id, g.max_size = profile, gid, max_size
    for mid, weight in members:
        g.members.add(member_id=mid, weight=weight)
    return u


def entry(ids, kind, table, key, member_id=None, group_id=None, action=None, action_set=None, meter=None):
    u = U(type=kind)
    e = u.entity.table_entry
    t = ids.tables[table]
    e.table_id = t.preamble.id
    e.match.add(field_id=t.match_fields[0].id).exact.value = key
    if member_id is not None:
        e.action.action_profile_member_id = member_id
    if group_id is not None:
        e.action.action_profile_group_id = group_id
    if action is not None:
        e.action.action.CopyFrom(action)
    for a, w in action_set or ():
        e.action.action_profile_action_set.action_profile_actions.add(action=a, weight=w)
    if meter is not None:
        e.meter_config.CopyFrom(meter)
    return u


def push(stub, compiled, election_id, action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT):
    out, info = compiled
    req = p4runtime_pb2.SetForwardingPipelineConfigRequest(device_id=1, action=action)
    req.election_id.low = election_id
    req.config.p4info.CopyFrom(info)
    req.config.p4_device_config = (out / "program.json").read_bytes()
    stub.SetForwardingPipelineConfig(req)


def write(stub, *updates):
    req = p4runtime_pb2.WriteRequest(device_id=1, updates=updates)
    req.election_id.low = ELECTION
    return stub.Write(req)


def codes(stub, *updates):
    """The canonical code of each update of one Write."""
    try:
        write(stub, *updates)
        return [OK] * len(updates)
    except grpc.RpcError as e:
        return [x.canonical_code for x in update_errors(e)]


def read(stub, fill):
    req = p4runtime_pb2.ReadRequest(device_id=1)
    fill(req.entities.add())
    return [e for r in stub.Read(req) for e in r.entities]


def send(s, ids, dst, src, eth_type=ETH_TYPE):
    """One frame through the pipeline: (selector tag, profile tag, meter color) from its result header."""
    frame = dst + src + eth_type.to_bytes(2, "big") + bytes(3) + bytes(40)
    s.packet_out(frame, [(ids.meta["packet_out"]["egress_port"], b"\x01"), (ids.meta["packet_out"]["pad"], b"\x00")])
    pin = s.next("packet")
    assert pin.payload[:14] == frame[:14]
    return tuple(pin.payload[14:17])


def src(i):
    return bytes.fromhex("02000000") + i.to_bytes(2, "big")


def test_members_groups_and_entries_round_trip(sw, compiled):
    stub, s, ids = sw
    write(stub, *[member(ids, U.INSERT, ids.sel, m, ids.action("set_sel", m)) for m in (1, 2, 3)], member(ids, U.INSERT, ids.prof, 1, ids.action("set_prof", 40)))
    write(stub, group(ids, U.INSERT, ids.sel, 10, [(1, 1), (2, 3)], max_size=8), group(ids, U.INSERT, ids.sel, 11, [(3, 2)]))
    req = p4runtime_pb2.WriteRequest(device_id=1, atomicity=p4runtime_pb2.WriteRequest.DATAPLANE_ATOMIC)
    req.election_id.low = ELECTION
    req.updates.extend([
        entry(ids, U.INSERT, "sel_t", DST, group_id=10),
        entry(ids, U.INSERT, "sel_t", DST2, member_id=3),
        entry(ids, U.INSERT, "prof_t", DST, member_id=1),
    ])
    stub.Write(req)

    def members(profile=0, mid=0):
        got = read(stub, lambda e: (setattr(e.action_profile_member, "action_profile_id", profile), setattr(e.action_profile_member, "member_id", mid)))
        return [(x.action_profile_member.action_profile_id, x.action_profile_member.member_id, x.action_profile_member.action.params[0].value[0]) for x in got]

    assert sorted(members()) == sorted([(ids.sel, 1, 1), (ids.sel, 2, 2), (ids.sel, 3, 3), (ids.prof, 1, 40)])
    assert members(ids.prof) == [(ids.prof, 1, 40)]
    assert members(ids.sel, 2) == [(ids.sel, 2, 2)]
    a = read(stub, lambda e: setattr(e.action_profile_member, "action_profile_id", ids.sel))[0].action_profile_member.action
    assert a.action_id == ids.actions["set_sel"].preamble.id

    def groups(gid=0):
        got = read(stub, lambda e: (setattr(e.action_profile_group, "action_profile_id", ids.sel), setattr(e.action_profile_group, "group_id", gid)))
        return [(x.action_profile_group.group_id, [(m.member_id, m.weight) for m in x.action_profile_group.members], x.action_profile_group.max_size) for x in got]

    assert groups() == [(10, [(1, 1), (2, 3)], 8), (11, [(3, 2)], 0)]
    assert groups(11) == [(11, [(3, 2)], 0)]
    # MODIFY: a member's action and a group's members
    write(stub, member(ids, U.MODIFY, ids.sel, 2, ids.action("set_sel", 22)), group(ids, U.MODIFY, ids.sel, 10, [(2, 1), (3, 1)], max_size=8))
    assert (ids.sel, 2, 22) in members()
    assert groups(10) == [(10, [(2, 1), (3, 1)], 8)]
    # table entries read back with their member or group id
    got = {}
    for x in read(stub, lambda e: setattr(e.table_entry, "table_id", 0)):
        te = x.table_entry
        got[(te.table_id, te.match[0].exact.value)] = (te.action.WhichOneof("type"), getattr(te.action, te.action.WhichOneof("type")))
    assert got == {
        (ids.tables["sel_t"].preamble.id, DST): ("action_profile_group_id", 10),
        (ids.tables["sel_t"].preamble.id, DST2): ("action_profile_member_id", 3),
        (ids.tables["prof_t"].preamble.id, DST): ("action_profile_member_id", 1),
    }
    # an entry can move from a group to a member
    write(stub, entry(ids, U.MODIFY, "sel_t", DST, member_id=1))
    te = read(stub, lambda e: setattr(e.table_entry, "table_id", ids.tables["sel_t"].preamble.id))
    assert sorted(x.table_entry.action.action_profile_member_id for x in te) == [1, 3]
    # RECONCILE_AND_COMMIT of the same program keeps members, groups and the entries that use them
    before = (sorted(members()), groups(), sorted(str(x) for x in read(stub, lambda e: setattr(e.table_entry, "table_id", 0))))
    push(stub, compiled, ELECTION, p4runtime_pb2.SetForwardingPipelineConfigRequest.RECONCILE_AND_COMMIT)
    assert (sorted(members()), groups(), sorted(str(x) for x in read(stub, lambda e: setattr(e.table_entry, "table_id", 0)))) == before
    assert send(s, ids, DST, src(1))[:2] == (1, 40)
    # a new pipeline starts without members and groups
    push(stub, compiled, ELECTION)
    assert members() == [] and groups() == []


def test_selector_spreads_flows_and_keeps_each_on_one_member(sw):
    stub, s, ids = sw
    write(stub, *[member(ids, U.INSERT, ids.sel, m, ids.action("set_sel", m)) for m in (1, 2, 3)], member(ids, U.INSERT, ids.prof, 5, ids.action("set_prof", 50)))
    write(stub, group(ids, U.INSERT, ids.sel, 1, [(1, 1), (2, 1), (3, 1)]))
    write(stub, entry(ids, U.INSERT, "sel_t", DST, group_id=1), entry(ids, U.INSERT, "sel_t", DST2, member_id=2), entry(ids, U.INSERT, "prof_t", DST, member_id=5))
    flows = range(24)
    first = {i: send(s, ids, DST, src(i)) for i in flows}
    assert all(r[1] == 50 for r in first.values())  # the profile table's member
    tags = {i: r[0] for i, r in first.items()}
    assert set(tags.values()) <= {1, 2, 3}
    assert len(set(tags.values())) >= 2, tags  # 24 flows over 3 members do not all hash to one
    for i in flows:  # a flow always goes to the same member
        assert send(s, ids, DST, src(i))[0] == tags[i]
    assert {send(s, ids, DST2, src(i))[0] for i in range(6)} == {2}  # an entry naming a member
    assert send(s, ids, bytes(6), src(0)) == (0, 0, 0)  # no entry: both tables miss
    # changing a member's action changes every flow the group sends to it, and only those
    write(stub, member(ids, U.MODIFY, ids.sel, 1, ids.action("set_sel", 9)))
    for i in flows:
        assert send(s, ids, DST, src(i))[0] == (9 if tags[i] == 1 else tags[i])
    # weights: member 2 with weight 15 takes most flows, member 1 with weight 1 few
    write(stub, group(ids, U.MODIFY, ids.sel, 1, [(1, 1), (2, 15)]))
    weighted = [send(s, ids, DST, src(i))[0] for i in flows]
    assert set(weighted) <= {9, 2} and weighted.count(2) > 3 * weighted.count(9), weighted
    write(stub, group(ids, U.MODIFY, ids.sel, 1, [(3, 1)]))
    assert {send(s, ids, DST, src(i))[0] for i in flows} == {3}
    write(stub, group(ids, U.MODIFY, ids.sel, 1, []))  # an empty group: the table misses
    assert send(s, ids, DST, src(0))[0] == 0


def test_one_shot_action_sets(sw):
    stub, s, ids = sw
    aset = [(ids.action("set_sel", 7), 1), (ids.action("set_sel", 8), 2)]
    write(stub, entry(ids, U.INSERT, "sel_t", DST, action_set=aset))
    te = read(stub, lambda e: setattr(e.table_entry, "table_id", ids.tables["sel_t"].preamble.id))[0].table_entry
    acts = te.action.action_profile_action_set.action_profile_actions
    assert [(a.action.params[0].value[0], a.weight) for a in acts] == [(7, 1), (8, 2)]
    tags = {i: send(s, ids, DST, src(i))[0] for i in range(16)}
    assert set(tags.values()) == {7, 8}
    assert all(send(s, ids, DST, src(i))[0] == tags[i] for i in range(16))
    # one-shot sets and members/groups do not mix in one selector
    assert codes(stub, member(ids, U.INSERT, ids.sel, 1, ids.action("set_sel", 1))) == [INVALID_ARGUMENT]
    assert codes(stub, entry(ids, U.INSERT, "sel_t", DST2, action_set=[(ids.action("set_sel", 1), 0)])) == [INVALID_ARGUMENT]  # weight 0
    assert codes(stub, entry(ids, U.INSERT, "prof_t", DST, action_set=aset)) == [INVALID_ARGUMENT]  # no selector
    write(stub, entry(ids, U.DELETE, "sel_t", DST))
    assert codes(stub, member(ids, U.INSERT, ids.sel, 1, ids.action("set_sel", 1))) == [OK]
    assert codes(stub, entry(ids, U.INSERT, "sel_t", DST, action_set=aset)) == [INVALID_ARGUMENT]


def test_profile_errors(sw):
    stub, _, ids = sw
    sel_act = ids.action("set_sel", 1)
    assert codes(stub, member(ids, U.INSERT, ids.sel, 1, sel_act), member(ids, U.INSERT, ids.sel, 2, sel_act)) == [OK, OK]
    assert codes(
        stub,
        member(ids, U.INSERT, ids.sel, 1, sel_act),  # exists
        member(ids, U.MODIFY, ids.sel, 99, sel_act),  # no such member
        member(ids, U.DELETE, ids.sel, 99),
        member(ids, U.INSERT, 12345, 1, sel_act),  # no such profile
        member(ids, U.INSERT, ids.sel, 3),  # no action
        member(ids, U.INSERT, ids.sel, 4, ids.action("set_prof", 1)),  # not an action of sel_t
        member(ids, U.INSERT, ids.sel, 0, sel_act),  # id 0
    ) == [ALREADY_EXISTS, NOT_FOUND, NOT_FOUND, NOT_FOUND, INVALID_ARGUMENT, INVALID_ARGUMENT, INVALID_ARGUMENT]
    # the plain action profile holds 4 members
    prof_act = ids.action("set_prof", 1)
    assert codes(stub, *[member(ids, U.INSERT, ids.prof, m, prof_act) for m in (1, 2, 3, 4, 5)]) == [OK, OK, OK, OK, RESOURCE_EXHAUSTED]
    assert codes(
        stub,
        group(ids, U.INSERT, ids.prof, 1, [(1, 1)]),  # a profile without selector has no groups
        group(ids, U.INSERT, ids.sel, 1, [(7, 1)]),  # no member 7
        group(ids, U.INSERT, ids.sel, 2, [(1, 0)]),  # weight 0
        group(ids, U.INSERT, ids.sel, 3, [(1, 1), (1, 2)]),  # member given twice
        group(ids, U.INSERT, ids.sel, 4, [(1, 2), (2, 2)], max_size=3),  # weights sum to more than max_size
        group(ids, U.INSERT, ids.sel, 5, [(1, 1)], max_size=1000),  # larger than the selector (64)
        group(ids, U.MODIFY, ids.sel, 6, [(1, 1)]),  # no group 6
    ) == [INVALID_ARGUMENT, NOT_FOUND, INVALID_ARGUMENT, INVALID_ARGUMENT, RESOURCE_EXHAUSTED, RESOURCE_EXHAUSTED, NOT_FOUND]
    assert codes(stub, group(ids, U.INSERT, ids.sel, 1, [(1, 1), (2, 1)], max_size=4)) == [OK]
    assert codes(
        stub,
        group(ids, U.INSERT, ids.sel, 1, [(1, 1)], max_size=4),  # exists
        group(ids, U.MODIFY, ids.sel, 1, [(1, 1)], max_size=5),  # max_size cannot change
        group(ids, U.MODIFY, ids.sel, 1, [(1, 5)], max_size=4),  # now beyond max_size
    ) == [ALREADY_EXISTS, INVALID_ARGUMENT, RESOURCE_EXHAUSTED]
    assert codes(
        stub,
        entry(ids, U.INSERT, "sel_t", DST, action=sel_act),  # indirect tables take members or groups
        entry(ids, U.INSERT, "meter_t", (ETH_TYPE).to_bytes(2, "big"), member_id=1),  # a direct table
        entry(ids, U.INSERT, "prof_t", DST, group_id=1),  # no selector, no groups
        entry(ids, U.INSERT, "sel_t", DST, member_id=42),  # no member 42
        entry(ids, U.INSERT, "sel_t", DST2, group_id=42),  # no group 42
    ) == [INVALID_ARGUMENT, INVALID_ARGUMENT, INVALID_ARGUMENT, NOT_FOUND, NOT_FOUND]
    write(stub, entry(ids, U.INSERT, "sel_t", DST, group_id=1), entry(ids, U.INSERT, "sel_t", DST2, member_id=2), entry(ids, U.INSERT, "prof_t", DST, member_id=3))
    assert codes(
        stub,
        member(ids, U.DELETE, ids.sel, 1),  # in group 1
        member(ids, U.DELETE, ids.prof, 3),  # used by an entry of prof_t
        group(ids, U.DELETE, ids.sel, 1),  # used by an entry of sel_t
    ) == [FAILED_PRECONDITION, FAILED_PRECONDITION, FAILED_PRECONDITION]
    assert codes(stub, group(ids, U.MODIFY, ids.sel, 1, [(2, 1)], max_size=4), member(ids, U.DELETE, ids.sel, 1)) == [OK, OK]
    assert codes(stub, member(ids, U.DELETE, ids.sel, 2)) == [FAILED_PRECONDITION]  # group 1 and the DST2 entry
    # take it all down in dependency order
    write(stub, entry(ids, U.DELETE, "sel_t", DST), entry(ids, U.DELETE, "sel_t", DST2), entry(ids, U.DELETE, "prof_t", DST))
    write(stub, group(ids, U.DELETE, ids.sel, 1))
    write(stub, member(ids, U.DELETE, ids.sel, 2), *[member(ids, U.DELETE, ids.prof, m) for m in (1, 2, 3, 4)])
    assert read(stub, lambda e: e.action_profile_member.SetInParent()) == []
    assert read(stub, lambda e: e.action_profile_group.SetInParent()) == []
    with pytest.raises(grpc.RpcError) as err:
        read(stub, lambda e: setattr(e.action_profile_member, "action_profile_id", 12345))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND


def direct_meter(ids, key, cfg=None, kind=U.MODIFY):
    u = U(type=kind)
    d = u.entity.direct_meter_entry
    d.table_entry.table_id = ids.tables["meter_t"].preamble.id
    d.table_entry.match.add(field_id=1).exact.value = key
    if cfg is not None:
        d.config.CopyFrom(cfg)
    return u


def test_direct_meters(sw):
    stub, s, ids = sw
    key = ETH_TYPE.to_bytes(2, "big")
    write(stub, entry(ids, U.INSERT, "meter_t", key, action=ids.action("metered")))

    def configs():
        return [(x.direct_meter_entry.table_entry.match[0].exact.value, x.direct_meter_entry.HasField("config") and x.direct_meter_entry.config) for x in read(stub, lambda e: e.direct_meter_entry.SetInParent())]

    assert configs() == [(key, False)]  # unconfigured: every packet green
    assert {send(s, ids, DST, src(1))[2] for _ in range(5)} == {0}
    slow = p4runtime_pb2.MeterConfig(cir=1, cburst=1, pir=1, pburst=1)
    write(stub, direct_meter(ids, key, slow))
    assert configs() == [(key, slow)]
    colors = [send(s, ids, DST, src(1))[2] for _ in range(6)]
    assert colors[0] == 0 and 2 in colors, colors  # one packet of burst, then red
    # the entry's own read carries the config when asked for
    te = read(stub, lambda e: (setattr(e.table_entry, "table_id", ids.tables["meter_t"].preamble.id), e.table_entry.meter_config.SetInParent()))[0].table_entry
    assert te.meter_config == slow
    write(stub, direct_meter(ids, key))  # no config: back to green
    assert configs() == [(key, False)]
    assert {send(s, ids, DST, src(1))[2] for _ in range(5)} == {0}
    # a table entry can carry its meter's configuration; a MODIFY without one resets it
    key2 = (ETH_TYPE + 1).to_bytes(2, "big")
    write(stub, entry(ids, U.INSERT, "meter_t", key2, action=ids.action("metered"), meter=slow))
    assert sorted(configs(), key=lambda x: x[0]) == [(key, False), (key2, slow)]
    write(stub, entry(ids, U.MODIFY, "meter_t", key2, action=ids.action("metered")))
    assert sorted(configs(), key=lambda x: x[0]) == [(key, False), (key2, False)]
    bad = p4runtime_pb2.MeterConfig(cir=10, cburst=1, pir=5, pburst=1)
    assert codes(
        stub,
        direct_meter(ids, key, slow, kind=U.INSERT),  # direct meters are only modified
        direct_meter(ids, b"\x12\x34", slow),  # no such entry
        direct_meter(ids, key, bad),  # peak rate below committed rate
        entry(ids, U.INSERT, "prof_t", DST2, member_id=1, meter=slow),  # prof_t has no direct meter
    ) == [INVALID_ARGUMENT, NOT_FOUND, INVALID_ARGUMENT, INVALID_ARGUMENT]
    u = direct_meter(ids, key, slow)
    u.entity.direct_meter_entry.table_entry.table_id = ids.tables["prof_t"].preamble.id
    assert codes(stub, u) == [INVALID_ARGUMENT]  # a table without direct meter


def enable_digests(stub, ids, ack_timeout_ns, kind=U.INSERT):
    u = U(type=kind)
    d = u.entity.digest_entry
    d.digest_id = ids.digest
    d.config.max_list_size = 1
    d.config.ack_timeout_ns = ack_timeout_ns
    write(stub, u)


def digest_srcs(s):
    d = s.next("digest")
    return d.list_id, [int.from_bytes(item.struct.members[0].bitstring, "big") for item in d.data]


def no_digest(s):
    with pytest.raises(queue.Empty):
        s.next("digest", timeout=1)
    return True


def ack(s, ids, list_id):
    req = p4runtime_pb2.StreamMessageRequest()
    req.digest_ack.digest_id, req.digest_ack.list_id = ids.digest, list_id
    s.out.put(req)


def test_digest_data_is_not_sent_again_until_acknowledged(sw):
    stub, s, ids = sw
    enable_digests(stub, ids, ack_timeout_ns=60 * 10**9)
    a, b = src(0xA), src(0xB)
    send(s, ids, DST, a)
    list_a, got = digest_srcs(s)
    assert got == [int.from_bytes(a, "big")]
    send(s, ids, DST, a)  # the same data while its list waits for an ack: nothing
    assert no_digest(s)
    send(s, ids, DST, b)  # other data still goes out
    list_b, got = digest_srcs(s)
    assert got == [int.from_bytes(b, "big")] and list_b != list_a
    ack(s, ids, list_a)
    time.sleep(0.2)  # the ack travels on the stream, the packet on another path
    send(s, ids, DST, a)  # acknowledged: sent again
    assert digest_srcs(s)[1] == [int.from_bytes(a, "big")]
    send(s, ids, DST, b)  # b's list was never acknowledged
    assert no_digest(s)


def test_digest_cache_expires_after_ack_timeout(sw):
    stub, s, ids = sw
    enable_digests(stub, ids, ack_timeout_ns=500 * 10**6)
    c = src(0xC)
    send(s, ids, DST, c)
    assert digest_srcs(s)[1] == [int.from_bytes(c, "big")]
    send(s, ids, DST, c)
    assert no_digest(s)  # waits 1 s: by now the list is older than ack_timeout_ns
    send(s, ids, DST, c)
    assert digest_srcs(s)[1] == [int.from_bytes(c, "big")]
    # ack_timeout_ns 0: no cache, every message is sent
    enable_digests(stub, ids, ack_timeout_ns=0, kind=U.MODIFY)
    for _ in range(3):
        send(s, ids, DST, c)
        assert digest_srcs(s)[1] == [int.from_bytes(c, "big")]
