"""PacketIn/PacketOut and digests on the StreamChannel with the official stubs: a PacketOut enters the pipeline on the
CPU port with its controller header built from the metadata; frames the pipeline sends to the CPU port come
back as PacketIn with the packet_in header turned into metadata."""
import queue
import subprocess
import threading

import p4sec  # noqa: F401
import grpc
import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from test_p4runtime import free_port

CPU = 255
PROGRAM = r"""
#include <core.p4>
#include <v1model.p4>
@controller_header("packet_out") header packet_out_t { bit<9> egress_port; bit<7> pad; }
@controller_header("packet_in") header packet_in_t { bit<9> ingress_port; bit<7> reason; }
header ethernet_t { bit<48> dst; bit<48> src; bit<16> type; }
struct hs { packet_out_t packet_out; packet_in_t packet_in; ethernet_t eth; }
struct m { }
struct learn_t { bit<48> src; bit<9> port; }
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {
    state start { transition select(sm.ingress_port) { 255: cpu; default: eth; } }
    state cpu { p.extract(hdr.packet_out); transition eth; }
    state eth { p.extract(hdr.eth); transition accept; }
}
control V(inout hs hdr, inout m meta) { apply { } }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    apply {
        // echo every packet-out back to the controller, telling it which port it asked for
        hdr.packet_in.setValid();
        if (hdr.packet_out.isValid()) {
            hdr.packet_in.ingress_port = hdr.packet_out.egress_port;
            hdr.packet_in.reason = 1;
            hdr.packet_out.setInvalid();
        } else {
            hdr.packet_in.ingress_port = sm.ingress_port;
            hdr.packet_in.reason = 2;
        }
        sm.egress_spec = 255;
        digest<learn_t>(1, { hdr.eth.src, sm.ingress_port });
    }
}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.packet_in); p.emit(hdr.eth); } }
V1Switch(P(), V(), I(), E(), V(), D()) main;
"""


@pytest.fixture(scope="module")
def compiled(p4sec_bin, tmp_path_factory):
    out = tmp_path_factory.mktemp("pio")
    (out / "pio.p4").write_text(PROGRAM)
    subprocess.run([str(p4sec_bin), "compile", str(out / "pio.p4"), "-o", str(out)], check=True)
    info = p4info_pb2.P4Info()
    text_format.Parse((out / "p4info.txtpb").read_text(), info)
    return out, info


@pytest.fixture
def stub(p4sec_bin):
    port = free_port()
    proc = subprocess.Popen([str(p4sec_bin), "switch", "--grpc", f"127.0.0.1:{port}", "--cpu-port", str(CPU)], stderr=subprocess.PIPE)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    grpc.channel_ready_future(channel).result(timeout=20)
    yield p4runtime_pb2_grpc.P4RuntimeStub(channel)
    channel.close()
    proc.terminate()
    proc.wait(timeout=10)


class Stream:
    """A StreamChannel whose requests come from a queue and whose responses are collected by a thread."""

    def __init__(self, stub, election_id):
        self.election_id = election_id
        self.out = queue.Queue()
        self.inbox = queue.Queue()
        self.held = []
        self.call = stub.StreamChannel(iter(self.out.get, None))
        threading.Thread(target=self._pump, daemon=True).start()
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = 1
        req.arbitration.election_id.low = election_id
        self.out.put(req)

    def _pump(self):
        try:
            for m in self.call:
                self.inbox.put(m)
        except grpc.RpcError:
            pass

    def next(self, kind, timeout=10):
        """The next message of this kind; messages of other kinds are kept for later calls."""
        for i, m in enumerate(self.held):
            if m.WhichOneof("update") == kind:
                del self.held[i]
                return getattr(m, kind)
        while True:
            m = self.inbox.get(timeout=timeout)
            if m.WhichOneof("update") == kind:
                return getattr(m, kind)
            self.held.append(m)

    def packet_out(self, payload, metadata):
        req = p4runtime_pb2.StreamMessageRequest()
        req.packet.payload = payload
        for mid, value in metadata:
            req.packet.metadata.add(metadata_id=mid, value=value)
        self.out.put(req)

    def close(self):
        self.out.put(None)


def push(stub, compiled, election_id):
    out, info = compiled
    req = p4runtime_pb2.SetForwardingPipelineConfigRequest(device_id=1, action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
    req.election_id.low = election_id
    req.config.p4info.CopyFrom(info)
    req.config.p4_device_config = (out / "program.json").read_bytes()
    stub.SetForwardingPipelineConfig(req)


def meta_ids(info):
    return {c.preamble.name: {m.name: m.id for m in c.metadata} for c in info.controller_packet_metadata}


FRAME = bytes.fromhex("020000000002" "020000000001" "88b5") + b"hello, switch" + bytes(40)


def test_packet_out_comes_back_as_packet_in(stub, compiled):
    ids = meta_ids(compiled[1])
    s = Stream(stub, 10)
    assert s.next("arbitration").status.code == 0
    push(stub, compiled, 10)
    for port in (1, 7, 300):
        s.packet_out(FRAME, [(ids["packet_out"]["egress_port"], port.to_bytes(2, "big")), (ids["packet_out"]["pad"], b"\x00")])
        pin = s.next("packet")
        assert pin.payload == FRAME
        md = {m.metadata_id: int.from_bytes(m.value, "big") for m in pin.metadata}
        assert md == {ids["packet_in"]["ingress_port"]: port, ids["packet_in"]["reason"]: 1}
    s.close()


def test_bad_packet_out_and_backup_controller_get_stream_errors(stub, compiled):
    ids = meta_ids(compiled[1])
    primary = Stream(stub, 20)
    assert primary.next("arbitration").status.code == 0
    push(stub, compiled, 20)
    backup = Stream(stub, 5)
    assert backup.next("arbitration").status.code == grpc.StatusCode.ALREADY_EXISTS.value[0]
    backup.packet_out(FRAME, [(ids["packet_out"]["egress_port"], b"\x01"), (ids["packet_out"]["pad"], b"\x00")])
    err = backup.next("error")
    assert err.canonical_code == grpc.StatusCode.PERMISSION_DENIED.value[0]
    primary.packet_out(FRAME, [(ids["packet_out"]["egress_port"], b"\x01")])  # pad missing
    err = primary.next("error")
    assert "`pad`" in err.message and err.packet_out.packet_out.payload == FRAME
    primary.packet_out(FRAME, [(ids["packet_out"]["egress_port"], b"\x04\x00"), (ids["packet_out"]["pad"], b"\x00")])  # 11 bits > 9
    err = primary.next("error")
    assert "significant bits" in err.message
    # a good one still goes through afterwards
    primary.packet_out(FRAME, [(ids["packet_out"]["egress_port"], b"\x02"), (ids["packet_out"]["pad"], b"\x00")])
    assert primary.next("packet").payload == FRAME
    primary.close()
    backup.close()


def digest_update(info, kind, max_list_size=2):
    u = p4runtime_pb2.Update(type=kind)
    u.entity.digest_entry.digest_id = info.digests[0].preamble.id
    if kind != p4runtime_pb2.Update.DELETE:
        u.entity.digest_entry.config.max_list_size = max_list_size
        u.entity.digest_entry.config.max_timeout_ns = 1000000
    return u


def write(stub, election_id, *updates):
    req = p4runtime_pb2.WriteRequest(device_id=1)
    req.election_id.low = election_id
    req.updates.extend(updates)
    return stub.Write(req)


def test_digests_are_streamed_once_enabled(stub, compiled):
    ids = meta_ids(compiled[1])
    info = compiled[1]
    s = Stream(stub, 30)
    assert s.next("arbitration").status.code == 0
    push(stub, compiled, 30)

    def send(src_last):
        frame = bytes.fromhex("020000000002" "0200000000") + bytes([src_last]) + bytes.fromhex("88b5") + bytes(50)
        s.packet_out(frame, [(ids["packet_out"]["egress_port"], b"\x01"), (ids["packet_out"]["pad"], b"\x00")])
        s.next("packet")

    send(0x10)  # not enabled yet: no digest
    write(stub, 30, digest_update(info, p4runtime_pb2.Update.INSERT))
    for x in (0x11, 0x12, 0x13):
        send(x)
    got, lists = [], []
    while len(got) < 3:
        d = s.next("digest")
        assert d.digest_id == info.digests[0].preamble.id
        lists.append(d.list_id)
        assert 1 <= len(d.data) <= 2
        for item in d.data:
            src, port = (int.from_bytes(m.bitstring, "big") for m in item.struct.members)
            got.append((src, port))
    assert got == [(0x020000000011, CPU), (0x020000000012, CPU), (0x020000000013, CPU)]
    assert len(set(lists)) == len(lists)
    req = p4runtime_pb2.ReadRequest(device_id=1)
    req.entities.add().digest_entry.digest_id = 0
    entries = [e.digest_entry for r in stub.Read(req) for e in r.entities]
    assert [(e.digest_id, e.config.max_list_size) for e in entries] == [(info.digests[0].preamble.id, 2)]
    with pytest.raises(grpc.RpcError):
        write(stub, 30, digest_update(info, p4runtime_pb2.Update.INSERT))
    write(stub, 30, digest_update(info, p4runtime_pb2.Update.DELETE))
    send(0x14)
    with pytest.raises(queue.Empty):
        s.next("digest", timeout=1)
    s.close()
