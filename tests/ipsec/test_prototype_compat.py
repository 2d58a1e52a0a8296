"""The P4-IPsec prototype's extern interface (ipsec_crypt, declared by the program) on a p4sec switch between
veth pairs: its AES-CTR + HMAC-MD5-96 and NULL ESP interoperate with scapy in both directions, and tampered
packets are dropped."""
import os
import socket
import subprocess
import time
import uuid

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.ipsec import ESP, SecurityAssociation
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from conftest import ROOT
from p4sec.infra import runtime
from p4sec.infra.netns import free_port

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for veth interfaces")
KEY = bytes(range(1, 21))       # AES-128 key | 4-byte nonce (RFC 3686)
HKEY = bytes(range(50, 66))
SPI = 0x1234
TUNNEL = IP(src="192.0.2.1", dst="198.51.100.1")


@pytest.fixture
def sw(p4sec_bin, tmp_path):
    t = uuid.uuid4().hex[:5]
    lan, lan_sw, wan, wan_sw = f"pl{t}", f"ps{t}", f"pw{t}", f"px{t}"
    for a, b in ((lan, lan_sw), (wan, wan_sw)):
        subprocess.run(["ip", "link", "add", a, "type", "veth", "peer", "name", b], check=True)
        for i in (a, b):
            subprocess.run(["ip", "link", "set", i, "up"], check=True)
            subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{i}.disable_ipv6=1"], capture_output=True)
    out = tmp_path / "proto"
    subprocess.run([str(p4sec_bin), "compile", str(ROOT / "tests" / "ipsec" / "compat" / "prototype_style.p4"), "-o", str(out)], check=True)
    port = free_port()
    proc = subprocess.Popen([str(p4sec_bin), "switch", "--grpc", f"127.0.0.1:{port}", "--port", f"1={lan_sw}", "--port", f"2={wan_sw}"])
    s = runtime.Switch(f"127.0.0.1:{port}")
    s.push(out)
    socks = {}
    for name, iface in (("lan", lan), ("wan", wan)):
        k = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800))
        k.bind((iface, 0))
        k.settimeout(1.0)
        socks[name] = k
    yield s, socks
    s.close()
    proc.terminate()
    proc.wait(timeout=10)
    for i in (lan, wan):
        subprocess.run(["ip", "link", "del", i], capture_output=True)


def recv(sock, want):
    end = time.time() + 2
    while time.time() < end:
        try:
            f = sock.recv(4096)
        except socket.timeout:
            return None
        p = Ether(f)
        if IP in p and want(p):
            return p
    return None


def inner(n=0):
    return IP(src="10.1.0.1", dst="10.2.0.2", id=n) / UDP(sport=1111, dport=2222) / Raw(b"prototype payload %d" % n)


@pytest.mark.parametrize("suite", ["aes-ctr-hmac-md5", "null"])
def test_prototype_extern_interoperates_with_scapy(sw, suite):
    s, socks = sw
    if suite == "null":
        s.table_insert("Ing.sad_encrypt", {"hdr.ipv4.dstAddr": ("lpm", runtime.ip("10.2.0.0"), 16)}, "Ing.encrypt_null",
                       {"spi": SPI, "src": runtime.ip("192.0.2.1"), "dst": runtime.ip("198.51.100.1"), "reg": 0})
        s.table_insert("Ing.sad_decrypt", {"hdr.ipv4.srcAddr": ("exact", runtime.ip("198.51.100.1")), "hdr.ipv4.dstAddr": ("exact", runtime.ip("192.0.2.1")),
                                           "hdr.esp.spi": ("exact", SPI.to_bytes(4, "big"))}, "Ing.decrypt_null", {})
        sa = SecurityAssociation(ESP, spi=SPI, crypt_algo="NULL", auth_algo="NULL", tunnel_header=TUNNEL)
    else:
        s.table_insert("Ing.sad_encrypt", {"hdr.ipv4.dstAddr": ("lpm", runtime.ip("10.2.0.0"), 16)}, "Ing.encrypt_ctr",
                       {"key": KEY, "key_hmac": HKEY, "spi": SPI, "src": runtime.ip("192.0.2.1"), "dst": runtime.ip("198.51.100.1"), "reg": 0})
        s.table_insert("Ing.sad_decrypt", {"hdr.ipv4.srcAddr": ("exact", runtime.ip("198.51.100.1")), "hdr.ipv4.dstAddr": ("exact", runtime.ip("192.0.2.1")),
                                           "hdr.esp.spi": ("exact", SPI.to_bytes(4, "big"))}, "Ing.decrypt_ctr", {"key": KEY, "key_hmac": HKEY})
        sa = SecurityAssociation(ESP, spi=SPI, crypt_algo="AES-CTR", crypt_key=KEY, auth_algo="HMAC-MD5-96", auth_key=HKEY, tunnel_header=TUNNEL)

    # switch -> scapy: the clear packet leaves as ESP that scapy decrypts
    for n in range(3):
        socks["lan"].send(bytes(Ether(dst="02:00:00:00:00:01") / inner(n)))
        got = recv(socks["wan"], lambda p: p[IP].proto == 50)
        assert got is not None, "no ESP on the WAN side"
        assert got[IP].src == "192.0.2.1" and got[IP].dst == "198.51.100.1" and got[ESP].spi == SPI and got[ESP].seq == n + 1
        if suite != "null":
            assert b"prototype payload" not in bytes(got)
        plain = sa.decrypt(got[IP])
        assert bytes(plain[UDP].payload) == b"prototype payload %d" % n and plain[IP].src == "10.1.0.1"

    # scapy -> switch: ESP from the peer comes out as the inner packet
    back = SecurityAssociation(ESP, spi=SPI, crypt_algo=sa.crypt_algo.name, crypt_key=KEY if suite != "null" else None,
                               auth_algo=sa.auth_algo.name, auth_key=HKEY if suite != "null" else None,
                               tunnel_header=IP(src="198.51.100.1", dst="192.0.2.1"))
    pkt = IP(src="10.2.0.2", dst="10.1.0.1", id=7) / UDP(sport=2222, dport=1111) / Raw(b"reply from the peer")
    esp = back.encrypt(pkt)
    socks["wan"].send(bytes(Ether(dst="02:00:00:00:00:01") / esp))
    got = recv(socks["lan"], lambda p: p[IP].src == "10.2.0.2")
    assert got is not None and bytes(got[UDP].payload) == b"reply from the peer"

    if suite != "null":
        # tampered: dropped
        raw = bytearray(bytes(back.encrypt(pkt)))
        raw[-20] ^= 0x10
        socks["wan"].send(bytes(Ether(dst="02:00:00:00:00:01")) + bytes(raw))
        assert recv(socks["lan"], lambda p: p[IP].src == "10.2.0.2") is None, "a tampered packet came through"
