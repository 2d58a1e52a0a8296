"""PTF tests for programs/ipv4_router.p4 on a running p4sec switch (ports 1 and 2 are veth pairs; the switch is
programmed by tests/ptf/test_ptf.py): routes 10.0.2.0/24 out of port 2 and 10.0.1.0/24 out of port 1."""
import ptf
import ptf.testutils as tu
from ptf.base_tests import BaseTest
from scapy.layers.inet import IP, UDP, TCP
from scapy.layers.l2 import Ether, ARP

SW_MAC = "02:00:00:00:00:fe"
H1_MAC, H2_MAC = "02:00:00:00:00:01", "02:00:00:00:00:02"


class RouterBase(BaseTest):
    def setUp(self):
        BaseTest.setUp(self)
        self.dataplane = ptf.dataplane_instance
        self.dataplane.flush()


class Forwarding(RouterBase):
    """Both directions, several sizes and protocols: MACs rewritten, TTL decremented, checksum right."""

    def runTest(self):
        for size in (64, 200, 1000, 1500):
            for l4 in (UDP(sport=1234, dport=80), TCP(sport=1234, dport=80)):
                pkt = Ether(src=H1_MAC, dst=SW_MAC) / IP(src="10.0.1.1", dst="10.0.2.2", ttl=64) / l4
                pkt = pkt / ("x" * max(0, size - len(pkt)))
                exp = pkt.copy()
                exp[Ether].src, exp[Ether].dst = SW_MAC, H2_MAC
                exp[IP].ttl = 63
                del exp[IP].chksum
                exp = Ether(bytes(exp))
                tu.send_packet(self, 1, bytes(pkt))
                tu.verify_packet(self, bytes(exp), 2)
        back = Ether(src=H2_MAC, dst=SW_MAC) / IP(src="10.0.2.2", dst="10.0.1.1", ttl=5) / UDP() / "reply"
        exp = back.copy()
        exp[Ether].src, exp[Ether].dst = SW_MAC, H1_MAC
        exp[IP].ttl = 4
        del exp[IP].chksum
        tu.send_packet(self, 2, bytes(back))
        tu.verify_packet(self, bytes(Ether(bytes(exp))), 1)
        tu.verify_no_other_packets(self)


class Drops(RouterBase):
    """No route, TTL 1, a bad IPv4 checksum, ARP and truncated frames: nothing comes out."""

    def runTest(self):
        no_route = Ether(src=H1_MAC, dst=SW_MAC) / IP(src="10.0.1.1", dst="192.168.9.9") / UDP()
        ttl1 = Ether(src=H1_MAC, dst=SW_MAC) / IP(src="10.0.1.1", dst="10.0.2.2", ttl=1) / UDP()
        bad = Ether(src=H1_MAC, dst=SW_MAC) / IP(src="10.0.1.1", dst="10.0.2.2", chksum=0x1234) / UDP()
        arp = Ether(src=H1_MAC, dst="ff:ff:ff:ff:ff:ff") / ARP(pdst="10.0.1.254")
        for p in (no_route, ttl1, bad, arp):
            tu.send_packet(self, 1, bytes(p))
        tu.send_packet(self, 1, bytes(Ether(src=H1_MAC, dst=SW_MAC, type=0x0800)) + b"\x45\x00")
        tu.verify_no_other_packets(self, timeout=1)
        # the switch still forwards afterwards
        ok = Ether(src=H1_MAC, dst=SW_MAC) / IP(src="10.0.1.1", dst="10.0.2.2", ttl=64) / UDP()
        exp = ok.copy()
        exp[Ether].src, exp[Ether].dst = SW_MAC, H2_MAC
        exp[IP].ttl = 63
        del exp[IP].chksum
        tu.send_packet(self, 1, bytes(ok))
        tu.verify_packet(self, bytes(Ether(bytes(exp))), 2)
