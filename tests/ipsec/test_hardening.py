"""Policy checks on both sides of the tunnel (issue 23), with scapy-crafted packets between namespaces (the
H1 - A = WAN = B - H2 setup of test_site_to_site):
- a clear packet injected on a gateway's WAN port with a source in that gateway's own site and a destination in
  the peer's site is not tunnelled into the peer site (it used to be encrypted, decrypted and delivered), and is
  counted; legit traffic still flows both ways;
- ESP under a valid SA whose inner source is outside the SA's selectors is dropped and counted as
  SELECTOR_MISMATCH (site-to-site, and host-to-site with the SA a road warrior holds), while the same crafted ESP
  with an inner source inside the selectors is delivered."""
import os
import subprocess
import sys

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.ipsec import ESP, SecurityAssociation
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from scapy.sendrecv import sendp

from ctlrig import gateway_pair
from p4sec.ipsec import gateway as gwp
from test_site_to_site import net  # noqa: F401 (fixture)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")

SNIFF = r"""
import sys, time
from scapy.all import AsyncSniffer
iface, n, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
s = AsyncSniffer(iface=iface, filter="udp port 4242", count=n, timeout=timeout)
s.start(); time.sleep(0.5); print("ready", flush=True); s.join()
for p in s.results or []:
    print(bytes(p).hex(), flush=True)
"""

SEND = r"""
import sys
from scapy.all import Ether, IP, UDP, Raw, sendp
iface, src, dst, tag = sys.argv[1:5]
sendp(Ether(dst="02:00:00:00:00:01") / IP(src=src, dst=dst, ttl=64) / UDP(sport=4242, dport=4242) / Raw(tag.encode()),
      iface=iface, verbose=False)
"""


class Sniffer:
    """Frames to UDP port 4242 seen on `iface` in namespace `ns` within `timeout` seconds (at most `n`)."""

    def __init__(self, ns, iface, n=1, timeout=3.0):
        self.p = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", SNIFF, iface, str(n), str(timeout)],
                                  stdout=subprocess.PIPE, text=True)
        assert self.p.stdout.readline().strip() == "ready"

    def frames(self):
        got = [bytes.fromhex(x.strip()) for x in self.p.stdout if x.strip()]
        self.p.wait(timeout=15)
        return got


def send_clear(ns, iface, src, dst, tag):
    cmd = [sys.executable, "-c", SEND, iface, src, dst, tag]
    subprocess.run((["ip", "netns", "exec", ns] if ns else []) + cmd, check=True, timeout=30)


@pytest.fixture
def gws(p4sec_bin, net, tmp_path):  # noqa: F811 (the net fixture)
    with gateway_pair(p4sec_bin, net, tmp_path) as (ctl, sa, sb):
        yield ctl, sa, sb


def legit_both_ways(net):  # noqa: F811
    """H1 -> H2 and H2 -> H1 through the tunnel: both delivered."""
    for ns_from, h_from, ns_to, h_to, src, dst in ((net["ns1"], net["h1"], net["ns2"], net["h2"], "10.1.0.1", "10.2.0.2"),
                                                   (net["ns2"], net["h2"], net["ns1"], net["h1"], "10.2.0.2", "10.1.0.1")):
        sniff = Sniffer(ns_to, h_to, 1, 15)
        send_clear(ns_from, h_from, src, dst, "legit")
        got = sniff.frames()
        assert len(got) == 1 and b"legit" in got[0], f"{src} -> {dst}: legit traffic not delivered"


def test_spoofed_clear_traffic_on_the_wan_port_is_not_tunnelled(gws, net):  # noqa: F811
    ctl, sa, sb = gws
    ctl.connect("A", "B")
    # injected on A's WAN port (out of wb, the other end of A's WAN link): source in A's own site, destination
    # in B's site; A's protect policy matches it, but it came from the WAN
    sniff = Sniffer(net["ns2"], net["h2"], 1, 10)
    for _ in range(3):
        send_clear(None, net["wb"], "10.1.0.7", "10.2.0.2", "spoofed")
    got = sniff.frames()
    assert got == [], "a spoofed clear packet from A's WAN reached a host in B's site"
    assert sa.counter_read(gwp.WAN_DROPS, gwp.WAN_SPOOFED)[0] == 3
    # and the other way (B's WAN port, source in B's site, destination in A's)
    sniff = Sniffer(net["ns1"], net["h1"], 1, 10)
    send_clear(None, net["wa"], "10.2.0.9", "10.1.0.1", "spoofed")
    assert sniff.frames() == []
    assert sb.counter_read(gwp.WAN_DROPS, gwp.WAN_SPOOFED)[0] == 1
    legit_both_ways(net)


def esp_frame(cfg, spi, seq, outer_src, outer_dst, inner_src, inner_dst, tag):
    """An ESP frame under the SA `cfg` (AES-GCM-128, as the controller configured it) with sequence number `seq`."""
    sa = SecurityAssociation(ESP, spi=spi, crypt_algo="AES-GCM", crypt_key=bytes(cfg["enc_key"]),
                             tunnel_header=IP(src=outer_src, dst=outer_dst), esn_en=True, esn=0, seq_num=seq)
    inner = IP(src=inner_src, dst=inner_dst, ttl=64) / UDP(sport=4242, dport=4242) / Raw(tag.encode())
    return Ether(dst="02:00:00:00:00:01") / sa.encrypt(inner)


def test_esp_outside_the_selectors_is_dropped_and_counted(gws, net):  # noqa: F811
    ctl, sa, sb = gws
    spis = ctl.connect("A", "B")
    spi = spis[("A", "B")][0]
    cfg = ctl.keys(spi)
    in_slot = next(s["in_slot"] for s in ctl.sas() if s["spi"] == spi)     # the SA's slot on B
    # whoever holds A->B's keys sends ESP with an inner source outside A's site (10.9.0.1): into B's WAN port
    sniff = Sniffer(net["ns2"], net["h2"], 1, 10)
    sendp(esp_frame(cfg, spi, 500, "192.0.2.1", "198.51.100.1", "10.9.0.1", "10.2.0.2", "forged"), iface=net["wa"], verbose=False)
    assert sniff.frames() == [], "ESP with an inner source outside the SA's selectors was delivered"
    assert sb.counter_read(gwp.ESP_STATUS, gwp.SELECTOR_MISMATCH)[0] == 1
    assert sb.counter_read(gwp.SA_COUNTERS, in_slot * 16 + gwp.SELECTOR_MISMATCH)[0] == 1
    # the same crafted ESP with an inner source inside them is delivered: the drop above was the selectors'
    sniff = Sniffer(net["ns2"], net["h2"], 1, 15)
    sendp(esp_frame(cfg, spi, 501, "192.0.2.1", "198.51.100.1", "10.1.0.1", "10.2.0.2", "inside"), iface=net["wa"], verbose=False)
    got = sniff.frames()
    assert len(got) == 1 and b"inside" in got[0]
    assert sb.counter_read(gwp.ESP_STATUS, gwp.SELECTOR_MISMATCH)[0] == 1
    legit_both_ways(net)


def test_road_warrior_esp_outside_its_inner_address_is_dropped(gws, net):  # noqa: F811
    ctl, sa, sb = gws
    # a host-to-site tunnel for a road warrior at 192.0.2.77 (on B's WAN side) with inner address 10.99.0.5
    up = ctl.host_up("alice", "office", "B", "192.0.2.77", "02:00:00:00:0a:02", "10.99.0.5")
    ctl.host_ready("alice", "office")
    cfg = up["outbound"]      # host -> gateway: the SA the host (the agent) sends with
    spi = cfg["spi"]
    sniff = Sniffer(net["ns2"], net["h2"], 1, 10)
    sendp(esp_frame(cfg, spi, 1, "192.0.2.77", "198.51.100.1", "10.2.0.99", "10.2.0.2", "as-another"), iface=net["wa"], verbose=False)
    sendp(esp_frame(cfg, spi, 2, "192.0.2.77", "198.51.100.1", "10.99.0.6", "10.2.0.2", "as-another"), iface=net["wa"], verbose=False)
    assert sniff.frames() == [], "a road warrior sent as another address"
    assert sb.counter_read(gwp.ESP_STATUS, gwp.SELECTOR_MISMATCH)[0] == 2
    sniff = Sniffer(net["ns2"], net["h2"], 1, 15)
    sendp(esp_frame(cfg, spi, 3, "192.0.2.77", "198.51.100.1", "10.99.0.5", "10.2.0.2", "as-itself"), iface=net["wa"], verbose=False)
    got = sniff.frames()
    assert len(got) == 1 and b"as-itself" in got[0]
