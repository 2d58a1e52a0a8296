"""p4sec started the way scripts start BMv2's simple_switch_grpc (`p4sec simple_switch_grpc ...`, or a symlink of
that name), with its flags, and a P4Runtime client (the official stubs) programming it: a program compiled with
p4c-style flags, loaded at start or pushed by the client; entries written and read back; packets through `-i`
ports (root). Unknown flags and a BMv2 JSON get errors that name them."""
import json
import os
import subprocess
import threading
import time

import p4sec  # noqa: F401  (sets the protobuf runtime the p4runtime package needs)
import grpc
import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from conftest import ROOT
from p4sec.infra.netns import free_port


@pytest.fixture(scope="module")
def build(p4sec_bin, tmp_path_factory):
    """programs/ipv4_router.p4 compiled as a p4c Makefile would: build/router.json and build/router.p4info.txt."""
    out = tmp_path_factory.mktemp("build")
    subprocess.run([str(p4sec_bin), "compile", "--target", "bmv2", "--arch", "v1model", "--std", "p4-16",
                    "--p4runtime-files", str(out / "router.p4info.txt"), "-o", str(out / "router.json"),
                    str(ROOT / "programs" / "ipv4_router.p4")], check=True, capture_output=True)
    info = text_format.Parse((out / "router.p4info.txt").read_text(), p4info_pb2.P4Info())
    return out, info


def start(argv, port):
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        grpc.channel_ready_future(channel).result(timeout=20)
    except grpc.FutureTimeoutError:
        proc.kill()
        raise AssertionError(f"no P4Runtime server on {port}: {proc.communicate()[1]}")
    return proc, channel


def stop(proc, channel, client=None):
    if client is not None:
        client.done.set()
    channel.close()
    proc.terminate()
    proc.wait(timeout=10)


class Client:
    """A controller as BMv2's tutorials write theirs: arbitration on the stream, then writes and reads."""

    def __init__(self, channel, device_id):
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
        self.device_id = device_id
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = device_id
        req.arbitration.election_id.low = 1
        self.done = threading.Event()
        self.stream = self.stub.StreamChannel(self._requests(req))
        assert next(self.stream).arbitration.status.code == 0

    def _requests(self, first):
        yield first
        self.done.wait()  # the stream stays open (this client stays primary) until the test ends

    def set_pipeline(self, info, program):
        req = p4runtime_pb2.SetForwardingPipelineConfigRequest(device_id=self.device_id,
                                                               action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
        req.election_id.low = 1
        req.config.p4info.CopyFrom(info)
        req.config.p4_device_config = program
        self.stub.SetForwardingPipelineConfig(req)

    def route(self, info, prefix, plen, port):
        table = next(t for t in info.tables if t.preamble.name == "RouterIngress.ipv4_lpm")
        action = next(a for a in info.actions if a.preamble.name == "RouterIngress.set_nhop")
        req = p4runtime_pb2.WriteRequest(device_id=self.device_id)
        req.election_id.low = 1
        u = req.updates.add(type=p4runtime_pb2.Update.INSERT)
        e = u.entity.table_entry
        e.table_id = table.preamble.id
        m = e.match.add(field_id=table.match_fields[0].id)
        m.lpm.value = bytes(prefix)
        m.lpm.prefix_len = plen
        e.action.action.action_id = action.preamble.id
        for p, v in zip(action.params, [bytes.fromhex("0200000000aa"), bytes.fromhex("020000000001"), bytes([0, port])]):
            e.action.action.params.add(param_id=p.id, value=v)
        self.stub.Write(req)
        return table.preamble.id

    def read(self, table_id):
        req = p4runtime_pb2.ReadRequest(device_id=self.device_id)
        req.entities.add().table_entry.table_id = table_id
        return [e.table_entry for r in self.stub.Read(req) for e in r.entities]


def test_no_p4_then_the_client_pushes_the_program(p4sec_bin, build):
    out, info = build
    port = free_port()
    proc, channel = start([str(p4sec_bin), "simple_switch_grpc", "--device-id", "3", "--log-console", "-L", "info",
                           "--thrift-port", "9090", "--no-p4", "--", "--grpc-server-addr", f"127.0.0.1:{port}",
                           "--cpu-port", "255"], port)
    c = None
    try:
        c = Client(channel, 3)
        c.set_pipeline(info, (out / "router.json").read_bytes())
        tid = c.route(info, [10, 1, 0, 0], 16, 2)
        [e] = c.read(tid)
        assert e.match[0].lpm.prefix_len == 16 and e.action.action.params[2].value == b"\x02"
    finally:
        stop(proc, channel, c)


def test_symlink_named_simple_switch_grpc_with_the_program_file(p4sec_bin, build, tmp_path):
    out, info = build
    link = tmp_path / "simple_switch_grpc"
    link.symlink_to(p4sec_bin)
    port = free_port()
    proc, channel = start([str(link), "--device-id", "1", "--log-level", "warn", str(out / "router.json"),
                           "--", f"--grpc-server-addr=127.0.0.1:{port}"], port)
    c = None
    try:
        c = Client(channel, 1)
        # the program given on the command line is running: entries go straight in
        tid = c.route(info, [192, 168, 0, 0], 24, 1)
        assert len(c.read(tid)) == 1
    finally:
        stop(proc, channel, c)


@pytest.mark.parametrize("argv,needle", [
    (["simple_switch_grpc", "--bogus-flag"], "--bogus-flag"),
    (["simple_switch_grpc", "--no-p4", "--", "--grpc-server-addr", "127.0.0.1:1", "--no-such-target-option"], "--no-such-target-option"),
    (["switch", "-i", "1-veth0", "--no-p4"], "1-veth0"),
])
def test_unknown_or_bad_flags_are_named(p4sec_bin, argv, needle):
    r = subprocess.run([str(p4sec_bin), *argv], capture_output=True, text=True, timeout=20)
    assert r.returncode == 2, r.stderr
    assert needle in r.stderr, r.stderr


def test_bmv2_json_is_refused_naming_p4sec_compile(p4sec_bin, tmp_path):
    bmv2 = tmp_path / "basic.json"
    bmv2.write_text(json.dumps({"header_types": [], "headers": [], "parsers": [], "pipelines": [],
                                "__meta__": {"version": [2, 23], "compiler": "p4c"}}))
    r = subprocess.run([str(p4sec_bin), "simple_switch_grpc", str(bmv2), "--", "--grpc-server-addr", f"127.0.0.1:{free_port()}"],
                       capture_output=True, text=True, timeout=20)
    assert r.returncode != 0
    assert "p4sec compile" in r.stderr and "BMv2" in r.stderr, r.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")
def test_interfaces_given_with_i_forward_packets(p4sec_bin, build):
    """Two veth pairs; the switch on one end of each (`-i 1@IFACE -i 2@IFACE`), a frame in on port 1 routed out
    of port 2 by the entry the client wrote."""
    from scapy.all import Ether, IP, UDP, AsyncSniffer, sendp  # noqa: F401
    out, info = build
    tag = f"{os.getpid() % 10000}"
    a, b = f"ssa{tag}", f"ssb{tag}"
    for n in (a, b):
        subprocess.run(["ip", "link", "add", n, "type", "veth", "peer", "name", n + "p"], check=True)
        for d in (n, n + "p"):
            subprocess.run(["ip", "link", "set", d, "up"], check=True)
    port = free_port()
    proc, channel = start([str(p4sec_bin), "simple_switch_grpc", "-i", f"1@{a}", "-i", f"2@{b}", str(out / "router.json"),
                           "--", "--grpc-server-addr", f"127.0.0.1:{port}"], port)
    c = None
    try:
        c = Client(channel, 0)  # (BMv2's default device id)
        c.route(info, [10, 2, 0, 0], 16, 2)
        sniffer = AsyncSniffer(iface=b + "p", lfilter=lambda p: IP in p and p[IP].dst == "10.2.0.9")
        sniffer.start()
        time.sleep(0.5)
        sendp(Ether(dst="02:00:00:00:00:01") / IP(src="10.1.0.1", dst="10.2.0.9", ttl=9) / UDP(dport=9) / b"x" * 20,
              iface=a + "p", verbose=False)
        time.sleep(1.0)
        got = sniffer.stop()
        assert got, "the routed frame did not come out of port 2"
        assert got[0][IP].ttl == 8 and got[0][Ether].dst == "02:00:00:00:00:aa"
    finally:
        stop(proc, channel, c)
        for n in (a, b):
            subprocess.run(["ip", "link", "del", n], check=False)
