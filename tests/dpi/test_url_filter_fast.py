"""programs/url_filter_fast.p4 with the dfa_matcher extern: HTTP Host headers, TLS ClientHello server names
(made by Python's ssl module) and DNS query names; blocked names never pass, others pass unchanged."""
import pathlib
import ssl

from scapy.layers.dns import DNS, DNSQR
from scapy.layers.inet import ICMP, IP, TCP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from p4sec import dpi
from tests.hashing.stf import Stf

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "programs" / "url_filter_fast.p4"
BLOCKLIST = "evil.com\nads.tracker.net\nbücher.example\n"


def client_hello(server_name):
    """The first flight of a real TLS client (Python's ssl module) for this server name."""
    ctx = ssl.create_default_context()
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    conn = ctx.wrap_bio(inc, out, server_hostname=server_name)
    try:
        conn.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


def eth_ip():
    return Ether(dst="02:00:00:00:00:02", src="02:00:00:00:00:01") / IP(src="10.0.0.1", dst="10.0.0.2")


def http(host, path="/"):
    req = f"GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: test\r\nAccept: */*\r\n\r\n".encode()
    return eth_ip() / TCP(sport=40000, dport=80, flags="PA", seq=1, ack=1, options=[("NOP", None), ("NOP", None), ("Timestamp", (1, 2))]) / Raw(req)


def tls(name):
    return eth_ip() / TCP(sport=40001, dport=443, flags="PA", seq=1, ack=1) / Raw(client_hello(name))


def dns(name):
    return eth_ip() / UDP(sport=5353, dport=53) / DNS(rd=1, qd=DNSQR(qname=name))


def setup():
    stf = Stf()
    dfa = dpi.Dfa(dpi.read_list(BLOCKLIST), payload=True)
    stf.add("extern_control UfIngress.blocklist load " + dpi.automaton_json(dfa))
    stf.add("add UfIngress.uf_port sm.ingress_port:1 UfIngress.forward(port:2)")
    return stf


def check(stf, p4sec_bin, tmp_path):
    r = stf.run(p4sec_bin, PROGRAM, tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr


def test_blocked_names_never_pass_and_others_pass_unchanged(p4sec_bin, tmp_path):
    stf = setup()
    blocked = [http("evil.com"), http("www.evil.com"), http("EVIL.COM:8080"), http("x.ads.tracker.net"),
               http("xn--bcher-kva.example"), tls("evil.com"), tls("cdn.evil.com"), tls("ads.tracker.net"),
               dns("evil.com"), dns("a.b.evil.com"), dns("ADS.Tracker.NET")]
    passed = [http("notevil.com"), http("evil.com.example"), http("tracker.net"), http("example.org", "/notevil.com"),
              tls("notevil.com"), tls("evil.community"), dns("good.org"), dns("evil.co"),
              eth_ip() / ICMP() / Raw(b"Host: evil.com\r\n"),                    # not inspected
              eth_ip() / UDP(sport=1, dport=9) / Raw(b"evil.com")]               # not inspected
    for p in blocked:
        stf.packet(1, p)
    for p in passed:
        stf.packet(1, p)
        stf.expect(2, p)
    stf.add(f"check_counter UfIngress.uf_stats(1) packets == {len(blocked)}")
    stf.add(f"check_counter UfIngress.uf_stats(2) packets == 2")
    check(stf, p4sec_bin, tmp_path)


def test_documented_limits(p4sec_bin, tmp_path):
    """What the single-pass scan knowingly does: a name split across two TCP segments is not caught (each
    segment alone holds no listed name); the whole request is scanned, so a listed name standing alone in a
    URL path is blocked too; very long packets are scanned whole."""
    stf = setup()
    stf.packet(1, http("example.org", "/evil.com"))
    req = b"GET / HTTP/1.1\r\nHost: www.ev"
    first = eth_ip() / TCP(sport=40002, dport=80, flags="PA") / Raw(req)
    second = eth_ip() / TCP(sport=40002, dport=80, flags="PA") / Raw(b"il.com\r\n\r\n")
    long_pkt = eth_ip() / TCP(sport=40003, dport=80, flags="PA") / Raw(b"GET / HTTP/1.1\r\nX-Pad: " + b"a" * 1300 + b"\r\nHost: evil.com\r\n\r\n")
    for p in (first, second):
        stf.packet(1, p)
        stf.expect(2, p)
    stf.packet(1, long_pkt)
    stf.add("check_counter UfIngress.uf_stats(1) packets == 2")
    check(stf, p4sec_bin, tmp_path)


def test_list_replaced_at_run_time(p4sec_bin, tmp_path):
    stf = Stf()
    stf.add("add UfIngress.uf_port sm.ingress_port:1 UfIngress.forward(port:2)")
    stf.packet(1, http("evil.com"))        # no list loaded yet: passes
    stf.expect(2, http("evil.com"))
    stf.add("extern_control UfIngress.blocklist load " + dpi.automaton_json(dpi.Dfa(["evil.com"], payload=True)))
    stf.packet(1, http("evil.com"))        # dropped
    stf.packet(1, http("other.org"))
    stf.expect(2, http("other.org"))
    stf.add("extern_control UfIngress.blocklist load " + dpi.automaton_json(dpi.Dfa(["other.org"], payload=True)))
    stf.packet(1, http("evil.com"))
    stf.expect(2, http("evil.com"))
    stf.packet(1, http("other.org"))       # dropped
    stf.add("check_counter UfIngress.uf_stats(1) packets == 2")
    check(stf, p4sec_bin, tmp_path)
