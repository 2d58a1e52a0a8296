"""Site-to-site VPN end to end: two p4sec switches running programs/ipsec_gateway.p4, programmed by the
p4sec controller over P4Runtime (SAs through the esp_sad extern), hosts in network namespaces. Traffic
crosses the WAN link as ESP, arrives intact, and keeps flowing across a make-before-break rekey."""
import os
import subprocess
import sys
import uuid

import pytest

from ctlrig import gateway_pair
from p4sec.infra.netns import sh

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")

TOOL = r"""
import sys, time
from scapy.all import Ether, IP, UDP, Raw, sendp, AsyncSniffer
role, iface, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
if role == "send":
    for i in range(n):
        sendp(Ether(dst="02:00:00:00:00:01") / IP(src="10.1.0.1", dst="10.2.0.2", ttl=64, id=i)
              / UDP(sport=4242, dport=4242) / Raw(b"secret-payload-%03d" % i), iface=iface, verbose=False)
else:
    f = "udp port 4242" if role == "sniff" else "ip proto 50"
    s = AsyncSniffer(iface=iface, filter=f, count=n, timeout=8)
    s.start(); time.sleep(0.5); print("ready", flush=True); s.join()
    for p in s.results or []:
        print(bytes(p).hex(), flush=True)
"""


@pytest.fixture
def net():
    t = uuid.uuid4().hex[:5]
    names = {"ns1": f"v1{t}", "ns2": f"v2{t}", "h1": f"h1{t}", "a1": f"a1{t}", "h2": f"h2{t}", "b1": f"b1{t}",
             "wa": f"wa{t}", "wb": f"wb{t}"}
    sh("ip", "netns", "add", names["ns1"])
    sh("ip", "netns", "add", names["ns2"])
    for host, sw, ns in (("h1", "a1", "ns1"), ("h2", "b1", "ns2")):
        sh("ip", "link", "add", names[host], "type", "veth", "peer", "name", names[sw])
        sh("ip", "link", "set", names[host], "netns", names[ns])
        sh("ip", "netns", "exec", names[ns], "ip", "link", "set", names[host], "up")
        sh("ip", "link", "set", names[sw], "up")
    sh("ip", "link", "add", names["wa"], "type", "veth", "peer", "name", names["wb"])
    for k in ("wa", "wb", "a1", "b1"):
        sh("ip", "link", "set", names[k], "up")
        subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{names[k]}.disable_ipv6=1"], capture_output=True)
    yield names
    for k in ("a1", "b1", "wa"):
        subprocess.run(["ip", "link", "del", names[k]], capture_output=True)
    for k in ("ns1", "ns2"):
        subprocess.run(["ip", "netns", "del", names[k]], capture_output=True)


def tool(ns, role, iface, n):
    cmd = [sys.executable, "-c", TOOL, role, iface, str(n)]
    if ns:
        cmd = ["ip", "netns", "exec", ns] + cmd
    return cmd


def send_and_capture(net, n):
    sniff = subprocess.Popen(tool(net["ns2"], "sniff", net["h2"], n), stdout=subprocess.PIPE, text=True)
    wan = subprocess.Popen(tool(None, "esp", net["wb"], n), stdout=subprocess.PIPE, text=True)
    assert sniff.stdout.readline().strip() == "ready"
    assert wan.stdout.readline().strip() == "ready"
    subprocess.run(tool(net["ns1"], "send", net["h1"], n), check=True, timeout=30)
    got = [bytes.fromhex(x.strip()) for x in sniff.stdout if x.strip()]
    esp = [bytes.fromhex(x.strip()) for x in wan.stdout if x.strip()]
    sniff.wait(timeout=15)
    wan.wait(timeout=15)
    return got, esp


def test_site_to_site_vpn_with_rekey(p4sec_bin, net, tmp_path):
    with gateway_pair(p4sec_bin, net, tmp_path) as (ctl, sa, sb):
        spis = ctl.connect("A", "B")

        got, esp = send_and_capture(net, 3)
        assert len(got) == 3, f"host 2 received {len(got)} of 3"
        assert all(b"secret-payload" in g for g in got)
        assert len(esp) == 3, "the WAN link carried ESP"
        for e in esp:
            assert e[14 + 9] == 50
            assert b"secret-payload" not in e, "encrypted on the WAN"
            assert int.from_bytes(e[34:38], "big") == spis[("A", "B")][0]

        new = ctl.rekey("A-B")
        got, esp = send_and_capture(net, 3)
        assert len(got) == 3, "traffic flows after the rekey"
        assert {int.from_bytes(e[34:38], "big") for e in esp} == {new[("A", "B")][0]}, "new SPI in use"
