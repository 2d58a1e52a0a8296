"""PTF tests for programs/url_filter.p4 (DeeP4R): every inspected packet is cloned (I2E) and the clone
recirculates one payload byte per pass through the DFA tables, while the original recirculates until the
verdict. Blocked names never come out of port 2; other packets come out unchanged, exactly once."""
import ptf
import ptf.testutils as tu
from ptf.base_tests import BaseTest
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.dns import DNS, DNSQR
from scapy.layers.l2 import Ether


def http(host):
    return (Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP(src="10.0.0.1", dst="10.0.0.2") /
            TCP(sport=40000, dport=80, flags="PA", seq=1, ack=1) / f"GET / HTTP/1.1\r\nHost: {host}\r\nAccept: */*\r\n\r\n")


def dns(name):
    return (Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP(src="10.0.0.1", dst="10.0.0.2") /
            UDP(sport=5353, dport=53) / DNS(id=1, rd=1, qd=DNSQR(qname=name)))


class CloneAndRecirculate(BaseTest):
    def setUp(self):
        BaseTest.setUp(self)
        self.dataplane = ptf.dataplane_instance
        self.dataplane.flush()

    def runTest(self):
        for p in (http("evil.com"), http("WWW.EVIL.COM"), dns("x.ads.tracker.net")):
            tu.send_packet(self, 1, bytes(p))
        tu.verify_no_other_packets(self, timeout=1)
        for p in (http("notevil.com"), http("good.example"), dns("tracker.net")):
            tu.send_packet(self, 1, bytes(p))
            tu.verify_packet(self, bytes(p), 2)
        tu.verify_no_other_packets(self, timeout=1)
