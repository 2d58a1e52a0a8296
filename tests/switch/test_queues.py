"""The traffic manager with real packets: the p4sec switch on veth pairs whose host ends live in network
namespaces made by the test, running tests/switch/programs/queue_ecn.p4 (ECN marking from enq_qdepth, the
queue and time fields copied into a header). A port drained at 100 packets per second, set at run time
through the control endpoint by a program named simple_switch_CLI (as BMv2 users' scripts do), gets a burst
far above that: the queue builds up, marks appear, the queue's tail drops are counted, and the timestamps
move in microseconds. No tight timing is asserted: the machine may be busy."""
import os
import struct
import subprocess
import sys
import time

import pytest

from conftest import ROOT
from swrig import drop_topo, make_topo, metrics_of
from test_p4runtime import free_port

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")

# sender and receiver: raw AF_PACKET sockets (a burst faster than any drain rate set here)
TOOL = r"""
import socket, struct, sys, time
role, iface = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.bind((iface, 0))

def csum(b):
    t = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    t = (t & 0xffff) + (t >> 16)
    t = (t & 0xffff) + (t >> 16)
    return ~t & 0xffff

def frame(i, tos=0x01):
    qmon = bytes(28)
    udp = struct.pack("!HHHH", 4242, 4242, 8 + len(qmon), 0) + qmon
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, tos, 20 + len(udp), i, 0, 64, 17, 0, bytes([10, 0, 1, 1]), bytes([10, 0, 2, 2]))
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    return bytes.fromhex("020000000202" "020000000101" "0800") + ip + udp

if role == "recv":
    want, idle = int(sys.argv[3]), float(sys.argv[4])
    s.settimeout(idle)
    print("ready", flush=True)
    got = 0
    while got < want:
        try:
            f = s.recv(2048)
        except socket.timeout:
            break
        if len(f) >= 14 + 20 + 8 + 28 and f[12:14] == b"\x08\x00" and f[23] == 17 and f[36:38] == b"\x10\x92":
            print(f.hex(), flush=True)
            got += 1
else:
    # send ARGV[3] frames, ARGV[4] seconds apart, ids from ARGV[5]; ARGV[6] (optional): the TOS bytes to
    # take in turn, comma-separated hex (default ECN-capable, DSCP 0)
    n, gap, first = int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
    tos = [int(t, 16) for t in sys.argv[6].split(",")] if len(sys.argv) > 6 else [0x01]
    for i in range(n):
        s.send(frame(first + i, tos[i % len(tos)]))
        if gap:
            time.sleep(gap)
"""


def parse(hexframe):
    f = bytes.fromhex(hexframe)
    ecn = f[15] & 3
    prio = f[15] >> 5
    ident = struct.unpack("!H", f[18:20])[0]
    enq_q, deq_q, deq_td, enq_ts = struct.unpack("!IIII", f[42:58])
    its = int.from_bytes(f[58:64], "big")
    ets = int.from_bytes(f[64:70], "big")
    return {"id": ident, "ecn": ecn, "prio": prio, "enq_qdepth": enq_q, "deq_qdepth": deq_q, "deq_timedelta": deq_td, "enq_ts": enq_ts,
            "its": its, "ets": ets}


@pytest.fixture
def topo():
    links = make_topo("q")
    yield links
    drop_topo(links)


def exchange(ns_send, h_send, ns_recv, h_recv, n, gap, first, want, idle, tos=None):
    """Send `n` frames `gap` s apart from one namespace (`tos`: TOS bytes taken in turn); the frames received in
    the other (at most `want`, until `idle` s pass without one)."""
    recv = subprocess.Popen(["ip", "netns", "exec", ns_recv, sys.executable, "-c", TOOL, "recv", h_recv, str(want), str(idle)],
                            stdout=subprocess.PIPE, text=True)
    assert recv.stdout.readline().strip() == "ready"
    extra = [",".join(f"{t:02x}" for t in tos)] if tos else []
    subprocess.run(["ip", "netns", "exec", ns_send, sys.executable, "-c", TOOL, "send", h_send, str(n), str(gap), str(first),
                    *extra], check=True, timeout=60)
    got = [parse(line.strip()) for line in recv.stdout if line.strip()]
    recv.wait(timeout=60)
    return got


@pytest.mark.parametrize("workers", [1, 2])
def test_congestion_builds_a_queue_marks_ecn_and_timestamps_count_microseconds(p4sec_bin, topo, tmp_path, workers):
    out = tmp_path / "queue_ecn"
    subprocess.run([str(p4sec_bin), "compile", str(ROOT / "tests" / "switch" / "programs" / "queue_ecn.p4"), "-o", str(out)],
                   check=True)
    (ns1, h1, s1), (ns2, h2, s2) = topo
    grpc_port, mport, cport = free_port(), free_port(), free_port()
    log = tmp_path / "switch.log"
    sw = subprocess.Popen([str(p4sec_bin), "switch", "--program", str(out), "--grpc", f"127.0.0.1:{grpc_port}",
                           "--port", f"1={s1}", "--port", f"2={s2}", "--metrics", f"127.0.0.1:{mport}",
                           "--thrift-port", str(cport), "--queue-depth", "2=20", "--workers", str(workers)],
                          stderr=open(log, "w"))
    try:
        deadline = time.time() + 20
        while "control endpoint" not in log.read_text() and time.time() < deadline:
            assert sw.poll() is None, log.read_text()
            time.sleep(0.1)
        assert "control endpoint" in log.read_text(), log.read_text()

        # 1. no rate yet: no queueing; two packets sent 100 ms apart are ~100,000 µs apart
        got = exchange(ns1, h1, ns2, h2, 2, 0.1, 1, 2, 3)
        assert [p["id"] for p in got] == [1, 2]
        for p in got:
            assert p["enq_qdepth"] == 0 and p["deq_qdepth"] == 0 and p["ecn"] == 1
            assert p["ets"] >= p["its"] > 0
            assert p["enq_ts"] == p["its"] & 0xFFFFFFFF
        d = got[1]["its"] - got[0]["its"]
        assert 50_000 <= d <= 2_000_000, f"100 ms apart read {d} µs apart"

        # 2. the drain rate of port 2 set at run time, as BMv2 users do: echo ... | simple_switch_CLI --thrift-port N
        cli = tmp_path / "simple_switch_CLI"
        cli.symlink_to(p4sec_bin)
        r = subprocess.run([str(cli), "--thrift-port", str(cport)], input="set_queue_rate 100 2\n", capture_output=True,
                           text=True, timeout=20)
        assert r.returncode == 0, r.stderr
        r = subprocess.run([str(cli), "--thrift-port", str(cport)], input="set_queue_rate 100 9\nflush_queues\n",
                           capture_output=True, text=True, timeout=20)
        assert r.returncode != 0 and "no port 9" in r.stderr and "unknown command `flush_queues`" in r.stderr, r.stderr

        # 3. a burst of 100 frames into a queue of 20 drained at 100 per second
        n = 100
        got = exchange(ns1, h1, ns2, h2, n, 0, 100, n, 3)
        assert 20 <= len(got) < n, f"received {len(got)} of {n}: the queue should hold 20 plus what drained meanwhile"
        depths = [p["enq_qdepth"] for p in got]
        assert max(depths) >= 15, f"no queue build-up seen: {depths}"
        # ECN: marked exactly where the queue was at or over the program's threshold
        for p in got:
            assert p["ecn"] == (3 if p["enq_qdepth"] >= 10 else 1), p
        assert sum(1 for p in got if p["ecn"] == 3) >= 5
        # FIFO: the order they were sent in; times move forward; waits grow with the queue
        ids = [p["id"] for p in got]
        assert ids == sorted(ids)
        its = [p["its"] for p in got]
        assert its == sorted(its)
        ets = [p["ets"] for p in got]
        assert ets == sorted(ets) and all(p["ets"] >= p["its"] for p in got)
        # the last of a full queue waited for ~20 departures 10 ms apart (~200,000 µs; generous bounds)
        deepest = max(got, key=lambda p: p["enq_qdepth"])
        assert 50_000 <= deepest["deq_timedelta"] <= 20_000_000, deepest
        assert 50_000 <= deepest["ets"] - deepest["its"] <= 20_000_000, deepest
        # drained at about the rate: the receive span of the queued frames is at least ~(count - 1) * 10 ms / 2
        span = got[-1]["ets"] - got[0]["ets"]
        assert span >= (len(got) - 1) * 5_000, f"{len(got)} frames left within {span} µs at 100 per second"

        # 4. the tail drops are counted in the metrics and logged
        m = metrics_of(mport)
        drops = m['p4sec_port_queue_tail_drops_total{port="2"}']
        assert drops == n - len(got), (drops, len(got))
        assert m['p4sec_port_queue_rate_pps{port="2"}'] == 100 and m['p4sec_port_queue_rate_pps{port="1"}'] == 0
        assert m['p4sec_port_queue_depth{port="2"}'] == 20 and m['p4sec_port_queue_depth{port="1"}'] == 64
        deadline = time.time() + 5
        while "dropped at the tail" not in log.read_text() and time.time() < deadline:
            time.sleep(0.2)
        assert "port 2: " in log.read_text() and "dropped at the tail" in log.read_text()
        # the other direction is not rate-limited: no queue there
        back = exchange(ns2, h2, ns1, h1, 3, 0, 500, 3, 3)
        assert len(back) == 3 and all(p["enq_qdepth"] == 0 for p in back)

        # 5. the rate removed again (`set_queue_rate 0`, BMv2's "no limit"): a burst goes through unqueued
        r = subprocess.run([str(cli), "--thrift-port", str(cport)], input="set_queue_rate 0 2\n", capture_output=True,
                           text=True, timeout=20)
        assert r.returncode == 0, r.stderr
        assert metrics_of(mport)['p4sec_port_queue_rate_pps{port="2"}'] == 0
        got = exchange(ns1, h1, ns2, h2, 30, 0, 600, 30, 3)
        assert len(got) == 30 and all(p["enq_qdepth"] == 0 and p["deq_timedelta"] == 0 for p in got), got
        assert metrics_of(mport)['p4sec_port_queue_tail_drops_total{port="2"}'] == drops
    finally:
        sw.terminate()
        sw.wait(timeout=10)


def test_priority_queues_serve_the_higher_class_first(p4sec_bin, topo, tmp_path):
    """`--priority-queues 4`: the program puts a packet in queue `priority` = its DSCP class selector. A burst
    alternating CS0 (priority 0) and CS2 (priority 2) frames into port 2, drained at 100 packets per second,
    fills both queues (each with the port's depth of 10): once the burst is over, every waiting CS2 frame leaves
    before any waiting CS0 frame (strict priority), and within a class the order is kept."""
    out = tmp_path / "queue_ecn"
    subprocess.run([str(p4sec_bin), "compile", str(ROOT / "tests" / "switch" / "programs" / "queue_ecn.p4"), "-o", str(out)],
                   check=True)
    (ns1, h1, s1), (ns2, h2, s2) = topo
    grpc_port, mport = free_port(), free_port()
    log = tmp_path / "switch.log"
    sw = subprocess.Popen([str(p4sec_bin), "switch", "--program", str(out), "--grpc", f"127.0.0.1:{grpc_port}",
                           "--port", f"1={s1}", "--port", f"2={s2}", "--metrics", f"127.0.0.1:{mport}",
                           "--queue-depth", "2=10", "--queue-rate", "2=100", "--priority-queues", "4"],
                          stderr=open(log, "w"))
    try:
        deadline = time.time() + 20
        while "port 2" not in log.read_text() and time.time() < deadline:
            assert sw.poll() is None, log.read_text()
            time.sleep(0.1)
        time.sleep(0.3)
        n = 80
        got = exchange(ns1, h1, ns2, h2, n, 0, 1, n, 3, tos=[0x01, 0x41])
        prios = [p["prio"] for p in got]
        assert set(prios) <= {0, 2}, prios
        hi = [p for p in got if p["prio"] == 2]
        lo = [p for p in got if p["prio"] == 0]
        # each queue held its depth: 10 of each class at least (plus what left during the burst)
        assert len(hi) >= 10 and len(lo) >= 10, (len(hi), len(lo))
        assert len(got) < n, "nothing was dropped: the queues did not fill"
        # the last frames to leave are the CS0 ones that waited: after the last CS2 frame, at least 8 CS0 frames
        last_hi = max(i for i, p in enumerate(got) if p["prio"] == 2)
        assert len(got) - 1 - last_hi >= 8, f"priorities in the order received: {prios}"
        # within a class, FIFO
        for cls in (hi, lo):
            ids = [p["id"] for p in cls]
            assert ids == sorted(ids)
        # enq_qdepth counts the packets of all the port's queues (as BMv2): above one queue's depth, never above
        # the two queues' together
        assert 11 <= max(p["enq_qdepth"] for p in got) <= 20, [p["enq_qdepth"] for p in got]
        m = metrics_of(mport)
        assert m['p4sec_port_queue_tail_drops_total{port="2"}'] == n - len(got)
    finally:
        sw.terminate()
        sw.wait(timeout=10)


def test_queue_flags_are_checked(p4sec_bin):
    for args, msg in [
        (["--queue-rate", "x=5"], "`x` is not a port number"),
        (["--queue-rate", "fast"], "not a rate"),
        (["--queue-depth", "0"], "at least 1 packet"),
        (["--queue-rate", "3=10"], "no port 3"),
        (["--queue-rate", "1=-5"], "0 (unlimited) or more, got -5"),
        (["--queue-rate", "1=inf"], "0 (unlimited) or more, got inf"),
        (["--priority-queues", "9"], "1..8"),
        (["--", "--priority-queues", "x"], "not a number of queues"),
    ]:
        r = subprocess.run([str(p4sec_bin), "switch", "--port", "1=pcap:out=/dev/null"] + args, capture_output=True, text=True,
                           timeout=20)
        assert r.returncode == 2 and msg in r.stderr, (args, r.stderr)
