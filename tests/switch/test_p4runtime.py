"""The p4sec switch driven by a standard client: the official `p4runtime` package's gRPC stubs.

Covers pipeline configuration, arbitration (a second controller is refused writes until it wins),
table writes of several match kinds with reads back, precise errors for bad requests, and counters.
"""
import subprocess
import time

import p4sec  # noqa: F401  (sets the protobuf runtime the p4runtime package needs)
import grpc
import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc
from p4sec.infra.netns import free_port

from conftest import ROOT


@pytest.fixture(scope="module")
def compiled(p4sec_bin, tmp_path_factory):
    out = tmp_path_factory.mktemp("gw")
    subprocess.run([str(p4sec_bin), "compile", str(ROOT / "programs" / "ipsec_gateway.p4"), "-o", str(out)], check=True)
    info = p4info_pb2.P4Info()
    text_format.Parse((out / "p4info.txtpb").read_text(), info)
    return out, info


@pytest.fixture
def switch(p4sec_bin):
    port = free_port()
    proc = subprocess.Popen([str(p4sec_bin), "switch", "--grpc", f"127.0.0.1:{port}"], stderr=subprocess.PIPE)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    grpc.channel_ready_future(channel).result(timeout=20)
    yield p4runtime_pb2_grpc.P4RuntimeStub(channel), port
    channel.close()
    proc.terminate()
    proc.wait(timeout=10)


class Controller:
    def __init__(self, stub, election_id):
        self.stub = stub
        self.election_id = election_id
        self.requests = []
        self.stream = stub.StreamChannel(self._gen())

    def _gen(self):
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = 1
        req.arbitration.election_id.low = self.election_id
        yield req
        while True:
            time.sleep(3600)

    def arbitration(self):
        return next(self.stream).arbitration

    def write(self, *updates, atomicity=0):
        req = p4runtime_pb2.WriteRequest(device_id=1, atomicity=atomicity)
        req.election_id.low = self.election_id
        req.updates.extend(updates)
        return self.stub.Write(req)


def ids(info):
    t = {x.preamble.name: x for x in info.tables}
    a = {x.preamble.name: x for x in info.actions}
    return t, a


def push_pipeline(ctl, compiled):
    out, info = compiled
    req = p4runtime_pb2.SetForwardingPipelineConfigRequest(device_id=1, action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
    req.election_id.low = ctl.election_id
    req.config.p4info.CopyFrom(info)
    req.config.p4_device_config = (out / "program.json").read_bytes()
    ctl.stub.SetForwardingPipelineConfig(req)


def lpm_update(info, prefix, plen, port, kind=p4runtime_pb2.Update.INSERT):
    t, a = ids(info)
    table = t["GwIngress.ipv4_lpm"]
    act = a["GwIngress.set_nhop"]
    u = p4runtime_pb2.Update(type=kind)
    e = u.entity.table_entry
    e.table_id = table.preamble.id
    m = e.match.add()
    m.field_id = table.match_fields[0].id
    m.lpm.value = bytes(prefix)
    m.lpm.prefix_len = plen
    e.action.action.action_id = act.preamble.id
    for p, v in zip(act.params, [b"\x02\x00\x00\x00\x00\xaa", b"\x02\x00\x00\x00\x00\x01", bytes([0, port])]):
        e.action.action.params.add(param_id=p.id, value=v)
    return u


def update_errors(rpc_error):
    from google.rpc import status_pb2
    for key, value in rpc_error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            st = status_pb2.Status.FromString(value)
            out = []
            for d in st.details:
                e = p4runtime_pb2.Error()
                d.Unpack(e)
                out.append(e)
            return out
    return []


def read_table(stub, table_id):
    req = p4runtime_pb2.ReadRequest(device_id=1)
    req.entities.add().table_entry.table_id = table_id
    return [e.table_entry for r in stub.Read(req) for e in r.entities]


def test_capabilities(switch):
    stub, _ = switch
    assert stub.Capabilities(p4runtime_pb2.CapabilitiesRequest()).p4runtime_api_version.startswith("1.")


def test_pipeline_writes_reads_and_arbitration(switch, compiled):
    stub, _ = switch
    _, info = compiled
    primary = Controller(stub, 10)
    assert primary.arbitration().status.code == 0
    push_pipeline(primary, compiled)

    # LPM entries: insert, read back, modify, delete
    primary.write(lpm_update(info, [10, 1, 0, 0], 16, 1), lpm_update(info, [10, 2, 0, 0], 16, 2))
    t, _ = ids(info)
    lpm_id = t["GwIngress.ipv4_lpm"].preamble.id
    got = read_table(stub, lpm_id)
    assert sorted(e.match[0].lpm.prefix_len for e in got) == [16, 16]
    assert {e.match[0].lpm.value for e in got} == {bytes([10, 1, 0, 0]), bytes([10, 2, 0, 0])}
    primary.write(lpm_update(info, [10, 1, 0, 0], 16, 7, p4runtime_pb2.Update.MODIFY))
    ports = {e.match[0].lpm.value: e.action.action.params[2].value for e in read_table(stub, lpm_id)}
    assert ports[bytes([10, 1, 0, 0])] == b"\x07"
    primary.write(lpm_update(info, [10, 2, 0, 0], 16, 2, p4runtime_pb2.Update.DELETE))
    assert len(read_table(stub, lpm_id)) == 1

    # ternary SPD entry with a priority
    spd = t["GwIngress.spd"]
    u = p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT)
    e = u.entity.table_entry
    e.table_id = spd.preamble.id
    e.priority = 10
    m = e.match.add(field_id=spd.match_fields[0].id)
    m.ternary.value = bytes([10, 1, 0, 0])
    m.ternary.mask = bytes([255, 255, 0, 0])
    _, a = ids(info)
    e.action.action.action_id = a["GwIngress.protect"].preamble.id
    e.action.action.params.add(param_id=1, value=b"\x00")
    primary.write(u)
    assert read_table(stub, spd.preamble.id)[0].priority == 10

    # a backup controller is refused writes
    backup = Controller(stub, 5)
    assert backup.arbitration().status.code == 6  # ALREADY_EXISTS: not primary
    with pytest.raises(grpc.RpcError) as err:
        backup.write(lpm_update(info, [10, 3, 0, 0], 16, 3))
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED

    # ... until it wins the arbitration with a higher election id
    winner = Controller(stub, 20)
    assert winner.arbitration().status.code == 0
    winner.write(lpm_update(info, [10, 3, 0, 0], 16, 3))
    with pytest.raises(grpc.RpcError) as err:
        primary.write(lpm_update(info, [10, 4, 0, 0], 16, 3))
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED


def test_bad_requests_get_precise_errors(switch, compiled):
    stub, _ = switch
    _, info = compiled
    ctl = Controller(stub, 1)
    ctl.arbitration()
    push_pipeline(ctl, compiled)
    ctl.write(lpm_update(info, [10, 1, 0, 0], 16, 1))
    cases = []
    dup = lpm_update(info, [10, 1, 0, 0], 16, 1)
    cases.append((dup, grpc.StatusCode.ALREADY_EXISTS))
    missing = lpm_update(info, [10, 9, 0, 0], 16, 1, p4runtime_pb2.Update.DELETE)
    cases.append((missing, grpc.StatusCode.NOT_FOUND))
    bad_table = lpm_update(info, [10, 1, 0, 0], 16, 1)
    bad_table.entity.table_entry.table_id = 12345
    cases.append((bad_table, grpc.StatusCode.NOT_FOUND))
    too_wide = lpm_update(info, [10, 1, 0, 0], 16, 1)
    too_wide.entity.table_entry.action.action.params[2].value = b"\xff\xff"  # port is 9 bits
    cases.append((too_wide, grpc.StatusCode.OUT_OF_RANGE))  # the specification's code for a value wider than its field
    bad_prefix = lpm_update(info, [10, 1, 0, 0], 40, 1)
    cases.append((bad_prefix, grpc.StatusCode.INVALID_ARGUMENT))
    for upd, code in cases:
        with pytest.raises(grpc.RpcError) as err:
            ctl.write(upd)
        # P4Runtime reports write failures as UNKNOWN with one p4.v1.Error per update in the details
        assert err.value.code() == grpc.StatusCode.UNKNOWN
        errors = update_errors(err.value)
        assert len(errors) == 1 and errors[0].canonical_code == code.value[0], (errors, code)
        assert errors[0].message
    # the switch still works afterwards
    t, _ = ids(info)
    assert len(read_table(stub, t["GwIngress.ipv4_lpm"].preamble.id)) == 1
    # counters can be read
    req = p4runtime_pb2.ReadRequest(device_id=1)
    req.entities.add().counter_entry.counter_id = 0
    entries = [e.counter_entry for r in stub.Read(req) for e in r.entities]
    assert len(entries) == 16 + 16384 + 2 and all(e.data.packet_count == 0 for e in entries)  # esp_status, sa_counters, wan_drops


@pytest.mark.parametrize("atomicity", [p4runtime_pb2.WriteRequest.ROLLBACK_ON_ERROR, p4runtime_pb2.WriteRequest.DATAPLANE_ATOMIC])
def test_atomic_writes_are_all_or_nothing(switch, compiled, atomicity):
    stub, _ = switch
    _, info = compiled
    ctl = Controller(stub, 10)
    assert ctl.arbitration().status.code == 0
    push_pipeline(ctl, compiled)
    t, a = ids(info)
    lpm_id = t["GwIngress.ipv4_lpm"].preamble.id
    # the third update collides with the first: nothing of the batch may land
    with pytest.raises(grpc.RpcError) as err:
        ctl.write(lpm_update(info, [10, 1, 0, 0], 16, 1), lpm_update(info, [10, 2, 0, 0], 16, 2), lpm_update(info, [10, 1, 0, 0], 16, 3), atomicity=atomicity)
    codes = [e.canonical_code for e in update_errors(err.value)]
    assert codes == [grpc.StatusCode.ABORTED.value[0], grpc.StatusCode.ABORTED.value[0], grpc.StatusCode.ALREADY_EXISTS.value[0]]
    assert read_table(stub, lpm_id) == []
    # a batch that is fine lands completely, default entry included
    default = p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY)
    default.entity.table_entry.table_id = lpm_id
    default.entity.table_entry.is_default_action = True
    default.entity.table_entry.action.action.action_id = a["GwIngress.drop"].preamble.id
    ctl.write(lpm_update(info, [10, 1, 0, 0], 16, 1), lpm_update(info, [10, 2, 0, 0], 16, 2), default, atomicity=atomicity)
    assert len(read_table(stub, lpm_id)) == 2
    # entities other than table entries are refused in atomic mode, and then nothing lands either
    reg = p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY)
    reg.entity.register_entry.register_id = 1
    with pytest.raises(grpc.RpcError) as err:
        ctl.write(lpm_update(info, [10, 3, 0, 0], 16, 3), reg, atomicity=atomicity)
    codes = [e.canonical_code for e in update_errors(err.value)]
    assert codes == [grpc.StatusCode.ABORTED.value[0], grpc.StatusCode.UNIMPLEMENTED.value[0]]
    assert len(read_table(stub, lpm_id)) == 2


def test_free_port_is_never_handed_out_twice_and_not_ephemeral():
    """Two switches started one after the other never get one port (that left a bench waiting on a switch that had
    not started), and a port is below the kernel's ephemeral range, so a client's connection cannot take it."""
    import socket
    lo, hi = (int(x) for x in open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
    ports = [free_port() for _ in range(300)]
    assert len(set(ports)) == len(ports)
    if lo >= 12000:
        assert all(10000 <= p < lo for p in ports)
    elif hi <= 63535:
        assert all(p > hi for p in ports)
    for p in ports[:20]:    # and each could be bound
        with socket.socket() as s:
            s.bind(("127.0.0.1", p))


def test_bad_sa_configurations_get_precise_errors(compiled, switch):
    """An SA the esp_sad extern cannot make is refused with what is wrong with it (not a bare code), and the slot
    stays as it was."""
    from p4sec.ipsec import gateway as gwp
    from p4sec.infra import runtime
    from p4sec.ipsec.ctlbase import sa_config
    out, _ = compiled
    sw = runtime.Switch(f"127.0.0.1:{switch[1]}")
    try:
        sw.push(out)
        good = sa_config(0x1001, "aes-gcm-128", bytes(20), b"", "192.0.2.1", "198.51.100.1", udp_encap=(4500, 4500))
        gwp.sa_write(sw, 3, good)
        cases = [
            (dict(good, enc_key=[0] * 16), "AES-GCM-128 takes 20 bytes of key material, not 16"),
            (dict(good, udp_encap=[0, 4500]), "UDP encapsulation with port 0"),
            (dict(good, tunnel=None), "needs tunnel mode"),
            (dict(good, tunnel=["192.0.2.1", "2001:db8::1"]), "not of one IP version"),
            (dict(good, replay_window=100000), "at most 4096"),
            (dict(good, udp_encap=[70000, 4500]), "add_sa: "),     # not a port: the JSON is refused as such
        ]
        for bad, why in cases:
            with pytest.raises(runtime.WriteError, match=why):
                gwp.sa_write(sw, 3, dict(bad, spi=0x1002))
        # the SA written first is still in its slot
        assert sw.extern_read(gwp.SAD, "get_sas", {}) == {"sas": [[3, 0x1001]]}
    finally:
        sw.close()
