"""No heap allocation per frame in the running switch's steady state, on the port kinds a deployment uses
(packet-socket and AF_XDP ports on veths in namespaces, one and two workers, a TAP port): each worker publishes the heap
allocations its thread has made (`p4sec_worker_heap_allocations_total`, counted by the CLI's global
allocator); after a warm-up, tens of thousands more frames of mixed sizes and flows, and the loop's
once-a-second housekeeping (port liveness, MTUs), must not add one.
(crates/switch/tests/no_alloc.rs covers the pipeline's paths in process: ESP, clone and recirculation.)"""
import os
import subprocess
import sys
import time

import pytest

from p4sec.infra.netns import sh
from swrig import metrics_of, start_router, wait_for, topo, topo2  # noqa: F401 (fixtures)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces and XDP")

# `n` frames from a raw packet socket: UDP to 10.0.2.2 (routed out of port 2), 32 flows, sizes 60 to 1514 bytes
SEND = r"""
import socket, struct, sys
iface, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def csum(b):
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff
frames = []
for k, size in enumerate([60, 64, 128, 333, 590, 1024, 1500, 1514]):
    for flow in range(4):
        payload = bytes((i + k) % 251 for i in range(size - 42))
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, size - 14, seed & 0xffff, 0, 64, 17, 0, bytes([10, 0, 1, 1]), bytes([10, 0, 2, 2]))
        ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
        udp = struct.pack("!HHHH", 5000 + 8 * k + flow, 4242, size - 34, 0)
        frames.append(bytes.fromhex("020000000001" "020000000101" "0800") + ip + udp + payload)
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((iface, 0))
for i in range(n):
    s.send(frames[i % len(frames)])
"""


def send(ns, iface, n, seed):
    subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", SEND, iface, str(n), str(seed)], check=True, timeout=120)


def settle(mport, rx, at_least):
    """Wait until port 1's receive counter stops moving (0.5 s unchanged); it must have reached `at_least`
    (frames may be lost on a loaded machine: what matters is that many went through)."""
    last, deadline = -1, time.time() + 30
    while time.time() < deadline:
        now = metrics_of(mport)[rx]
        if now == last:
            break
        last = now
        time.sleep(0.5)
    assert last >= at_least, f"only {last} frames received, {at_least} expected"
    return last


def worker_figures(mport, workers):
    m = metrics_of(mport)
    allocs = [m.get(f'p4sec_worker_heap_allocations_total{{worker="{w}"}}') for w in range(workers)]
    packets = [m[f'p4sec_worker_packets_total{{worker="{w}"}}'] for w in range(workers)]
    return allocs, packets, m


def steady_state(p4sec_bin, links, tmp_path, kind, workers):
    """`kind`: both ports packet sockets (afpacket) or AF_XDP (xdp), or port 1 a TAP device the switch makes
    (moved into h1's namespace and sent into there) and port 2 a packet socket (tap)."""
    (ns1, h1, s1), (ns2, h2, s2) = links
    pre = "xdp:" if kind == "xdp" else ""
    first = f"tap:p4al{s1[-6:]}" if kind == "tap" else f"{pre}{s1}"
    sw, mport, logf = start_router(p4sec_bin, tmp_path, ["--port", f"1={first}", "--port", f"2={pre}{s2}"], workers=workers)
    try:
        log = logf.read_text()
        if kind == "xdp":
            assert "(AF_XDP" in log, f"the ports fell back: {log[-1500:]}"
        if kind == "tap":
            h1 = first[4:]
            sh("ip", "link", "set", h1, "netns", ns1)
            sh("ip", "netns", "exec", ns1, "ip", "link", "set", h1, "up")
        rx = f'p4sec_port_rx_packets_total{{port="1",iface="{first}"}}'
        # warm-up: every buffer, batch size and table path the measured frames will use
        send(ns1, h1, 20000, 1)
        settle(mport, rx, 10000)
        a0, p0, m0 = worker_figures(mport, workers)
        assert all(a is not None for a in a0), f"no allocation figure for every worker: {a0}"
        # three bursts 0.7 s apart: the measured stretch also spans the loop's once-a-second look at its ports
        for burst in range(3):
            if burst:
                time.sleep(0.7)
            send(ns1, h1, 20000, 2 + burst)
        settle(mport, rx, m0[rx] + 30000)
        a1, p1, m1 = worker_figures(mport, workers)
        forwarded = m1[f'p4sec_port_tx_packets_total{{port="2",iface="{pre}{s2}"}}'] - m0[f'p4sec_port_tx_packets_total{{port="2",iface="{pre}{s2}"}}']
        assert forwarded >= 30000, f"only {forwarded} frames forwarded"
        assert sum(p1) - sum(p0) >= 30000
        for w in range(workers):
            assert a1[w] == a0[w], (f"worker {w} made {a1[w] - a0[w]} heap allocations while it ran {p1[w] - p0[w]} "
                                    f"frames through the pipeline ({kind} ports, {workers} worker(s))")
        return p1
    finally:
        sw.terminate()
        sw.wait(timeout=10)


@pytest.mark.parametrize("kind", ["afpacket", "xdp", "tap"])
def test_no_heap_allocation_per_frame_in_steady_state(p4sec_bin, topo, tmp_path, kind):
    steady_state(p4sec_bin, topo, tmp_path, kind, 1)


def test_no_heap_allocation_per_frame_with_two_xdp_workers(p4sec_bin, topo2, tmp_path):
    packets = steady_state(p4sec_bin, topo2, tmp_path, "xdp", 2)
    assert all(p > 0 for p in packets), f"both workers took frames: {packets}"


def test_allocation_figure_counts_a_workers_allocations(p4sec_bin, topo, tmp_path):
    """The figure is a real count: a worker's start-up (its buffers, the engine's per-worker state) shows in it."""
    (ns1, h1, s1), (ns2, h2, s2) = topo
    sw, mport, logf = start_router(p4sec_bin, tmp_path, ["--port", f"1={s1}", "--port", f"2={s2}"])
    try:
        send(ns1, h1, 100, 3)
        wait_for(lambda: metrics_of(mport).get('p4sec_worker_heap_allocations_total{worker="0"}') is not None,
                 "the worker's first batch")
        assert metrics_of(mport)['p4sec_worker_heap_allocations_total{worker="0"}'] > 0
    finally:
        sw.terminate()
        sw.wait(timeout=10)
