"""A change of the worker count keeps per-flow order (root only): while a paced sender streams 8 UDP flows through
the IPv4 router between two veth pairs, the switch is restarted with 1, then 2, then 3 workers, then 1 again (the
worker count is fixed for a switch's life, so a change is a restart on the same interfaces). Frames sent while no
switch runs are lost; every flow's datagrams that arrive are in the order sent, none twice, and every switch
instance forwarded its share."""
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
from p4sec.infra.netns import ns as nsx, sh

from swrig import metrics_of, start_router

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")

SEND = r"""
import socket, sys, time
dst, flows, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
socks = []
for f in range(flows):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", 20000 + f))
    socks.append(s)
end = time.time() + seconds
seq = 0
while time.time() < end:  # (until the test ends it)
    for s in socks:
        s.sendto(seq.to_bytes(4, "big") + bytes(60), (dst, 4242))
    seq += 1
    if seq % 4 == 0:
        time.sleep(0.001)
"""

RECV = r"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, 33, 16 << 20)  # SO_RCVBUFFORCE
s.bind(("0.0.0.0", 4242))
s.settimeout(30)
print("ready", flush=True)
try:
    while True:
        d, (_, sport) = s.recvfrom(2048)
        s.settimeout(4)
        print(sport, int.from_bytes(d[:4], "big"), flush=True)
except socket.timeout:
    pass
"""


@pytest.fixture
def net():
    """ns1 (10.0.1.1/24) -- s1 | switch | s2 -- ns2 (10.0.2.2/24, MAC 02:00:00:00:02:02); static neighbours, no IPv6."""
    tag = uuid.uuid4().hex[:6]
    n = {"ns1": f"p4w1{tag}", "ns2": f"p4w2{tag}", "s1": f"sw1{tag}", "s2": f"sw2{tag}"}
    for i, addr, mac, gw, other in ((1, "10.0.1.1/24", "02:00:00:00:01:01", "10.0.1.254", "10.0.2.0/24"),
                                    (2, "10.0.2.2/24", "02:00:00:00:02:02", "10.0.2.254", "10.0.1.0/24")):
        ns, h, s = n[f"ns{i}"], f"hw{i}{tag}", n[f"s{i}"]
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", h, "numtxqueues", "4", "numrxqueues", "4", "type", "veth", "peer", "name", s, "numtxqueues", "4", "numrxqueues", "4")
        sh("sysctl", "-qw", f"net.ipv6.conf.{s}.disable_ipv6=1")
        sh("ip", "link", "set", h, "netns", ns)
        nsx(ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
        nsx(ns, "ip", "link", "set", h, "address", mac)
        nsx(ns, "ip", "addr", "add", addr, "dev", h)
        nsx(ns, "ip", "link", "set", h, "up")
        nsx(ns, "ip", "neigh", "add", gw, "lladdr", "02:00:00:00:00:01", "dev", h)
        nsx(ns, "ip", "route", "add", other, "via", gw)
        sh("ip", "link", "set", s, "up")
    yield n
    for i in (1, 2):
        subprocess.run(["ip", "link", "del", n[f"s{i}"]], capture_output=True)
        subprocess.run(["ip", "netns", "del", n[f"ns{i}"]], capture_output=True)


@ROOT_ONLY
def test_worker_count_change_keeps_flow_order(p4sec_bin, net, tmp_path):
    flows, counts = 8, [1, 2, 3, 1]
    rx = subprocess.Popen(["ip", "netns", "exec", net["ns2"], sys.executable, "-c", RECV], stdout=subprocess.PIPE, text=True)
    assert rx.stdout.readline().strip() == "ready"
    tx = None
    forwarded = []
    try:
        for k, workers in enumerate(counts):
            d = tmp_path / f"run{k}"
            d.mkdir()
            sw, mport, log = start_router(p4sec_bin, d, ["--port", f"1={net['s1']}", "--port", f"2={net['s2']}"], workers=workers)
            try:
                if tx is None:
                    tx = subprocess.Popen(["ip", "netns", "exec", net["ns1"], sys.executable, "-c", SEND, "10.0.2.2", str(flows), "60"],
                                          stdout=subprocess.PIPE, text=True)
                time.sleep(1.5)
                m = metrics_of(mport)
                forwarded.append((workers, m[f'p4sec_port_tx_packets_total{{port="2",iface="{net["s2"]}"}}'],
                                  [m[f'p4sec_worker_packets_total{{worker="{i}"}}'] for i in range(workers)]))
            finally:
                sw.send_signal(signal.SIGTERM)
                rc = sw.wait(timeout=10)
            assert rc == 0, log.read_text()[-3000:]
    finally:
        if tx is not None and tx.poll() is None:
            tx.kill()
    out, _ = rx.communicate(timeout=60)
    seen = {}
    for line in out.splitlines():
        sport, seq = map(int, line.split())
        seen.setdefault(sport, []).append(seq)
    print(f"per instance (workers, frames forwarded, per worker): {forwarded}; "
          f"received per flow: {[len(v) for v in seen.values()]}")
    assert sorted(seen) == [20000 + f for f in range(flows)]
    for sport, seqs in seen.items():
        bad = next((i for i, (a, b) in enumerate(zip(seqs, seqs[1:])) if b <= a), None)
        assert bad is None, f"flow from port {sport}: out of order (or twice) at {bad}: {seqs[max(0, bad - 3):bad + 4]}"
    for workers, frames, per_worker in forwarded:
        assert frames > 0, f"the instance with {workers} workers forwarded nothing"
        if workers > 1:
            assert sum(p > 0 for p in per_worker) >= 2, f"{workers} workers: the flows were not spread: {per_worker}"
