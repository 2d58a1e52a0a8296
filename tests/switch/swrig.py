"""Shared rig of the switch tests that run real packets: veth pairs whose host ends live in network namespaces,
the switch's /metrics read into a dict, and a `p4sec switch` running the IPv4 router program, pushed and given
its route to 10.0.2.0/24 over P4Runtime."""
import subprocess
import time
import uuid

import pytest

from p4.v1 import p4runtime_pb2
from p4sec.infra.netns import sh

from conftest import ROOT
from test_p4runtime import Controller, free_port, ids


def make_topo(prefix, queues=None):
    """Two namespaces, each holding the host end of a veth pair whose switch end stays here (up, no IPv6 on
    either end): [(namespace, host interface, switch interface)] x 2. `queues`: the veths' receive/transmit queue count."""
    tag = uuid.uuid4().hex[:6]
    q = ["numtxqueues", str(queues), "numrxqueues", str(queues)] if queues else []
    links = []
    for i in (1, 2):
        n, host, sw = f"p4{prefix}{i}{tag}", f"{prefix}h{i}{tag}", f"{prefix}s{i}{tag}"
        sh("ip", "netns", "add", n)
        sh("ip", "link", "add", host, *q, "type", "veth", "peer", "name", sw, *q)
        sh("ip", "link", "set", host, "netns", n)
        # no IPv6 on the host end either: its router solicitations and MLD reports would reach the switch as
        # stray frames (counted in queues, tail drops and port counters the tests compare)
        sh("ip", "netns", "exec", n, "sysctl", "-qw", f"net.ipv6.conf.{host}.disable_ipv6=1")
        sh("ip", "netns", "exec", n, "ip", "link", "set", host, "up")
        sh("ip", "link", "set", sw, "up")
        sh("sysctl", "-qw", f"net.ipv6.conf.{sw}.disable_ipv6=1")
        links.append((n, host, sw))
    return links


@pytest.fixture
def topo():
    """make_topo's two namespaces, veths of one queue each; removed after the test (import it into a test module
    to use it)."""
    links = make_topo("t", 1)
    yield links
    drop_topo(links)


@pytest.fixture
def topo2():
    """The same with veths of two receive and two transmit queues (two workers, one XDP socket each)."""
    links = make_topo("t", 2)
    yield links
    drop_topo(links)


def drop_topo(links):
    for n, host, sw in links:
        subprocess.run(["ip", "link", "del", sw], capture_output=True)
        subprocess.run(["ip", "netns", "del", n], capture_output=True)


def metrics_of(mport):
    """The switch's /metrics as {sample name with labels: value}."""
    import urllib.request
    text = urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = int(value)
    return out


def start_router(p4sec_bin, tmp_path, port_args, workers=1, extra=(), env=None, engine=None):
    """Compile programs/ipv4_router.p4, start `p4sec switch` with `port_args` (e.g. ["--port", "1=veth0", ...]),
    push the program over P4Runtime and route 10.0.2.0/24 out of port 2 (destination MAC 02:00:00:00:02:02).
    `engine`: run the switch with `p4sec --engine ENGINE`. Returns (switch process, metrics port, log path); the
    caller terminates the process."""
    import grpc
    from google.protobuf import text_format
    from p4.config.v1 import p4info_pb2
    from p4.v1 import p4runtime_pb2_grpc
    out = tmp_path / "router"
    subprocess.run([str(p4sec_bin), "compile", str(ROOT / "programs" / "ipv4_router.p4"), "-o", str(out)], check=True)
    info = p4info_pb2.P4Info()
    text_format.Parse((out / "p4info.txtpb").read_text(), info)
    port, mport = free_port(), free_port()
    logf = tmp_path / "switch.log"
    sw = subprocess.Popen([str(p4sec_bin), *(["--engine", engine] if engine else []), "switch", "--grpc", f"127.0.0.1:{port}", *port_args, "--workers", str(workers),
                           "--metrics", f"127.0.0.1:{mport}", *extra], stderr=open(logf, "w"), env=env)
    try:
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        grpc.channel_ready_future(channel).result(timeout=20)
        ctl = Controller(p4runtime_pb2_grpc.P4RuntimeStub(channel), 1)
        assert ctl.arbitration().status.code == 0
        req = p4runtime_pb2.SetForwardingPipelineConfigRequest(device_id=1, action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
        req.election_id.low = 1
        req.config.p4info.CopyFrom(info)
        req.config.p4_device_config = (out / "program.json").read_bytes()
        ctl.stub.SetForwardingPipelineConfig(req)
        t, a = ids(info)
        table, act = t["RouterIngress.ipv4_lpm"], a["RouterIngress.set_nhop"]
        u = p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT)
        e = u.entity.table_entry
        e.table_id = table.preamble.id
        m = e.match.add(field_id=1)
        m.lpm.value = bytes([10, 0, 2, 0])
        m.lpm.prefix_len = 24
        e.action.action.action_id = act.preamble.id
        for p, v in zip(act.params, [bytes.fromhex("020000000202"), bytes.fromhex("020000000001"), b"\x02"]):
            e.action.action.params.add(param_id=p.id, value=v)
        ctl.write(u)
        sw.controller = ctl  # the primary's stream stays open as long as the switch runs
    except BaseException:
        sw.terminate()
        sw.wait(timeout=10)
        raise
    return sw, mport, logf


def wait_for(cond, what, timeout=20):
    """Wait until `cond()` holds, checking every 0.1 s; fail the test after `timeout` seconds, naming `what`."""
    deadline = time.time() + timeout
    while not cond():
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
