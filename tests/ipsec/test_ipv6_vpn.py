"""IPv6 through the VPN, driven by the controller: IPv6 sites over an IPv4 WAN, IPv6 sites over an IPv6 WAN and IPv4
sites over an IPv6 WAN; the ESP on the WAN decrypts with scapy."""
import os
import subprocess
import sys

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.ipsec import ESP, SecurityAssociation
from scapy.layers.l2 import Ether

from ctlrig import gateway_pair
from test_site_to_site import net  # noqa: F401 (fixture)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")

TOOL = r"""
import socket, sys, time
role, iface = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.bind((iface, 0))
if role == "send":
    time.sleep(0.3)
    for h in sys.argv[3:]:
        s.send(bytes.fromhex(h))
else:
    n, want, out = int(sys.argv[3]), sys.argv[4].encode(), []
    s.settimeout(3)
    print("ready", flush=True)
    try:
        while len(out) < n:
            f = s.recv(4096)
            if want in f:
                out.append(f.hex())
    except socket.timeout:
        pass
    print("\n".join(out), flush=True)
"""

CASES = {
    "v6-over-v4": ("2001:db8:1::/48", "2001:db8:2::/48", "192.0.2.1", "198.51.100.1", "198.51.100.0/24", "192.0.2.0/24"),
    "v6-over-v6": ("2001:db8:1::/48", "2001:db8:2::/48", "2001:db8:a::1", "2001:db8:b::1", "2001:db8:b::/64", "2001:db8:a::/64"),
    "v4-over-v6": ("10.1.0.0/16", "10.2.0.0/16", "2001:db8:a::1", "2001:db8:b::1", "2001:db8:b::/64", "2001:db8:a::/64"),
}


def capture(ns, iface, n, want):
    cmd = [sys.executable, "-c", TOOL, "recv", iface, str(n), want]
    p = subprocess.Popen((["ip", "netns", "exec", ns] if ns else []) + cmd, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    return p


@pytest.mark.parametrize("case", list(CASES))
def test_ipv6_sites_and_wans(p4sec_bin, net, tmp_path, case):
    lan_a, lan_b, gw_a, gw_b, wan_a, wan_b = CASES[case]
    with gateway_pair(p4sec_bin, net, tmp_path, wan=(gw_a, gw_b, wan_a, wan_b), lans=(lan_a, lan_b)) as (ctl, sa, sb):
        spis = ctl.connect("A", "B", suite="aes-gcm-128")
        six = ":" in lan_a
        src, dst = (lan_a.split("/")[0] + "5", lan_b.split("/")[0] + "7") if six else ("10.1.0.5", "10.2.0.7")
        l3 = (IPv6(src=src, dst=dst, hlim=64) if six else IP(src=src, dst=dst, ttl=64))
        frames = [bytes(Ether(dst="02:00:00:00:00:01") / l3 / UDP(sport=4242, dport=4242) / (b"six-secret-%d" % i)) for i in range(3)]
        rx = capture(net["ns2"], net["h2"], 3, "six-secret")
        wan = capture(None, net["wb"], 3, "")
        subprocess.run(["ip", "netns", "exec", net["ns1"], sys.executable, "-c", TOOL, "send", net["h1"]] + [f.hex() for f in frames],
                       check=True, timeout=30)
        got = [bytes.fromhex(x) for x in rx.communicate(timeout=20)[0].split()]
        esp = [bytes.fromhex(x) for x in wan.communicate(timeout=20)[0].split()]
        assert len(got) == 3, f"{case}: H2 got {len(got)} of 3"
        for g in got:
            p = Ether(g)
            assert (IPv6 in p) == six and (p[IPv6].hlim if six else p[IP].ttl) == 63
        esp = [Ether(e) for e in esp if ESP in Ether(e)]
        assert esp, f"{case}: ESP on the WAN"
        spi = spis[("A", "B")][0]
        cfg = ctl.keys(spi)
        outer_cls = IPv6 if ":" in gw_a else IP
        rx_sa = SecurityAssociation(ESP, spi=spi, crypt_algo="AES-GCM", crypt_key=bytes(cfg["enc_key"]),
                                    tunnel_header=outer_cls(src=gw_a, dst=gw_b), esn_en=True, esn=0)
        for e in esp:
            assert e[outer_cls].src == gw_a and e[ESP].spi == spi
            assert b"six-secret" not in bytes(e)
            inner = rx_sa.decrypt(e[outer_cls])
            assert b"six-secret" in bytes(inner) and (IPv6 in inner) == six
