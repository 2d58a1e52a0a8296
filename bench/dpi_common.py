"""URL filtering benchmark (`python -m bench.dpi`): its constants, errors, and the network it runs on
(namespaces M/C/S and their links, link statistics)."""
import os
import pathlib
import socket
import struct
import uuid
from p4sec.infra.netns import in_netns, ns, sh


ROOT = pathlib.Path(__file__).resolve().parents[1]
SYSTEMS = ("netfilter", "fast", "recirc")
LABEL = {"netfilter": "netfilter (iptables -m string)", "fast": "p4sec fast (dfa_matcher)",
         "recirc": "p4sec recirculating (DeeP4R)"}
DFA_TABLE_SIZE = 1 << 20          # UfrIngress.dfa in programs/url_filter.p4
GOOD_HOSTS = ["www.example.org", "static.example.net", "docs.python.org", "intranet.example"]
SRC_IP, DST_IP = "10.0.1.1", "10.0.2.2"
SEQ_LAT, SEQ_BLOCK, SEQ_GOOD, SEQ_LOAD = 0x50000000, 0x60000000, 0x70000000, 0x10000000
NICE = -10
SO_TIMESTAMPNS = 35
ETH_P_ALL = 0x0003


class BenchError(Exception):
    pass


class LinkStats:
    """The rx packet counter of an interface in another namespace, over rtnetlink (RTM_GETLINK, IFLA_STATS64)."""

    def __init__(self, netns, iface):
        with in_netns(netns):
            self.index = socket.if_nametoindex(iface)
            self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)  # NETLINK_ROUTE
        self.sock.bind((0, 0))
        self.seq = 0

    def rx_packets(self):
        self.seq += 1
        req = struct.pack("=IHHII", 32, 18, 1, self.seq, 0) + struct.pack("=BxHiII", 0, 0, self.index, 0, 0)
        self.sock.send(req)
        while True:
            data = self.sock.recv(65536)
            _len, typ, _flags, seq, _pid = struct.unpack_from("=IHHII", data)
            if seq != self.seq:
                continue
            if typ != 16:  # RTM_NEWLINK
                raise BenchError(f"rtnetlink: unexpected reply type {typ}")
            off = 32
            while off + 4 <= len(data):
                alen, atype = struct.unpack_from("=HH", data, off)
                if alen < 4:
                    break
                if atype == 23:  # IFLA_STATS64: rx_packets first
                    return struct.unpack_from("=Q", data, off + 4)[0]
                off += (alen + 3) & ~3
            raise BenchError("rtnetlink: no IFLA_STATS64")

    def close(self):
        self.sock.close()


class Topology:
    """A (h1) -- M (s1 | s2) -- B (h2); no addresses in A and B, so B never answers the requests."""

    def __init__(self):
        tag = uuid.uuid4().hex[:5]
        self.a, self.m, self.b = f"bdA{tag}", f"bdM{tag}", f"bdB{tag}"
        self.h1, self.s1, self.s2, self.h2 = f"bh1{tag}", f"bs1{tag}", f"bs2{tag}", f"bh2{tag}"
        self.created = []
        self.cpus = sorted(os.sched_getaffinity(0))
        # with two or more cores: the sender (this process) on the first, the forwarding work of the system under
        # test (the p4sec switch process, or the kernel's softirq via RPS) on the second
        self.fwd_cpu = self.cpus[1] if len(self.cpus) > 1 else None
        try:
            self._create()
        except BaseException:
            self.close()
            raise

    def _create(self):
        for n in (self.a, self.m, self.b):
            sh("ip", "netns", "add", n)
            self.created.append(n)
            ns(n, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
            ns(n, "ip", "link", "set", "lo", "up")
        sh("ip", "link", "add", self.h1, "netns", self.a, "type", "veth", "peer", "name", self.s1, "netns", self.m)
        sh("ip", "link", "add", self.h2, "netns", self.b, "type", "veth", "peer", "name", self.s2, "netns", self.m)
        for n, i in ((self.a, self.h1), (self.m, self.s1), (self.m, self.s2), (self.b, self.h2)):
            ns(n, "ip", "link", "set", i, "up")
        self.mac = {i: ns(n, "cat", f"/sys/class/net/{i}/address").stdout.strip()
                    for n, i in ((self.a, self.h1), (self.m, self.s1), (self.m, self.s2), (self.b, self.h2))}

    def kernel_forwarding(self, on):
        if on:
            ns(self.m, "ip", "addr", "add", "10.0.1.254/24", "dev", self.s1)
            ns(self.m, "ip", "addr", "add", "10.0.2.254/24", "dev", self.s2)
            ns(self.m, "ip", "neigh", "replace", DST_IP, "lladdr", self.mac[self.h2], "dev", self.s2, "nud", "permanent")
            ns(self.m, "sysctl", "-qw", "net.ipv4.ip_forward=1")
            if self.fwd_cpu is not None:
                self.rps(format(1 << self.fwd_cpu, "x"))
        else:
            if self.fwd_cpu is not None:
                self.rps("0")
            ns(self.m, "sysctl", "-qw", "net.ipv4.ip_forward=0", check=False)
            ns(self.m, "ip", "addr", "flush", "dev", self.s1, check=False)
            ns(self.m, "ip", "addr", "flush", "dev", self.s2, check=False)

    def rps(self, mask):
        """Steer s1's receive processing (netfilter's work) to the CPUs in `mask` (receive packet steering)."""
        ns(self.m, "sh", "-c", f"echo {mask} > /sys/class/net/{self.s1}/queues/rx-0/rps_cpus")

    def close(self):
        for n in self.created:
            sh("ip", "netns", "del", n, check=False)
