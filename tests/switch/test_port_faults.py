"""Interface faults under a running switch, for packet-socket and AF_XDP ports on veths in namespaces: both
switch ends taken down and up again (forwarding resumes), the egress link down under traffic (frames counted as
transmit errors, none as sent), the egress interface's MTU lowered (larger frames are transmit errors), and the egress
interface deleted (reported once; frames routed to it are counted as transmit errors, not as sent; the
switch keeps receiving)."""
import os
import subprocess
import time

import pytest
from p4sec.infra.netns import sh

from swrig import metrics_of, start_router, wait_for, topo  # noqa: F401 (fixture)
from test_steady_alloc import send

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces and XDP")


@pytest.mark.parametrize("kind", ["afpacket", "xdp"])
def test_down_up_mtu_and_deleted_interface(p4sec_bin, topo, tmp_path, kind):
    (ns1, h1, s1), (ns2, h2, s2) = topo
    pre = "xdp:" if kind == "xdp" else ""
    sw, mport, logf = start_router(p4sec_bin, tmp_path, ["--port", f"1={pre}{s1}", "--port", f"2={pre}{s2}"])
    rx, tx = f'p4sec_port_rx_packets_total{{port="1",iface="{pre}{s1}"}}', f'p4sec_port_tx_packets_total{{port="2",iface="{pre}{s2}"}}'
    err = f'p4sec_port_tx_errors_total{{port="2",iface="{pre}{s2}"}}'

    def burst(n, seed):
        """Send `n` frames (60 to 1514 bytes) and wait for port 1 to have them all; the metrics then."""
        before = metrics_of(mport)[rx]
        send(ns1, h1, n, seed)
        wait_for(lambda: metrics_of(mport)[rx] >= before + n, f"{n} frames received on port 1")
        time.sleep(0.3)
        return metrics_of(mport)

    try:
        if kind == "xdp":
            assert "(AF_XDP" in logf.read_text(), logf.read_text()
        m0 = burst(800, 1)
        assert m0[tx] >= 800 and m0[err] == 0
        for s in (s1, s2):
            sh("ip", "link", "set", s, "down")
        time.sleep(1.5)
        for s in (s1, s2):
            sh("ip", "link", "set", s, "up")
        time.sleep(1.5)
        m1 = burst(800, 2)
        assert m1[tx] - m0[tx] == 800, "forwarding resumes after down/up"
        # frames routed to a port whose link is down are dropped and counted as errors, not as sent
        sh("ip", "link", "set", s2, "down")
        time.sleep(0.5)
        md = burst(800, 5)
        assert md[tx] == m1[tx] and md[err] - m1[err] == 800, (md[tx] - m1[tx], md[err] - m1[err])
        sh("ip", "link", "set", s2, "up")
        time.sleep(1.5)
        m1 = burst(800, 6)
        assert m1[tx] - md[tx] == 800, "forwarding resumes when the link is back"
        # a smaller MTU on the egress interface (the switch looks once a second): the frames of 1500 and 1514
        # bytes (a quarter of them) no longer fit and are transmit errors, the others go out
        sh("ip", "link", "set", s2, "mtu", "1400")
        time.sleep(1.5)
        m2 = burst(800, 3)
        assert (m2[tx] - m1[tx], m2[err] - m1[err]) == (600, 200)
        sh("ip", "link", "del", s2)
        wait_for(lambda: f"port 2 (`{s2}`) is gone" in logf.read_text(), "the gone message", timeout=10)
        m3 = burst(800, 4)
        assert m3[tx] == m2[tx], "nothing counted as sent to a deleted interface"
        assert m3[err] - m2[err] >= 800, "frames routed to it are transmit errors"
        assert sw.poll() is None
        assert logf.read_text().count("is gone") == 1
    finally:
        sw.terminate()
        sw.wait(timeout=10)
        subprocess.run(["ip", "link", "del", s2], capture_output=True)
