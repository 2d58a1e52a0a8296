"""P4Runtime resource rules of issue 23, over gRPC against `p4sec switch`: a request body that does not decode
is INVALID_ARGUMENT naming the message, a Write batch that cannot fit its table is refused whole with
RESOURCE_EXHAUSTED, and the memory of large insert/delete cycles goes back to the system (VmRSS measured)."""
import subprocess

import grpc
import pytest
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc
from p4sec.infra.netns import free_port

from test_p4runtime import Controller, compiled, ids, lpm_update, push_pipeline, read_table  # noqa: F401

BIG = [("grpc.max_send_message_length", 64 << 20), ("grpc.max_receive_message_length", 64 << 20)]


@pytest.fixture
def server(p4sec_bin):
    """A switch, a channel to it that may send large batches, and the switch's process (for its VmRSS)."""
    port = free_port()
    proc = subprocess.Popen([str(p4sec_bin), "switch", "--grpc", f"127.0.0.1:{port}"], stderr=subprocess.DEVNULL)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=BIG)
    grpc.channel_ready_future(channel).result(timeout=20)
    yield channel, p4runtime_pb2_grpc.P4RuntimeStub(channel), proc
    channel.close()
    proc.terminate()
    proc.wait(timeout=10)


def rss_mb(proc):
    with open(f"/proc/{proc.pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


# bytes that are no protobuf message: field 1, length-delimited, with a length far beyond the body
GARBAGE = b"\x0a\xff\xff\xff\x0f\x01\x02"


@pytest.mark.parametrize("method,stream", [("Write", False), ("SetForwardingPipelineConfig", False), ("Read", True)])
def test_undecodable_requests_are_invalid_argument(server, method, stream):
    channel, _, _ = server
    path = f"/p4.v1.P4Runtime/{method}"
    call = (channel.unary_stream if stream else channel.unary_unary)(path, request_serializer=lambda b: b, response_deserializer=lambda b: b)
    with pytest.raises(grpc.RpcError) as e:
        r = call(GARBAGE, timeout=10)
        if stream:
            list(r)
    name = {"Write": "WriteRequest", "Read": "ReadRequest"}.get(method, "SetForwardingPipelineConfigRequest")
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (e.value.code(), e.value.details())
    assert f"does not decode as a {name}" in e.value.details(), e.value.details()


def updates(info, n, kind=p4runtime_pb2.Update.INSERT):
    return [lpm_update(info, [10, (i >> 16) & 255, (i >> 8) & 255, i & 255], 32, 1, kind=kind) for i in range(n)]


def port_side(info, ports, kind=p4runtime_pb2.Update.INSERT):
    """Updates of `GwIngress.port_side` (exact on the ingress port, 64 entries) for each port."""
    t, a = ids(info)
    table, act = t["GwIngress.port_side"], a["GwIngress.from_wan"]
    out = []
    for port in ports:
        u = p4runtime_pb2.Update(type=kind)
        e = u.entity.table_entry
        e.table_id = table.preamble.id
        e.match.add(field_id=table.match_fields[0].id).exact.value = port.to_bytes(2, "big").lstrip(b"\0") or b"\0"
        e.action.action.action_id = act.preamble.id
        out.append(u)
    return out


def test_a_batch_that_cannot_fit_is_refused_whole(server, compiled):
    _, stub, _ = server
    ctl = Controller(stub, 10)
    assert ctl.arbitration().status.code == 0
    push_pipeline(ctl, compiled)
    info = compiled[1]
    t, _ = ids(info)
    table = t["GwIngress.port_side"]
    assert table.size == 64
    ctl.write(*port_side(info, range(10)))
    # 10 held: a batch of 64 more inserts cannot fit, whatever its order
    with pytest.raises(grpc.RpcError) as e:
        ctl.write(*port_side(info, range(10, 74)))
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, (e.value.code(), e.value.details()[:300])
    assert "port_side` cannot take this batch: 64 inserts and 0 deletes" in e.value.details(), e.value.details()
    assert "holds 10 of its 64 entries" in e.value.details()
    assert len(read_table(stub, table.preamble.id)) == 10, "nothing of the refused batch was written"
    # with the 10 deleted first in the same batch it can fit, and is written
    ctl.write(*port_side(info, range(10), kind=p4runtime_pb2.Update.DELETE), *port_side(info, range(10, 74)))
    assert len(read_table(stub, table.preamble.id)) == 64


def lpm_batch(info, n, election_id, kind):
    """The serialized WriteRequest of `n` updates of `GwIngress.ipv4_lpm` (10.x.y.z/32 for x.y.z = 0..n-1).

    The pure-Python protobuf runtime this venv has (p4runtime-shell pins protobuf < 3.21) needs about 150 us to
    build one update, 27 s for the three insert/delete batches. So one update is built and serialized as a
    one-update request whose prefix is a marker, and the batch is that request's bytes concatenated with the
    marker replaced (the same length, so the encoding stays valid): parsing concatenated messages merges them, and
    a repeated field's elements append, so the switch decodes one request of `n` updates."""
    marker = bytes([10, 0xFE, 0xED, 0xFA])
    one = p4runtime_pb2.WriteRequest(updates=[lpm_update(info, list(marker), 32, 1, kind=kind)]).SerializeToString()
    assert one.count(marker) == 1
    head = p4runtime_pb2.WriteRequest(device_id=1)
    head.election_id.low = election_id
    body = b"".join(one.replace(marker, bytes([10, (i >> 16) & 255, (i >> 8) & 255, i & 255])) for i in range(n))
    return head.SerializeToString() + body


def test_lpm_batch_decodes_as_the_updates_it_names(compiled):
    info = compiled[1]
    req = p4runtime_pb2.WriteRequest.FromString(lpm_batch(info, 300, 10, p4runtime_pb2.Update.DELETE))
    assert (req.device_id, req.election_id.low, len(req.updates)) == (1, 10, 300)
    for i in (0, 1, 255, 256, 299):
        assert req.updates[i] == lpm_update(info, [10, 0, i >> 8, i & 255], 32, 1, kind=p4runtime_pb2.Update.DELETE)


def test_insert_delete_cycles_give_their_memory_back(server, compiled):
    """The issue's setup: one Write of 60,000 entries, then one Write deleting them, three times. Before the
    fix the switch kept the freed memory (175 MB after the first delete, 302 MB after the third, from 9 MB).
    A delete of an entry that is not there fails the Write, so each delete batch succeeding shows its insert
    batch was written whole."""
    channel, stub, proc = server
    ctl = Controller(stub, 10)
    assert ctl.arbitration().status.code == 0
    push_pipeline(ctl, compiled)
    info = compiled[1]
    write = channel.unary_unary("/p4.v1.P4Runtime/Write", request_serializer=lambda b: b,
                                response_deserializer=p4runtime_pb2.WriteResponse.FromString)
    ins, dels = (lpm_batch(info, 60000, ctl.election_id, kind) for kind in (p4runtime_pb2.Update.INSERT, p4runtime_pb2.Update.DELETE))
    base = rss_mb(proc)
    after = []
    for _ in range(3):
        write(ins, timeout=60)
        write(dels, timeout=60)
        after.append(rss_mb(proc))
    t, _ = ids(info)
    assert read_table(stub, t["GwIngress.ipv4_lpm"].preamble.id) == []
    print(f"VmRSS: {base:.0f} MB before, {', '.join(f'{x:.0f}' for x in after)} MB after each delete")
    assert after[-1] - after[0] < 24, f"memory grows from cycle to cycle: {after}"
    assert after[-1] - base < 48, f"empty tables but {after[-1]:.0f} MB resident (from {base:.0f} MB)"
