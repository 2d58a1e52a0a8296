"""Egress backpressure: a link slower than the traffic sent into it builds the switch's egress queue, as on
BMv2, instead of the kernel dropping frames the switch never sees.

How congestion is produced: no queue rate is set in the switch (no `--queue-rate`, no `set_queue_rate`); the
switch's egress interface gets a token-bucket qdisc (`tc qdisc ... tbf rate 1mbit`, its limit far above what is
in flight), so the link drains ~90 frames of 1400 bytes a second while a burst of 600 comes at once
(tests/switch/test_mininet_tutorial.py produces the same with mininet's own link shaping, htb). Once 96 frames
the port handed to the kernel wait in the qdisc, the port is blocked and its packets wait in its queue
(`--queue-depth 2=20`), tail-dropped past it: tests/switch/programs/queue_ecn.p4 copies enq_qdepth into each
frame and marks ECN at depth 10, so the frames show the queue. Every frame sent is either received or counted
as a tail drop: none is lost in the kernel or the ring."""
import os
import struct
import subprocess
import sys

import pytest

from conftest import ROOT
from swrig import drop_topo, make_topo, metrics_of
from test_p4runtime import free_port
from test_queues import TOOL, parse

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")

# the queue tests' tool, its frames padded to 1400 bytes (the program keeps the bytes after its headers)
BIG = TOOL.replace("return bytes.fromhex(\"020000000202\" \"020000000101\" \"0800\") + ip + udp",
                   "return (bytes.fromhex(\"020000000202\" \"020000000101\" \"0800\") + ip + udp).ljust(1400, b\"p\")")


def exchange(ns_send, h_send, ns_recv, h_recv, n, want, idle):
    recv = subprocess.Popen(["ip", "netns", "exec", ns_recv, sys.executable, "-c", BIG, "recv", h_recv, str(want), str(idle)],
                            stdout=subprocess.PIPE, text=True)
    assert recv.stdout.readline().strip() == "ready"
    subprocess.run(["ip", "netns", "exec", ns_send, sys.executable, "-c", BIG, "send", h_send, str(n), "0", "1"],
                   check=True, timeout=60)
    got = [parse(line.strip()) for line in recv.stdout if line.strip()]
    recv.wait(timeout=120)
    return got


@pytest.fixture
def topo():
    links = make_topo("bp")
    yield links
    drop_topo(links)


def test_a_slow_link_fills_the_egress_queue_and_marks_ecn(p4sec_bin, topo, tmp_path):
    assert "ljust(1400" in BIG
    out = tmp_path / "queue_ecn"
    subprocess.run([str(p4sec_bin), "compile", str(ROOT / "tests" / "switch" / "programs" / "queue_ecn.p4"), "-o", str(out)],
                   check=True, capture_output=True)
    (ns1, h1, s1), (ns2, h2, s2) = topo
    subprocess.run(["tc", "qdisc", "add", "dev", s2, "root", "tbf", "rate", "1mbit", "burst", "3000", "limit", "20000000"],
                   check=True)
    mport = free_port()
    log = tmp_path / "switch.log"
    sw = subprocess.Popen([str(p4sec_bin), "switch", "--program", str(out), "--grpc", f"127.0.0.1:{free_port()}",
                           "--port", f"1={s1}", "--port", f"2={s2}", "--metrics", f"127.0.0.1:{mport}",
                           "--queue-depth", "2=20", "--log", "debug"], stderr=open(log, "w"))
    try:
        import time
        deadline = time.time() + 20
        while "P4Runtime" not in log.read_text() and time.time() < deadline:
            assert sw.poll() is None, log.read_text()
            time.sleep(0.1)
        n = 600
        got = exchange(ns1, h1, ns2, h2, n, n, 4)
        m = metrics_of(mport)
        drops = m['p4sec_port_queue_tail_drops_total{port="2"}']
        depths = [p["enq_qdepth"] for p in got]
        assert max(depths) >= 15, f"no queue built up behind the slow link: {depths}"
        for p in got:
            assert p["ecn"] == (3 if p["enq_qdepth"] >= 10 else 1), p
        assert sum(1 for p in got if p["ecn"] == 3) >= 5
        assert drops > 0, "the queue never overflowed"
        # none lost unseen: every frame arrived or was dropped at the tail of the queue
        assert len(got) + drops == n, (len(got), drops, m.get('p4sec_port_tx_errors_total{port="2"}'))
        ids = [p["id"] for p in got]
        assert ids == sorted(ids), "frames overtook each other"
        # frames waited in the switch's queue (deq_timedelta); how long varies from run to run (10 to 200 ms
        # measured): the kernel frees the transmit ring's frames in bursts, and the queue empties into it then
        waited = max(p["deq_timedelta"] for p in got)
        assert waited >= 1_000, f"no frame waited in the switch's queue ({waited} µs at the most)"
        assert "the link refuses frames" in log.read_text()
    finally:
        sw.terminate()
        sw.wait(timeout=10)
