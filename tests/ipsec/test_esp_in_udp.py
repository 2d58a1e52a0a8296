"""ESP in UDP (RFC 3948, NAT traversal) through programs/ipsec_gateway.p4, driven by the controller (a tunnel with
encap="udp"): the WAN carries UDP datagrams to port 4500 whose payload is ESP, and scapy's NAT-T SAs are the
interop peer both ways (they decrypt what the gateway sends; the gateway decrypts what they send). Plain ESP for
a UDP-encapsulated SA is refused and counted as P4SEC_WRONG_ENCAP; an IKE message on port 4500 (four zero bytes
after the UDP header) is not taken for ESP. Over an IPv4 and an IPv6 WAN."""
import os
import subprocess
import sys

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.ipsec import ESP, SecurityAssociation
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from ctlrig import gateway_pair
from p4sec.ipsec import gateway as gwp
from p4sec.ipsec.controller import IpsecController
from test_ipv6_vpn import TOOL, capture
from test_site_to_site import net  # noqa: F401 (fixture)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")

WRONG_ENCAP = 13        # p4sec.p4: P4SEC_WRONG_ENCAP

WANS = {
    "v4": ("192.0.2.1", "198.51.100.1", "198.51.100.0/24", "192.0.2.0/24"),
    "v6": ("2001:db8:a::1", "2001:db8:b::1", "2001:db8:b::/64", "2001:db8:a::/64"),
}


def send(ns, iface, frames):
    cmd = [sys.executable, "-c", TOOL, "send", iface] + [bytes(f).hex() for f in frames]
    subprocess.run((["ip", "netns", "exec", ns] if ns else []) + cmd, check=True, timeout=30)


@pytest.mark.parametrize("wan", list(WANS))
def test_esp_in_udp_tunnel(p4sec_bin, net, tmp_path, wan):  # noqa: F811 (fixture)
    gw_a, gw_b, wan_a, wan_b = WANS[wan]
    outer = IPv6 if wan == "v6" else IP
    with gateway_pair(p4sec_bin, net, tmp_path, wan=WANS[wan]) as (ctl, sa, sb):
        spis = ctl.connect("A", "B", encap="udp")
        assert [t["encap"] for t in ctl.tunnels()] == ["udp"]

        # A encapsulates in UDP; B decapsulates; scapy's NAT-T SA decrypts what crossed the WAN
        frames = [Ether(dst="02:00:00:00:00:01") / IP(src="10.1.0.5", dst="10.2.0.7", ttl=64) / UDP(sport=4242, dport=4242)
                  / (b"natt-secret-%d" % i) for i in range(3)]
        rx = capture(net["ns2"], net["h2"], 3, "natt-secret")
        wire = capture(None, net["wb"], 3, "")
        send(net["ns1"], net["h1"], frames)
        got = [bytes.fromhex(x) for x in rx.communicate(timeout=20)[0].split()]
        seen = [Ether(bytes.fromhex(x)) for x in wire.communicate(timeout=20)[0].split()]
        assert len(got) == 3 and all(Ether(g)[IP].ttl == 63 for g in got), f"H2 got {len(got)} of 3"
        seen = [p for p in seen if UDP in p and p[UDP].dport == 4500]
        assert len(seen) == 3, "the WAN carried ESP in UDP"
        spi = spis[("A", "B")][0]
        keys = ctl.keys(spi)
        peer = SecurityAssociation(ESP, spi=spi, crypt_algo="AES-GCM", crypt_key=bytes(keys["enc_key"]),
                                   tunnel_header=outer(src=gw_a, dst=gw_b), nat_t_header=UDP(sport=4500, dport=4500),
                                   esn_en=True, esn=0)
        for p in seen:
            o = p[outer]
            assert (o.proto if wan == "v4" else o.nh) == 17
            assert o.src == gw_a and p[UDP].sport == 4500 and p[ESP].spi == spi
            raw_udp = bytes(o.payload)
            assert int.from_bytes(raw_udp[4:6], "big") == len(raw_udp)
            if wan == "v4":
                assert p[UDP].chksum == 0, "no UDP checksum over IPv4 (RFC 3948)"
            else:
                again = IPv6(bytes(o))
                del again[UDP].chksum
                assert IPv6(bytes(again))[UDP].chksum == p[UDP].chksum, "the UDP checksum over IPv6 is right"
            assert b"natt-secret" not in bytes(p)
            inner = peer.decrypt(o)
            assert b"natt-secret" in bytes(inner)

        # scapy sends ESP in UDP to B with the same SA (sequence numbers beyond A's): B decrypts it
        mine = [Ether(dst="02:00:00:00:0b:01") / peer.encrypt(IP(src="10.1.0.5", dst="10.2.0.7", ttl=64) / UDP(sport=1, dport=2)
                                                               / Raw(b"from-scapy-%d" % i), seq_num=1000 + i) for i in range(2)]
        rx = capture(net["ns2"], net["h2"], 2, "from-scapy")
        send(None, net["wa"], mine)
        got = [bytes.fromhex(x) for x in rx.communicate(timeout=20)[0].split()]
        assert len(got) == 2, f"H2 got {len(got)} of scapy's 2"

        # plain ESP under the SA's SPI: refused (WRONG_ENCAP), nothing delivered; an IKE message is not ESP
        plain = SecurityAssociation(ESP, spi=spi, crypt_algo="AES-GCM", crypt_key=bytes(keys["enc_key"]),
                                    tunnel_header=outer(src=gw_a, dst=gw_b), esn_en=True, esn=0)
        before = sb.counter_read(gwp.ESP_STATUS, WRONG_ENCAP)[0]
        bad = Ether(dst="02:00:00:00:0b:01") / plain.encrypt(IP(src="10.1.0.5", dst="10.2.0.7") / UDP() / Raw(b"plain-esp"), seq_num=2000)
        ike = Ether(dst="02:00:00:00:0b:01") / outer(src=gw_a, dst=gw_b) / UDP(sport=4500, dport=4500) / Raw(bytes(4) + b"ike-message")
        rx = capture(net["ns2"], net["h2"], 1, "plain-esp")
        send(None, net["wa"], [bad, ike])
        assert rx.communicate(timeout=20)[0].split() == [], "plain ESP for a UDP SA is not delivered"
        assert sb.counter_read(gwp.ESP_STATUS, WRONG_ENCAP)[0] == before + 1
        assert sb.counter_read(gwp.WAN_DROPS, gwp.WAN_DENIED)[0] >= 1, "the IKE message went to the policy (no bypass: denied)"

        # malformed and hostile datagrams to port 4500: none is delivered, each is counted where it is refused, and
        # the gateway still decrypts afterwards
        def status(code):
            return sb.counter_read(gwp.ESP_STATUS, code)[0]
        icv, replay, wrong = status(4), status(7), status(WRONG_ENCAP)
        good = peer.encrypt(IP(src="10.1.0.5", dst="10.2.0.7", ttl=64) / UDP(sport=1, dport=2) / Raw(b"hostile-0"), seq_num=3000)
        tampered = bytearray(bytes(good))
        tampered[-20] ^= 0x01
        long_len = bytearray(bytes(good))
        hl = 20 if wan == "v4" else 40
        long_len[hl + 4:hl + 6] = (len(long_len) - hl + 9).to_bytes(2, "big")
        hostile = [
            outer(src=gw_a, dst=gw_b) / UDP(sport=4500, dport=4500) / Raw(b"\xff"),            # NAT keepalive
            outer(src=gw_a, dst=gw_b) / UDP(sport=4500, dport=4500) / Raw(spi.to_bytes(4, "big") + b"\x00\x01"),  # truncated
            outer(tampered),                                                                       # ICV fails
            outer(long_len),                                                                       # UDP length beyond the packet
            mine[0][outer],                                                                        # a replay
        ]
        rx = capture(net["ns2"], net["h2"], 1, "hostile-")
        send(None, net["wa"], [Ether(dst="02:00:00:00:0b:01") / h for h in hostile])
        assert rx.communicate(timeout=20)[0].split() == [], "nothing hostile is delivered"
        assert (status(4), status(7), status(WRONG_ENCAP)) == (icv + 1, replay + 1, wrong + 1)
        rx = capture(net["ns2"], net["h2"], 1, "hostile-0")
        send(None, net["wa"], [Ether(dst="02:00:00:00:0b:01") / good])
        assert len(rx.communicate(timeout=20)[0].split()) == 1, "the gateway decrypts after the hostile datagrams"

        # renewed SAs keep the tunnel's encapsulation
        new = ctl.rekey("A-B")
        rx = capture(net["ns2"], net["h2"], 2, "natt-secret")
        wire = capture(None, net["wb"], 2, "")
        send(net["ns1"], net["h1"], frames[:2])
        assert len(rx.communicate(timeout=20)[0].split()) == 2
        seen = [Ether(bytes.fromhex(x)) for x in wire.communicate(timeout=20)[0].split()]
        assert {p[ESP].spi for p in seen if UDP in p and ESP in p} == {new[("A", "B")][0]}


def test_encap_is_checked(tmp_path):
    ctl = IpsecController()
    try:
        with pytest.raises(Exception, match="unknown encapsulation 'gre'"):
            ctl.connect("A", "B", encap="gre")
    finally:
        ctl.close()
