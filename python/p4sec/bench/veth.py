"""Forwarding throughput between two veth pairs in network namespaces: the p4sec switch running the IPv4
router program against the Linux kernel forwarding the same traffic between the same namespaces, in one run.

    python -m p4sec.bench.veth [--seconds S] [--sizes 64,1500] [--json FILE] [--p4sec PATH]

Topology: namespace A (h1, 10.0.1.1) -- veth -- namespace M (s1 | s2) -- veth -- namespace B (h2, 10.0.2.2).
In namespace M either the kernel routes (ip_forward=1, addresses on s1/s2) or `p4sec switch` owns s1/s2
(ip_forward=0). A sender in A writes pre-built frames to h1 through an AF_PACKET socket as fast as it can;
the figure is what arrives at h2 (its rx counter), per second. Needs root.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import time
import uuid

from ..netns import free_port, ns, sh  # noqa: F401 (free_port: used by tests)

ROOT = pathlib.Path(__file__).resolve().parents[3]

SENDER = r"""
import socket, sys, time
iface, frame, seconds = sys.argv[1], bytes.fromhex(sys.argv[2]), float(sys.argv[3])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((iface, 0))
n, end = 0, time.time() + seconds
while time.time() < end:
    for _ in range(256):
        try:
            s.send(frame)
            n += 1
        except OSError:
            pass
print(n)
"""

CONTROL = r"""
import pathlib, sys
from p4sec.runtime import Switch, ip, mac
addr, out, dst_mac, src_mac = sys.argv[1:5]
sw = Switch(addr)
sw.push(pathlib.Path(out))
sw.table_insert("RouterIngress.ipv4_lpm", {"hdr.ipv4.dst_addr": ("lpm", ip("10.0.2.0"), 24)}, "RouterIngress.set_nhop",
                {"dst_mac": mac(dst_mac), "src_mac": mac(src_mac), "port": 2})
sw.close()
print("ok")
"""




def mac_of(name, iface):
    return pathlib.Path(f"/sys/class/net/{iface}/address").read_text().strip() if name is None else ns(name, "cat", f"/sys/class/net/{iface}/address").stdout.strip()


def rx(name, iface):
    return int(ns(name, "cat", f"/sys/class/net/{iface}/statistics/rx_packets").stdout)



class Topology:
    def __init__(self):
        tag = uuid.uuid4().hex[:5]
        self.a, self.m, self.b = f"pbA{tag}", f"pbM{tag}", f"pbB{tag}"
        self.h1, self.s1, self.s2, self.h2 = f"h1{tag}", f"s1{tag}", f"s2{tag}", f"h2{tag}"
        for n in (self.a, self.m, self.b):
            sh("ip", "netns", "add", n)
            ns(n, "ip", "link", "set", "lo", "up")
        sh("ip", "link", "add", self.h1, "netns", self.a, "type", "veth", "peer", "name", self.s1, "netns", self.m)
        sh("ip", "link", "add", self.h2, "netns", self.b, "type", "veth", "peer", "name", self.s2, "netns", self.m)
        for n, i in ((self.a, self.h1), (self.m, self.s1), (self.m, self.s2), (self.b, self.h2)):
            ns(n, "ip", "link", "set", i, "up")
        ns(self.a, "ip", "addr", "add", "10.0.1.1/24", "dev", self.h1)
        ns(self.b, "ip", "addr", "add", "10.0.2.2/24", "dev", self.h2)
        self.mac = {i: mac_of(n, i) for n, i in ((self.a, self.h1), (self.m, self.s1), (self.m, self.s2), (self.b, self.h2))}

    def kernel(self, on):
        if on:
            ns(self.m, "ip", "addr", "add", "10.0.1.254/24", "dev", self.s1)
            ns(self.m, "ip", "addr", "add", "10.0.2.254/24", "dev", self.s2)
            ns(self.m, "ip", "neigh", "replace", "10.0.2.2", "lladdr", self.mac[self.h2], "dev", self.s2)
            ns(self.m, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        else:
            ns(self.m, "sysctl", "-qw", "net.ipv4.ip_forward=0")
            ns(self.m, "ip", "addr", "flush", "dev", self.s1)
            ns(self.m, "ip", "addr", "flush", "dev", self.s2)

    def close(self):
        for n in (self.a, self.m, self.b):
            sh("ip", "netns", "del", n, check=False)


def frame(t, size):
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw
    base = Ether(dst=t.mac[t.s1], src=t.mac[t.h1]) / IP(src="10.0.1.1", dst="10.0.2.2", ttl=64) / UDP(sport=4242, dport=9)
    return bytes(base / Raw(bytes(max(0, size - len(base)))))


def measure(t, size, seconds):
    before = rx(t.b, t.h2)
    r = ns(t.a, sys.executable, "-c", SENDER, t.h1, frame(t, size).hex(), str(seconds))
    time.sleep(0.2)
    got = rx(t.b, t.h2) - before
    return int(r.stdout.strip()) / seconds, got / seconds


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--sizes", default="64,1500")
    ap.add_argument("--json")
    ap.add_argument("--p4sec", default=str(ROOT / "target" / "release" / "p4sec"))
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        sys.exit("bench.veth: needs root (network namespaces)")
    sizes = [int(x) for x in args.sizes.split(",")]
    out = pathlib.Path(f"/tmp/p4sec-bench-veth-{os.getpid()}")
    subprocess.run([args.p4sec, "compile", str(ROOT / "programs" / "ipv4_router.p4"), "-o", str(out)], check=True, capture_output=True)
    t = Topology()
    rows = []
    try:
        t.kernel(True)
        kern = {s: measure(t, s, args.seconds) for s in sizes}
        t.kernel(False)
        port = free_port()
        sw = subprocess.Popen(["ip", "netns", "exec", t.m, args.p4sec, "switch", "--grpc", f"127.0.0.1:{port}",
                               "--port", f"1={t.s1}", "--port", f"2={t.s2}"], stderr=subprocess.DEVNULL)
        try:
            time.sleep(0.5)
            r = ns(t.m, sys.executable, "-c", CONTROL, f"127.0.0.1:{port}", str(out), t.mac[t.h2], t.mac[t.s2])
            assert r.stdout.strip() == "ok", r.stderr
            ours = {s: measure(t, s, args.seconds) for s in sizes}
        finally:
            sw.terminate()
            sw.wait(timeout=10)
        for s in sizes:
            rows.append({"size": s, "offered_pps_kernel_run": kern[s][0], "kernel_pps": kern[s][1],
                         "offered_pps_p4sec_run": ours[s][0], "p4sec_pps": ours[s][1]})
    finally:
        t.close()
    print(f"forwarding between veth pairs in namespaces, {args.seconds:g} s per cell (one sender process)")
    print(f"  {'frame':>6} {'offered':>12} {'kernel':>12} {'offered':>12} {'p4sec':>12} {'p4sec/kernel':>13}")
    for r in rows:
        ratio = r["p4sec_pps"] / r["kernel_pps"] if r["kernel_pps"] else 0.0
        print(f"  {r['size']:>5}B {r['offered_pps_kernel_run']/1e3:>10.0f}k {r['kernel_pps']/1e3:>10.0f}k "
              f"{r['offered_pps_p4sec_run']/1e3:>10.0f}k {r['p4sec_pps']/1e3:>10.0f}k {ratio:>13.2f}")
    print("  (k = thousand packets per second; 'offered' is what the sender wrote in that run)")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"benchmark": "veth_forwarding", "seconds": args.seconds, "rows": rows}, indent=2))
    return rows


if __name__ == "__main__":
    main()
