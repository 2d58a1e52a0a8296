"""TAP and TUN ports with several workers (root only): the switch makes the device multi-queue, one queue per
worker, with long transmit queues, and forwards UDP flows between the device (in a namespace) and a veth port through
the IPv4 router in both directions; every flow's datagrams arrive in the order they were sent, the workers share
the flows, and the port counters match what the hosts saw."""
import json
import os
import signal
import subprocess
import sys
import uuid

import pytest
from p4sec.netns import ns as nsx, sh

from conftest import ROOT
from swrig import metrics_of, wait_for
from test_p4runtime import free_port

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for TAP devices and network namespaces")

# datagrams of `flows` flows (source ports 20000 + f), interleaved, each carrying (flow, sequence number)
SEND = r"""
import socket, struct, sys
dst, flows, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
socks = []
for f in range(flows):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", 20000 + f))
    socks.append(s)
for seq in range(n):
    for f, s in enumerate(socks):
        s.sendto(struct.pack("!II", f, seq) + bytes(40 + (seq % 5) * 200), (dst, 4242))
print("sent", flush=True)
"""

# what arrives on UDP port 4242, in arrival order: [(source port, flow, sequence number)] as JSON once `total`
# datagrams came or nothing came for 3 s
RECV = r"""
import json, socket, struct, sys
total = int(sys.argv[1])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, 33, 32 << 20)  # SO_RCVBUFFORCE
s.bind(("0.0.0.0", 4242))
print("ready", flush=True)
got = []
s.settimeout(20)
while len(got) < total:
    try:
        data, peer = s.recvfrom(4096)
    except socket.timeout:
        break
    s.settimeout(3)
    f, seq = struct.unpack("!II", data[:8])
    got.append((peer[1], f, seq))
print(json.dumps(got), flush=True)
"""


@pytest.fixture(scope="module")
def router(p4sec_bin, tmp_path_factory):
    out = tmp_path_factory.mktemp("router") / "router"
    subprocess.run([str(p4sec_bin), "compile", str(ROOT / "programs" / "ipv4_router.p4"), "-o", str(out)], check=True)
    return out


@pytest.fixture
def net():
    """Namespace `tap` (the TAP device is moved in by the test) and namespace `veth` with a veth pair (10.0.2.2/24,
    MAC 02:00:00:00:02:02) whose other end `sw` stays here for the switch."""
    tag = uuid.uuid4().hex[:6]
    ns = {k: f"p4q{k}{tag}" for k in ("tap", "veth")}
    for n in ns.values():
        sh("ip", "netns", "add", n)
    host, sw = f"hq{tag}", f"sq{tag}"
    sh("ip", "link", "add", host, "numtxqueues", "2", "numrxqueues", "2", "type", "veth", "peer", "name", sw, "numtxqueues", "2", "numrxqueues", "2")
    sh("ip", "link", "set", host, "netns", ns["veth"])
    v = ns["veth"]
    nsx(v, "ip", "link", "set", host, "address", "02:00:00:00:02:02")
    nsx(v, "ip", "addr", "add", "10.0.2.2/24", "dev", host)
    nsx(v, "ip", "link", "set", host, "up")
    nsx(v, "ip", "neigh", "add", "10.0.2.254", "lladdr", "02:00:00:00:00:01", "dev", host)
    nsx(v, "ip", "route", "add", "10.0.1.0/24", "via", "10.0.2.254")
    sh("ip", "link", "set", sw, "up")
    sh("sysctl", "-qw", f"net.ipv6.conf.{sw}.disable_ipv6=1")
    yield {"ns": ns, "sw": sw, "tap": f"p4tq{tag}"}
    subprocess.run(["ip", "link", "del", sw], capture_output=True)
    for n in ns.values():
        subprocess.run(["ip", "netns", "del", n], capture_output=True)


def flow(src_ns, dst_ns, dst, flows, n):
    """Send `n` datagrams on each of `flows` flows from namespace `src_ns` to `dst` (in `dst_ns`); what arrived."""
    recv = subprocess.Popen(["ip", "netns", "exec", dst_ns, sys.executable, "-c", RECV, str(flows * n)], stdout=subprocess.PIPE, text=True)
    try:
        assert recv.stdout.readline().strip() == "ready"
        r = subprocess.run(["ip", "netns", "exec", src_ns, sys.executable, "-c", SEND, dst, str(flows), str(n)], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and r.stdout.strip() == "sent", r.stderr
        out, _ = recv.communicate(timeout=60)
    finally:
        if recv.poll() is None:
            recv.kill()
    return [tuple(x) for x in json.loads(out)]


def check_order(got, flows, n, what):
    """Every flow's sequence numbers increase (nothing reordered, nothing duplicated); most of them arrived."""
    per = {}
    for sport, f, seq in got:
        assert sport == 20000 + f, (sport, f)
        per.setdefault(f, []).append(seq)
    for f, seqs in per.items():
        assert all(a < b for a, b in zip(seqs, seqs[1:])), f"{what}: flow {f} out of order: {seqs[:50]}"
    assert len(per) == flows, f"{what}: flows that arrived: {sorted(per)}"
    # (a loaded machine may lose a few on the way; order is what is checked)
    assert len(got) >= 0.9 * flows * n, f"{what}: {len(got)} of {flows * n} arrived"


@ROOT_ONLY
@pytest.mark.parametrize("kind", ["tap", "tun"])
def test_two_workers_keep_flow_order(p4sec_bin, router, net, tmp_path, kind):
    from p4sec.runtime import Switch, ip, mac
    ns, tap = net["ns"], net["tap"]
    port, mport = free_port(), free_port()
    log = tmp_path / "switch.log"
    sw = subprocess.Popen([str(p4sec_bin), "switch", "--grpc", f"127.0.0.1:{port}", "--workers", "2", "--metrics", f"127.0.0.1:{mport}",
                           "--port", f"2={net['sw']}", "--port", f"3={kind}:{tap}"], stderr=open(log, "w"))
    try:
        wait_for(lambda: f"{kind.upper()} device `{tap}` created" in log.read_text() or sw.poll() is not None, "the device")
        assert sw.poll() is None, log.read_text()
        assert "2 queues (one per worker), 4096-packet queues" in log.read_text(), log.read_text()
        assert int(open(f"/sys/class/net/{tap}/tx_queue_len").read()) == 4096
        queues = os.listdir(f"/sys/class/net/{tap}/queues")
        assert "tx-0" in queues and "tx-1" in queues and "tx-2" not in queues, queues
        t = ns["tap"]
        sh("ip", "link", "set", tap, "netns", t)
        nsx(t, "sysctl", "-qw", f"net.ipv6.conf.{tap}.disable_ipv6=1")
        if kind == "tap":
            nsx(t, "ip", "link", "set", tap, "address", "02:00:00:00:01:01")
        nsx(t, "ip", "addr", "add", "10.0.1.1/24", "dev", tap)
        nsx(t, "ip", "link", "set", tap, "up")
        if kind == "tap":
            nsx(t, "ip", "neigh", "add", "10.0.1.254", "lladdr", "02:00:00:00:00:01", "dev", tap)
            nsx(t, "ip", "route", "add", "10.0.2.0/24", "via", "10.0.1.254")
        else:
            nsx(t, "ip", "route", "add", "10.0.2.0/24", "dev", tap)

        ctl = Switch(f"127.0.0.1:{port}")
        ctl.push(router)
        for net_, dst, p in (("10.0.2.0", "02:00:00:00:02:02", 2), ("10.0.1.0", "02:00:00:00:01:01", 3)):
            ctl.table_insert("RouterIngress.ipv4_lpm", {"hdr.ipv4.dst_addr": ("lpm", ip(net_), 24)}, "RouterIngress.set_nhop",
                             {"dst_mac": mac(dst), "src_mac": mac("02:00:00:00:00:01"), "port": p})
        flows, n = 16, 500
        m0 = metrics_of(mport)
        # TAP -> veth: the kernel spreads the flows over the TAP device's queues, one per worker
        got = flow(t, ns["veth"], "10.0.2.2", flows, n)
        check_order(got, flows, n, f"{kind} to veth")
        m1 = metrics_of(mport)
        tap_rx = m1[f'p4sec_port_rx_packets_total{{port="3",iface="{kind}:{tap}"}}'] - m0[f'p4sec_port_rx_packets_total{{port="3",iface="{kind}:{tap}"}}']
        veth_tx = m1[f'p4sec_port_tx_packets_total{{port="2",iface="{net["sw"]}"}}'] - m0[f'p4sec_port_tx_packets_total{{port="2",iface="{net["sw"]}"}}']
        assert tap_rx >= len(got) and veth_tx >= len(got), (tap_rx, veth_tx, len(got))
        assert veth_tx <= tap_rx <= flows * n + 50, (tap_rx, veth_tx)
        work = [m1[f'p4sec_worker_packets_total{{worker="{i}"}}'] - m0[f'p4sec_worker_packets_total{{worker="{i}"}}'] for i in range(2)]
        print(f"{kind} to veth: {len(got)} of {flows * n} arrived, device rx {tap_rx}, veth tx {veth_tx}, per worker {work}")
        assert min(work) > 0 and sum(work) >= tap_rx, f"both workers take flows from the TAP device's queues: {work}"
        # veth -> TAP: each worker writes the flows it gets to its own queue
        got = flow(ns["veth"], t, "10.0.1.1", flows, n)
        check_order(got, flows, n, f"veth to {kind}")
        m2 = metrics_of(mport)
        tap_tx = m2[f'p4sec_port_tx_packets_total{{port="3",iface="{kind}:{tap}"}}'] - m1[f'p4sec_port_tx_packets_total{{port="3",iface="{kind}:{tap}"}}']
        print(f"veth to {kind}: {len(got)} of {flows * n} arrived, device tx {tap_tx}")
        assert tap_tx >= len(got), (tap_tx, len(got))
        assert m2[f'p4sec_port_tx_errors_total{{port="3",iface="{kind}:{tap}"}}'] == 0
        ctl.close()
    finally:
        sw.send_signal(signal.SIGTERM)
        rc = sw.wait(timeout=10)
    assert rc == 0, log.read_text()[-3000:]
