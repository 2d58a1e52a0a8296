"""TAP and TUN ports (root only). With several workers the switch makes the device multi-queue, one queue per
worker, with long transmit queues, and forwards UDP flows between the device (in a namespace) and a veth port through
the IPv4 router in both directions; every flow's datagrams arrive in the order they were sent, the workers share
the flows, and the port counters match what the hosts saw. TCP streams cross with the devices' offloads (TSO
super-frames from the host cut into segments, segments to the host joined) and without them, intact."""
import json
import os
import signal
import subprocess
import sys
import uuid

import pytest
from p4sec.infra.netns import ns as nsx, sh

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


def start(p4sec_bin, router, net, tmp_path, kind, workers, env=None):
    """The switch with port 2 on the veth and port 3 a `kind` device (moved into namespace `tap`, 10.0.1.1/24), the
    router pushed and both routes in: (switch process, P4Runtime client, metrics port, log path)."""
    from p4sec.infra.runtime import Switch, ip, mac
    ns, tap = net["ns"], net["tap"]
    port, mport = free_port(), free_port()
    log = tmp_path / "switch.log"
    sw = subprocess.Popen([str(p4sec_bin), "switch", "--grpc", f"127.0.0.1:{port}", "--workers", str(workers), "--metrics", f"127.0.0.1:{mport}",
                           "--port", f"2={net['sw']}", "--port", f"3={kind}:{tap}"], stderr=open(log, "w"), env={**os.environ, **(env or {})})
    wait_for(lambda: f"{kind.upper()} device `{tap}` created" in log.read_text() or sw.poll() is not None, "the device")
    assert sw.poll() is None, log.read_text()
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
    return sw, ctl, mport, log


def stop(sw, log):
    sw.send_signal(signal.SIGTERM)
    rc = sw.wait(timeout=10)
    assert rc == 0, log.read_text()[-3000:]


@ROOT_ONLY
@pytest.mark.parametrize("kind", ["tap", "tun"])
def test_two_workers_keep_flow_order(p4sec_bin, router, net, tmp_path, kind):
    ns, tap = net["ns"], net["tap"]
    sw, ctl, mport, log = start(p4sec_bin, router, net, tmp_path, kind, 2)
    try:
        text = log.read_text()
        assert "2 queues (one per worker), 4096-packet queues, checksum and TCP segmentation offloads taken from the host" in text, text
        t = ns["tap"]
        assert int(nsx(t, "cat", f"/sys/class/net/{tap}/tx_queue_len").stdout) == 4096
        queues = nsx(t, "ls", f"/sys/class/net/{tap}/queues").stdout.split()
        assert "tx-0" in queues and "tx-1" in queues and "tx-2" not in queues, queues
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
        stop(sw, log)


# a TCP stream of `size` pseudo-random bytes: the receiver prints the SHA-256 of what it got, the sender of what it sent
TCP_RECV = r"""
import hashlib, socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", 5001)); s.listen(1)
print("ready", flush=True)
c, _ = s.accept(); h = hashlib.sha256(); n = 0
while True:
    b = c.recv(1 << 20)
    if not b:
        break
    h.update(b); n += len(b)
print(n, h.hexdigest(), flush=True)
"""
TCP_SEND = r"""
import hashlib, random, socket, sys
dst, size = sys.argv[1], int(sys.argv[2])
r = random.Random(7); data = r.randbytes(size)
s = socket.create_connection((dst, 5001), timeout=30); s.sendall(data); s.close()
print(size, hashlib.sha256(data).hexdigest(), flush=True)
"""


def tcp(src_ns, dst_ns, dst, size):
    """A TCP stream from `src_ns` to `dst`: (what was sent, what arrived) as 'bytes sha256'."""
    recv = subprocess.Popen(["ip", "netns", "exec", dst_ns, sys.executable, "-c", TCP_RECV], stdout=subprocess.PIPE, text=True)
    try:
        assert recv.stdout.readline().strip() == "ready"
        r = subprocess.run(["ip", "netns", "exec", src_ns, sys.executable, "-c", TCP_SEND, dst, str(size)], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        out, _ = recv.communicate(timeout=60)
    finally:
        if recv.poll() is None:
            recv.kill()
    return r.stdout.strip(), out.strip()


@ROOT_ONLY
@pytest.mark.parametrize("kind", ["tap", "tun"])
@pytest.mark.parametrize("offloads", [True, False])
def test_tcp_through_the_device_with_and_without_offloads(p4sec_bin, router, net, tmp_path, kind, offloads):
    """TCP streams both ways between the device's namespace and the veth's. With offloads (the default) the
    host's stack hands the device super-frames (TSO) with checksums left to complete, which the port cuts into
    segments before the pipeline; the other way, the segments of a stream are joined into super-frames written
    with their virtio-net header. The bytes arrive intact and the port counts the super-frames both ways. With
    P4SEC_NO_OFFLOADS=1 there is no virtio-net header and no super-frame."""
    ns, tap = net["ns"], net["tap"]
    sw, ctl, mport, log = start(p4sec_bin, router, net, tmp_path, kind, 1, env=None if offloads else {"P4SEC_NO_OFFLOADS": "1"})
    try:
        text = log.read_text()
        assert ("checksum and TCP segmentation offloads taken from the host" in text) == offloads, text
        assert ("no offloads" in text) == (not offloads), text
        features = nsx(ns["tap"], "ethtool", "-k", tap, check=False).stdout
        if features:
            assert ("tcp-segmentation-offload: on" in features) == offloads, features
        sent, got = tcp(ns["tap"], ns["veth"], "10.0.2.2", 24 << 20)
        assert sent == got, f"{kind} to veth: sent {sent}, received {got}"
        sent, got = tcp(ns["veth"], ns["tap"], "10.0.1.1", 8 << 20)
        assert sent == got, f"veth to {kind}: sent {sent}, received {got}"
        m = metrics_of(mport)
        supers = m[f'p4sec_port_rx_gso_frames_total{{port="3",iface="{kind}:{tap}"}}']
        print(f"{kind}, offloads {offloads}: {supers} super-frames received from the device")
        joined = m[f'p4sec_port_tx_gso_frames_total{{port="3",iface="{kind}:{tap}"}}']
        print(f"{kind}, offloads {offloads}: {joined} super-frames sent to the device")
        if offloads:
            assert supers > 0, "the host's TSO super-frames reached the port"
            assert joined > 0, "segments to the device were joined"
        else:
            assert supers == 0 and joined == 0
        assert m[f'p4sec_port_rx_errors_total{{port="3",iface="{kind}:{tap}"}}'] == 0
        assert m[f'p4sec_port_tx_errors_total{{port="3",iface="{kind}:{tap}"}}'] == 0
        ctl.close()
    finally:
        stop(sw, log)
