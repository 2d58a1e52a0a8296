"""Interface ports with memory-mapped AF_PACKET rings (the default) and without them (P4SEC_NO_MMAP=1: one
recvmsg/send per frame), side by side: the same traffic between two network namespaces through
tests/switch/programs/port_fwd.p4 (port 1 <-> port 2, IPv4 TTL decremented), checked end to end. UDP and TCP
from the hosts' own stacks leave their checksums to offload (CHECKSUM_PARTIAL), so the switch must complete
them; frames larger than a ring slot come through the socket; VLAN tags the kernel takes out on receive are
put back; per-port counters count what went through and what could not be sent."""
import hashlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid

import pytest
from p4sec.infra.netns import ns as nsx, sh
from scapy.all import IP, UDP, Dot1Q, Ether, Raw, rdpcap

from conftest import ROOT
from test_p4runtime import free_port

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")

MODES = ["mmap", "no-mmap"]
MAC1, MAC2 = "02:00:00:00:01:01", "02:00:00:00:02:02"


@pytest.fixture(scope="module")
def fwd(p4sec_bin, tmp_path_factory):
    out = tmp_path_factory.mktemp("fwd") / "fwd"
    subprocess.run([str(p4sec_bin), "compile", str(ROOT / "tests" / "switch" / "programs" / "port_fwd.p4"), "-o", str(out)], check=True)
    return out


@pytest.fixture
def net():
    """ns1 (h1, 10.0.1.1/16) -- s1 | switch | s2 -- ns2 (h2, 10.0.2.2/16); neighbours are static (the program
    does not rewrite MAC addresses), IPv6 is off so that only the test's frames cross the switch."""
    tag = uuid.uuid4().hex[:6]
    n = {"ns1": f"p4m1{tag}", "ns2": f"p4m2{tag}", "h1": f"hm1{tag}", "h2": f"hm2{tag}", "s1": f"sm1{tag}", "s2": f"sm2{tag}"}
    for i, (addr, mac, peer, peer_mac) in ((1, ("10.0.1.1/16", MAC1, "10.0.2.2", MAC2)), (2, ("10.0.2.2/16", MAC2, "10.0.1.1", MAC1))):
        ns, h, s = n[f"ns{i}"], n[f"h{i}"], n[f"s{i}"]
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", h, "type", "veth", "peer", "name", s)
        sh("sysctl", "-qw", f"net.ipv6.conf.{s}.disable_ipv6=1")
        sh("ip", "link", "set", h, "netns", ns)
        nsx(ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
        nsx(ns, "ip", "link", "set", "lo", "up")
        nsx(ns, "ip", "link", "set", h, "address", mac)
        nsx(ns, "ip", "addr", "add", addr, "dev", h)
        nsx(ns, "ip", "link", "set", h, "up")
        nsx(ns, "ip", "neigh", "replace", peer, "lladdr", peer_mac, "dev", h)
        sh("ip", "link", "set", s, "up")
    yield n
    for i in (1, 2):
        subprocess.run(["ip", "link", "del", n[f"s{i}"]], capture_output=True)
        subprocess.run(["ip", "netns", "del", n[f"ns{i}"]], capture_output=True)


class Switch:
    def __init__(self, p4sec_bin, fwd, net, mode, tmp_path, *extra):
        env = dict(os.environ)
        env.pop("P4SEC_NO_MMAP", None)
        env.pop("P4SEC_NO_GRO", None)
        env.pop("P4SEC_UDP_GRO", None)
        if mode == "no-mmap":
            env["P4SEC_NO_MMAP"] = "1"
        if mode == "mmap-no-gro":
            env["P4SEC_NO_GRO"] = "1"
        if mode == "mmap-udp-gro":
            env["P4SEC_UDP_GRO"] = "1"
        self.mport = free_port()
        self.log = tmp_path / "switch.log"
        self.p = subprocess.Popen([str(p4sec_bin), "switch", "--program", str(fwd), "--grpc", f"127.0.0.1:{free_port()}",
                                   "--metrics", f"127.0.0.1:{self.mport}", "--port", f"1={net['s1']}", "--port", f"2={net['s2']}",
                                   *map(str, extra)], stderr=open(self.log, "w"), env=env)
        deadline = time.time() + 20
        while "P4Runtime (device" not in self.text():
            assert self.p.poll() is None, self.text()
            assert time.time() < deadline, self.text()
            time.sleep(0.1)
        time.sleep(0.3)
        want = "one recvmsg/send per frame" if mode == "no-mmap" else "memory-mapped rings"
        for s in ("s1", "s2"):
            assert f"interface `{net[s]}` ({want}" in self.text(), self.text()

    def text(self):
        return self.log.read_text()

    def metrics(self):
        body = urllib.request.urlopen(f"http://127.0.0.1:{self.mport}/metrics", timeout=10).read().decode()
        out = {}
        for line in body.splitlines():
            if line and not line.startswith("#"):
                k, v = line.rsplit(" ", 1)
                out[k] = int(float(v))
        return out

    def port(self, m, what, n, iface):
        return m[f'p4sec_port_{what}_total{{port="{n}",iface="{iface}"}}']

    def close(self):
        self.p.terminate()
        self.p.wait(timeout=10)
        assert "panicked" not in self.text(), self.text()


@pytest.fixture
def switch(p4sec_bin, fwd, net, tmp_path):
    made = []

    def start(mode, *extra):
        s = Switch(p4sec_bin, fwd, net, mode, tmp_path, *extra)
        made.append(s)
        return s
    yield start
    for s in made:
        s.close()


UDP_RECV = r"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
s.bind(("0.0.0.0", 4242)); s.settimeout(5)
print("ready", flush=True)
got = []
try:
    while len(got) < int(sys.argv[1]):
        got.append(s.recv(65536))
except socket.timeout:
    pass
for d in got:
    print(d.hex(), flush=True)
"""

UDP_SEND = r"""
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i, n in enumerate(map(int, sys.argv[2].split(","))):
    s.sendto(bytes([i & 0xff]) * n, (sys.argv[1], 4242))
    time.sleep(0.001)
"""


def udp_through(net, sizes):
    """Datagrams of these sizes from h1's UDP socket to h2's: what h2 received (its kernel drops datagrams with
    a wrong checksum)."""
    rx = subprocess.Popen(["ip", "netns", "exec", net["ns2"], sys.executable, "-c", UDP_RECV, str(len(sizes))],
                          stdout=subprocess.PIPE, text=True)
    assert rx.stdout.readline().strip() == "ready"
    nsx(net["ns1"], sys.executable, "-c", UDP_SEND, "10.0.2.2", ",".join(map(str, sizes)))
    got = [bytes.fromhex(line.strip()) for line in rx.stdout if line.strip()]
    rx.wait(timeout=20)
    return got


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("workers", [1, 2])
def test_udp_from_host_stacks_is_forwarded_with_checksums_completed(switch, net, mode, workers):
    sw = switch(mode, "--workers", workers)
    sizes = [1 + (i * 37) % 1472 for i in range(300)]
    got = udp_through(net, sizes)
    assert len(got) == len(sizes), f"received {len(got)} of {len(sizes)} datagrams"
    assert got == [bytes([i & 0xff]) * n for i, n in enumerate(sizes)]
    time.sleep(0.3)
    m = sw.metrics()
    assert sw.port(m, "rx_packets", 1, net["s1"]) >= len(sizes)
    assert sw.port(m, "tx_packets", 2, net["s2"]) >= len(sizes)
    assert sw.port(m, "tx_errors", 1, net["s1"]) == 0 and sw.port(m, "tx_errors", 2, net["s2"]) == 0


TCP_SERVER = r"""
import hashlib, socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 5001)); s.listen(1); s.settimeout(30)
print("ready", flush=True)
c, _ = s.accept(); c.settimeout(30)
h, n = hashlib.sha256(), 0
while True:
    d = c.recv(1 << 16)
    if not d:
        break
    h.update(d); n += len(d)
c.sendall(b"done")
print(n, h.hexdigest(), flush=True)
"""

TCP_CLIENT = r"""
import socket, sys
data = bytes.fromhex(sys.argv[2]) * int(sys.argv[3])
c = socket.create_connection((sys.argv[1], 5001), timeout=30)
c.sendall(data); c.shutdown(socket.SHUT_WR)
assert c.recv(16) == b"done"
"""


@pytest.mark.parametrize("mode", MODES)
def test_tcp_stream_through_the_switch(switch, net, mode):
    """8 MB over TCP (segmentation offload off on the hosts, checksum offload on): every byte arrives."""
    for i in (1, 2):
        subprocess.run(["ip", "netns", "exec", net[f"ns{i}"], "ethtool", "-K", net[f"h{i}"], "tso", "off", "gso", "off"], capture_output=True)
    switch(mode)
    chunk, reps = os.urandom(4096), 2048
    srv = subprocess.Popen(["ip", "netns", "exec", net["ns2"], sys.executable, "-c", TCP_SERVER], stdout=subprocess.PIPE, text=True)
    assert srv.stdout.readline().strip() == "ready"
    nsx(net["ns1"], sys.executable, "-c", TCP_CLIENT, "10.0.2.2", chunk.hex(), str(reps))
    n, digest = srv.stdout.readline().split()
    srv.wait(timeout=30)
    assert int(n) == len(chunk) * reps and digest == hashlib.sha256(chunk * reps).hexdigest()


@pytest.mark.parametrize("mode", ["mmap", "mmap-no-gro"])
def test_tcp_segments_are_joined_on_transmit(switch, net, mode):
    """The hosts send MSS-sized segments (segmentation offload off); the switch joins the consecutive segments of
    the stream that one batch sends to port 2 into GSO super-frames (P4SEC_NO_GRO=1: it does not), which h2's
    kernel takes whole: every byte arrives, segments count as transmitted frames, super-frames are counted."""
    for i in (1, 2):
        subprocess.run(["ip", "netns", "exec", net[f"ns{i}"], "ethtool", "-K", net[f"h{i}"], "tso", "off", "gso", "off"], capture_output=True)
    sw = switch(mode)
    joined = "TCP segments of a stream joined into GSO super-frames on transmit"
    assert (joined in sw.text()) == (mode == "mmap"), sw.text()
    chunk, reps = os.urandom(4096), 2048
    srv = subprocess.Popen(["ip", "netns", "exec", net["ns2"], sys.executable, "-c", TCP_SERVER], stdout=subprocess.PIPE, text=True)
    assert srv.stdout.readline().strip() == "ready"
    nsx(net["ns1"], sys.executable, "-c", TCP_CLIENT, "10.0.2.2", chunk.hex(), str(reps))
    n, digest = srv.stdout.readline().split()
    srv.wait(timeout=30)
    assert int(n) == len(chunk) * reps and digest == hashlib.sha256(chunk * reps).hexdigest()
    time.sleep(0.3)
    m = sw.metrics()
    supers = m[f'p4sec_port_tx_gso_frames_total{{port="2",iface="{net["s2"]}"}}']
    assert (supers > 0) == (mode == "mmap"), supers
    # every segment counts as a frame sent: at least the 8 MB in MSS-sized segments
    assert sw.port(m, "tx_packets", 2, net["s2"]) >= len(chunk) * reps // 1448
    assert sw.port(m, "tx_errors", 2, net["s2"]) == 0


UDP_GSO_SEND = r"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_UDP, 103, 1400)     # UDP_SEGMENT: one send, datagrams of 1400 bytes (the last shorter)
for i in range(int(sys.argv[2])):
    s.sendto(bytes([i & 0xff]) * (1400 * 20 + 77), (sys.argv[1], 4242))
"""


@pytest.mark.parametrize("mode", ["mmap", "mmap-udp-gro"])
def test_udp_datagrams_are_joined_on_transmit_when_asked(switch, net, mode):
    """h1 sends UDP with segmentation offload (UDP_SEGMENT: one super-frame of 21 datagrams per send); the switch cuts
    them into datagrams for the pipeline and, with P4SEC_UDP_GRO=1, joins those that one batch sends to port 2 into
    UDP GSO super-frames again, which h2's kernel cuts for its socket: every datagram arrives intact, in order, and the
    super-frames are counted (without it: none)."""
    sw = switch(mode)
    joined = "UDP datagrams of a flow joined into GSO super-frames on transmit"
    assert (joined in sw.text()) == (mode == "mmap-udp-gro"), sw.text()
    sends = 10
    rx = subprocess.Popen(["ip", "netns", "exec", net["ns2"], sys.executable, "-c", UDP_RECV, str(sends * 21)],
                          stdout=subprocess.PIPE, text=True)
    assert rx.stdout.readline().strip() == "ready"
    nsx(net["ns1"], sys.executable, "-c", UDP_GSO_SEND, "10.0.2.2", str(sends))
    got = [bytes.fromhex(line.strip()) for line in rx.stdout if line.strip()]
    rx.wait(timeout=20)
    want = [bytes([i]) * (1400 if k < 20 else 77) for i in range(sends) for k in range(21)]
    assert got == want, f"received {len(got)} of {len(want)}"
    time.sleep(0.3)
    m = sw.metrics()
    assert m[f'p4sec_port_rx_gso_frames_total{{port="1",iface="{net["s1"]}"}}'] > 0, "h1 sent no super-frame"
    supers = m[f'p4sec_port_tx_gso_frames_total{{port="2",iface="{net["s2"]}"}}']
    assert (supers > 0) == (mode == "mmap-udp-gro"), supers
    assert sw.port(m, "tx_packets", 2, net["s2"]) == len(want)
    assert sw.port(m, "tx_errors", 2, net["s2"]) == 0


TCP_SERVER6 = TCP_SERVER.replace("socket.socket()", "socket.socket(socket.AF_INET6)").replace('("0.0.0.0", 5001)', '("::", 5001)')


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("family", ["ipv4", "ipv6"])
def test_tcp_with_segmentation_and_checksum_offload_on(switch, net, mode, family):
    """TCP with the hosts' offloads on (TSO/GSO and checksum offload, a veth's defaults): the hosts hand the
    switch super-frames of up to 64 KiB with the checksum left to offload. With PACKET_VNET_HDR the switch
    learns their segment size and cuts them into MTU-sized frames (checksums computed) before the pipeline;
    every byte arrives intact, and the metrics show that super-frames were received and segmented."""
    for i in (1, 2):
        nsx(net[f"ns{i}"], "ethtool", "-K", net[f"h{i}"], "tso", "on", "gso", "on", "tx", "on")
        out = subprocess.run(["ip", "netns", "exec", net[f"ns{i}"], "ethtool", "-k", net[f"h{i}"]], capture_output=True, text=True, check=True).stdout
        assert "tcp-segmentation-offload: on" in out and "tx-checksumming: on" in out, out
    dst = "10.0.2.2"
    if family == "ipv6":
        dst = "fd00::2:2"
        for i, (addr, peer, peer_mac) in ((1, ("fd00::1:1", "fd00::2:2", MAC2)), (2, ("fd00::2:2", "fd00::1:1", MAC1))):
            ns, h = net[f"ns{i}"], net[f"h{i}"]
            nsx(ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=0", f"net.ipv6.conf.{h}.disable_ipv6=0")
            nsx(ns, "ip", "-6", "addr", "add", f"{addr}/64", "dev", h, "nodad")
            nsx(ns, "ip", "-6", "neigh", "replace", peer, "lladdr", peer_mac, "dev", h)
    sw = switch(mode)
    chunk, reps = os.urandom(4096), 2048
    srv = subprocess.Popen(["ip", "netns", "exec", net["ns2"], sys.executable, "-c", TCP_SERVER6 if family == "ipv6" else TCP_SERVER],
                           stdout=subprocess.PIPE, text=True)
    assert srv.stdout.readline().strip() == "ready"
    nsx(net["ns1"], sys.executable, "-c", TCP_CLIENT, dst, chunk.hex(), str(reps))
    n, digest = srv.stdout.readline().split()
    srv.wait(timeout=30)
    assert int(n) == len(chunk) * reps and digest == hashlib.sha256(chunk * reps).hexdigest()
    m = sw.metrics()
    gso = m[f'p4sec_port_rx_gso_frames_total{{port="1",iface="{net["s1"]}"}}']
    assert gso > 0, "no super-frame reached the switch: the test did not exercise segmentation"
    assert sw.port(m, "tx_errors", 2, net["s2"]) == 0


@pytest.mark.parametrize("mode", MODES)
def test_frames_larger_than_a_ring_slot_arrive_whole(switch, net, mode):
    """With an MTU of 20000 a frame does not fit a receive slot (at most 16 KiB): it comes through the socket."""
    for i in (1, 2):
        nsx(net[f"ns{i}"], "ip", "link", "set", net[f"h{i}"], "mtu", "20000")
        sh("ip", "link", "set", net[f"s{i}"], "mtu", "20000")
    sw = switch(mode)
    sizes = [19000, 100, 16000, 9000, 19972, 1400]
    got = udp_through(net, sizes)
    assert got == [bytes([i & 0xff]) * n for i, n in enumerate(sizes)]
    m = sw.metrics()
    assert sw.port(m, "tx_errors", 1, net["s1"]) == 0 and sw.port(m, "tx_errors", 2, net["s2"]) == 0


@pytest.mark.parametrize("mode", MODES)
def test_frames_larger_than_the_mtu_are_counted_as_errors(switch, net, mode):
    """s2 takes at most 1000-byte packets: larger ones cannot be sent and count as port 2 errors."""
    sh("ip", "link", "set", net["s2"], "mtu", "1000")
    sw = switch(mode)
    sizes = [1200, 100, 1400, 200]
    got = udp_through(net, sizes)
    assert got == [bytes([1]) * 100, bytes([3]) * 200]
    m = sw.metrics()
    assert sw.port(m, "rx_packets", 1, net["s1"]) >= 4
    assert sw.port(m, "tx_packets", 2, net["s2"]) == 2
    assert sw.port(m, "tx_errors", 2, net["s2"]) == 2
    # the MTU is looked at again: once raised, large frames go through
    sh("ip", "link", "set", net["s2"], "mtu", "1500")
    time.sleep(1.2)
    assert udp_through(net, [1400]) == [bytes([0]) * 1400]


SEND_TAGGED = r"""
import sys
from scapy.all import Ether, Dot1Q, IP, UDP, Raw, sendp
f = Ether(dst=sys.argv[2], src=sys.argv[3]) / Dot1Q(vlan=7, prio=3) / IP(src="10.0.1.1", dst="10.0.2.2") / UDP(sport=9, dport=4242) / Raw(b"tagged")
sendp([f, Ether(bytes(f)[:12] + bytes(f)[16:])], iface=sys.argv[1], verbose=False)
"""


@pytest.mark.parametrize("mode", MODES)
def test_vlan_tags_reach_the_pipeline(switch, net, mode, tmp_path):
    """The kernel takes the 802.1Q tag out of a received frame (and reports it beside it): the switch puts it
    back, so the pipeline (and --pcap-dir) sees the frame as it was on the wire."""
    cap = tmp_path / "cap"
    switch(mode, "--pcap-dir", cap)
    nsx(net["ns1"], sys.executable, "-c", SEND_TAGGED, net["h1"], MAC2, MAC1)
    time.sleep(0.5)
    frames = [f for f in rdpcap(str(cap / "port1-in.pcap")) if UDP in f and f[UDP].dport == 4242]
    assert len(frames) == 2, [f.summary() for f in frames]
    tagged, plain = frames
    assert Dot1Q in tagged and tagged[Dot1Q].vlan == 7 and tagged[Dot1Q].prio == 3 and bytes(tagged[Raw]) == b"tagged"
    assert Dot1Q not in plain and plain[IP].dst == "10.0.2.2"
    out = [f for f in rdpcap(str(cap / "port2-out.pcap")) if UDP in f and f[UDP].dport == 4242]
    assert len(out) == 2 and bytes(out[0]) == bytes(tagged), "port_fwd passes the tagged frame unchanged"
    assert out[1][IP].ttl == plain[IP].ttl - 1


UDP_SEND_PORTS = r"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(int(sys.argv[2])):
    s.sendto(bytes([i]) * 100, (sys.argv[1], 4242 + i % 2))
"""


@pytest.mark.parametrize("mode", MODES)
def test_frames_an_egress_filter_drops_are_errors_and_the_rest_go_out(switch, net, mode):
    """An nftables egress filter on s2 drops every datagram to port 4243 as the switch sends it (the kernel reports ENOBUFS):
    those count as port 2 errors, and the datagrams to 4242 sent in the same batches still arrive."""
    table = f"p4sec_{net['s2']}"
    sh("nft", "add", "table", "netdev", table)
    try:
        sh("nft", "add", "chain", "netdev", table, "out", f"{{ type filter hook egress device {net['s2']} priority 0; }}")
        sh("nft", "add", "rule", "netdev", table, "out", "udp", "dport", "4243", "drop")
        egress_filter_drops(switch, net, mode)
    finally:
        subprocess.run(["nft", "delete", "table", "netdev", table], capture_output=True)


def egress_filter_drops(switch, net, mode):
    sw = switch(mode, "--log", "debug")
    n = 200
    rx = subprocess.Popen(["ip", "netns", "exec", net["ns2"], sys.executable, "-c", UDP_RECV, str(n // 2)], stdout=subprocess.PIPE, text=True)
    assert rx.stdout.readline().strip() == "ready"
    nsx(net["ns1"], sys.executable, "-c", UDP_SEND_PORTS, "10.0.2.2", str(n))
    got = [bytes.fromhex(line.strip()) for line in rx.stdout if line.strip()]
    rx.wait(timeout=20)
    assert got == [bytes([i]) * 100 for i in range(0, n, 2)]
    m = sw.metrics()
    assert sw.port(m, "rx_packets", 1, net["s1"]) >= n
    assert sw.port(m, "tx_packets", 2, net["s2"]) == n // 2
    assert sw.port(m, "tx_errors", 2, net["s2"]) == n // 2
    assert "No buffer space available" in sw.text()


@pytest.mark.parametrize("mode", MODES)
def test_a_burst_of_large_frames_queued_while_the_switch_is_busy_arrives_whole(switch, net, mode):
    """Frames the socket queues itself (all of them without a ring; with one, those larger than a slot, as TSO
    super-frames are) are bounded by its receive buffer. The switch is stopped while 60 frames of 19,000 bytes
    (1.1 MB) arrive, then resumed: every one must come out whole (at the kernel's default buffer about six
    fit, the rest arrived cut to the slot and were lost)."""
    for i in (1, 2):
        nsx(net[f"ns{i}"], "ip", "link", "set", net[f"h{i}"], "mtu", "20000")
        sh("ip", "link", "set", net[f"s{i}"], "mtu", "20000")
    sw = switch(mode)
    sizes = [19000 - i for i in range(60)]
    rx = subprocess.Popen(["ip", "netns", "exec", net["ns2"], sys.executable, "-c", UDP_RECV, str(len(sizes))],
                          stdout=subprocess.PIPE, text=True)
    assert rx.stdout.readline().strip() == "ready"
    os.kill(sw.p.pid, signal.SIGSTOP)
    try:
        nsx(net["ns1"], sys.executable, "-c", UDP_SEND, "10.0.2.2", ",".join(map(str, sizes)))
    finally:
        os.kill(sw.p.pid, signal.SIGCONT)
    got = [bytes.fromhex(line.strip()) for line in rx.stdout if line.strip()]
    rx.wait(timeout=20)
    assert len(got) == len(sizes), f"{len(got)} of {len(sizes)} frames arrived"
    assert got == [bytes([i & 0xff]) * n for i, n in enumerate(sizes)]


FLOW_RECV = r"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 23)
s.bind(("0.0.0.0", 4242)); s.settimeout(3)
print("ready", flush=True)
n = 0
try:
    while n < int(sys.argv[1]):
        d, (_, sport) = s.recvfrom(2048)
        print(sport, int.from_bytes(d[:4], "big"), flush=True)
        n += 1
except socket.timeout:
    pass
"""

FLOW_SEND = r"""
import socket, sys, time
flows, per_flow = int(sys.argv[2]), int(sys.argv[3])
socks = []
for k in range(flows):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", 20000 + k))
    socks.append(s)
for i in range(per_flow):
    for s in socks:
        s.sendto(i.to_bytes(4, "big") + bytes(60), (sys.argv[1], 4242))
    if i % 16 == 15:
        time.sleep(0.002)
"""


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_per_flow_order_is_kept_whatever_the_worker_count(switch, net, workers):
    """Datagrams of 16 flows (source ports) interleaved, in bursts: with 1, 2 or 3 workers (each with its own
    socket of a PACKET_FANOUT group per port) every flow's datagrams arrive complete and in the order sent, and
    the per-worker counters show how the frames were spread."""
    sw = switch("mmap", "--workers", workers)
    flows, per_flow = 16, 200
    rx = subprocess.Popen(["ip", "netns", "exec", net["ns2"], sys.executable, "-c", FLOW_RECV, str(flows * per_flow)],
                          stdout=subprocess.PIPE, text=True)
    assert rx.stdout.readline().strip() == "ready"
    nsx(net["ns1"], sys.executable, "-c", FLOW_SEND, "10.0.2.2", str(flows), str(per_flow))
    seen = {}
    for line in rx.stdout:
        sport, seq = map(int, line.split())
        seen.setdefault(sport, []).append(seq)
    rx.wait(timeout=20)
    assert sorted(seen) == [20000 + k for k in range(flows)]
    for sport, seqs in seen.items():
        assert seqs == list(range(per_flow)), f"flow from port {sport}: {len(seqs)} datagrams, first out of order at " \
            f"{next((i for i, (a, b) in enumerate(zip(seqs, seqs[1:])) if b <= a), None)}"
    # per-worker counters: one series per worker, together all the frames; the flows are spread over the workers
    m = sw.metrics()
    packets = [m[f'p4sec_worker_packets_total{{worker="{i}"}}'] for i in range(workers)]
    batches = [m[f'p4sec_worker_batches_total{{worker="{i}"}}'] for i in range(workers)]
    assert f'p4sec_worker_packets_total{{worker="{workers}"}}' not in m
    assert sum(packets) >= flows * per_flow and all(b <= p for b, p in zip(batches, packets))
    if workers > 1:
        assert sum(p > 0 for p in packets) >= 2, packets
