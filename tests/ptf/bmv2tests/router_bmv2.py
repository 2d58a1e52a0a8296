"""PTF tests of programs/ipv4_router.p4 written for BMv2's simple_switch_grpc (the switch's ports 0 and 1; the
pipeline pushed by each test's setUp through BMv2's device config, entries written over P4Runtime)."""
import socket

import ptf.testutils as tu
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from base_test import P4RuntimeTest

SW = "02:00:00:00:00:fe"
H0, H1 = "02:00:00:00:00:10", "02:00:00:00:00:11"


def mac(s):
    return bytes(int(x, 16) for x in s.split(":"))


class RouterTest(P4RuntimeTest):
    def routes(self):
        for prefix, dmac, port in (("10.0.0.0", H0, 0), ("10.0.1.0", H1, 1)):
            self.table_add("RouterIngress.ipv4_lpm", {"hdr.ipv4.dst_addr": ("lpm", socket.inet_aton(prefix), 24)},
                           "RouterIngress.set_nhop", {"dst_mac": mac(dmac), "src_mac": mac(SW), "port": bytes([0, port])})

    @staticmethod
    def routed(pkt, dmac):
        exp = pkt.copy()
        exp[Ether].src, exp[Ether].dst = SW, dmac
        exp[IP].ttl -= 1
        del exp[IP].chksum
        return bytes(Ether(bytes(exp)))


class Forward(RouterTest):
    """Both directions: MACs rewritten, TTL decremented, the checksum recomputed."""

    def runTest(self):
        self.routes()
        for size in (64, 512, 1500):
            pkt = Ether(src=H0, dst=SW) / IP(src="10.0.0.5", dst="10.0.1.7", ttl=20) / UDP(sport=5, dport=7)
            pkt = pkt / ("z" * max(0, size - len(pkt)))
            tu.send_packet(self, 0, bytes(pkt))
            tu.verify_packet(self, self.routed(pkt, H1), 1)
        back = Ether(src=H1, dst=SW) / IP(src="10.0.1.7", dst="10.0.0.5", ttl=2) / UDP() / "back"
        tu.send_packet(self, 1, bytes(back))
        tu.verify_packet(self, self.routed(back, H0), 0)
        tu.verify_no_other_packets(self)


class Drops(RouterTest):
    """No route and TTL 1 are dropped; the switch forwards afterwards."""

    def runTest(self):
        self.routes()
        tu.send_packet(self, 0, bytes(Ether(src=H0, dst=SW) / IP(src="10.0.0.5", dst="192.0.2.1") / UDP()))
        tu.send_packet(self, 0, bytes(Ether(src=H0, dst=SW) / IP(src="10.0.0.5", dst="10.0.1.7", ttl=1) / UDP()))
        tu.verify_no_other_packets(self, timeout=1)
        ok = Ether(src=H0, dst=SW) / IP(src="10.0.0.5", dst="10.0.1.7", ttl=64) / UDP()
        tu.send_packet(self, 0, bytes(ok))
        tu.verify_packet(self, self.routed(ok, H1), 1)
