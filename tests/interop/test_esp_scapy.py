"""ESP interoperability with scapy's independent implementation (scapy.layers.ipsec).

For every cipher suite, in both directions, with IPv4 and IPv6 tunnels, with and without ESN, and for
payload sizes from 0 bytes to MTU-sized packets: packets p4sec encapsulates are decapsulated by scapy and
packets scapy encapsulates are decapsulated by p4sec (`esp-tool`, the externs crate's test binary).
"""
import json
import os
import subprocess

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.ipsec import SecurityAssociation, ESP
from scapy.packet import Raw

from conftest import ROOT

# (p4sec cipher, p4sec integ, scapy crypt algo, scapy auth algo, enc key length, auth key length)
SUITES = [
    ("Null", "HmacSha256_128", "NULL", "SHA2-256-128", 0, 32),
    ("Null", "None", "NULL", "NULL", 0, 0),
    ("AesCbc128", "HmacSha1_96", "AES-CBC", "HMAC-SHA1-96", 16, 20),
    ("AesCbc256", "HmacSha256_128", "AES-CBC", "SHA2-256-128", 32, 32),
    ("AesCbc128", "HmacMd5_96", "AES-CBC", "HMAC-MD5-96", 16, 16),
    ("AesCtr128", "HmacSha256_128", "AES-CTR", "SHA2-256-128", 20, 32),
    ("AesCtr256", "HmacSha1_96", "AES-CTR", "HMAC-SHA1-96", 36, 20),
    ("AesCtr128", "HmacMd5_96", "AES-CTR", "HMAC-MD5-96", 20, 16),
    ("AesGcm128", "None", "AES-GCM", None, 20, 0),
    ("AesGcm256", "None", "AES-GCM", None, 36, 0),
    ("ChaCha20Poly1305", "None", "CHACHA20-POLY1305", None, 36, 0),
]
SIZES = [0, 1, 3, 15, 16, 17, 64, 255, 1000, 1400, 1452]  # 1452 + UDP + IPv6 = a 1500-byte inner packet
ESN_HIGH = 1
SPI = 0x0100_2000


@pytest.fixture(scope="module")
def esp_tool():
    exe = ROOT / "target" / "release" / "esp-tool"
    if not exe.exists():
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "p4sec-externs", "--bin", "esp-tool"], cwd=ROOT, check=True)
    proc = subprocess.Popen([str(exe)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    yield proc
    proc.stdin.close()
    proc.wait(timeout=10)


def call(tool, req):
    tool.stdin.write(json.dumps(req) + "\n")
    tool.stdin.flush()
    resp = json.loads(tool.stdout.readline())
    assert "results" in resp, resp
    return resp["results"]


def keys(n_enc, n_auth, salt):
    enc = bytes((i * 7 + salt) & 0xFF for i in range(n_enc))
    auth = bytes((i * 13 + salt + 1) & 0xFF for i in range(n_auth))
    return enc, auth


def inner_packets(v6):
    pkts = []
    for n in SIZES:
        payload = bytes((i * 31) & 0xFF for i in range(n))
        if v6:
            pkts.append(IPv6(src="2001:db8:1::10", dst="2001:db8:2::20") / UDP(sport=1234, dport=5678) / Raw(payload))
        else:
            pkts.append(IP(src="192.168.1.10", dst="192.168.2.20", id=n) / UDP(sport=1234, dport=5678) / Raw(payload))
    return pkts


def tunnel(v6):
    return ("2001:db8::1", "2001:db8::2") if v6 else ("10.0.0.1", "10.0.0.2")


def p4sec_sa(cipher, integ, enc, auth, v6, esn, initial_seq):
    null = {"packets": None, "bytes": None, "seconds": None}
    return {"spi": SPI, "cipher": cipher, "integ": integ, "enc_key": list(enc), "auth_key": list(auth), "esn": esn,
            "replay_window": 1024, "tunnel": list(tunnel(v6)), "soft": null, "hard": null, "initial_seq": initial_seq}


def scapy_sa(crypt, auth_algo, enc, auth, v6, esn, seq_num):
    src, dst = tunnel(v6)
    hdr = IPv6(src=src, dst=dst) if v6 else IP(src=src, dst=dst)
    return SecurityAssociation(ESP, spi=SPI, seq_num=seq_num, crypt_algo=crypt, crypt_key=enc or None,
                               auth_algo=auth_algo, auth_key=auth or None, tunnel_header=hdr,
                               esn_en=esn, esn=ESN_HIGH if esn else 0)


CASES = [(s, v6, esn) for s in SUITES for v6 in (False, True) for esn in (False, True)]


def case_id(c):
    (cipher, integ, *_), v6, esn = c
    return f"{cipher}-{integ}-{'v6' if v6 else 'v4'}-{'esn' if esn else 'seq32'}"


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_p4sec_to_scapy(esp_tool, case):
    (cipher, integ, crypt, auth_algo, n_enc, n_auth), v6, esn = case
    enc, auth = keys(n_enc, n_auth, 1)
    pkts = inner_packets(v6)
    start = (ESN_HIGH << 32) + 4 if esn else 4
    res = call(esp_tool, {"op": "encap", "sa": p4sec_sa(cipher, integ, enc, auth, v6, esn, start),
                          "packets": [bytes(p).hex() for p in pkts]})
    rx = scapy_sa(crypt, auth_algo, enc, auth, v6, esn, 1)
    for p, r in zip(pkts, res):
        assert "ok" in r, r
        outer = bytes.fromhex(r["ok"])
        wire = IPv6(outer) if v6 else IP(outer)
        assert wire.haslayer(ESP)
        dec = rx.decrypt(wire)
        assert bytes(dec) == bytes(p)


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_scapy_to_p4sec(esp_tool, case):
    (cipher, integ, crypt, auth_algo, n_enc, n_auth), v6, esn = case
    enc, auth = keys(n_enc, n_auth, 2)
    pkts = inner_packets(v6)
    tx = scapy_sa(crypt, auth_algo, enc, auth, v6, esn, 5)
    wires = [bytes(tx.encrypt(p)) for p in pkts]
    res = call(esp_tool, {"op": "decap", "sa": p4sec_sa(cipher, integ, enc, auth, v6, esn, (ESN_HIGH << 32) if esn else 0),
                          "packets": [w.hex() for w in wires]})
    for p, r in zip(pkts, res):
        assert "ok" in r, r
        assert bytes.fromhex(r["ok"]) == bytes(p)


def test_tampered_and_replayed_scapy_packets_are_refused(esp_tool):
    cipher, integ, crypt, auth_algo, n_enc, n_auth = SUITES[3]
    enc, auth = keys(n_enc, n_auth, 3)
    tx = scapy_sa(crypt, auth_algo, enc, auth, False, False, 1)
    good = bytes(tx.encrypt(inner_packets(False)[4]))
    bad = bytearray(good)
    bad[-20] ^= 0x01
    res = call(esp_tool, {"op": "decap", "sa": p4sec_sa(cipher, integ, enc, auth, False, False, 0),
                          "packets": [bytes(bad).hex(), good.hex(), good.hex()]})
    assert res[0] == {"error": "IcvMismatch"}
    assert "ok" in res[1]
    assert res[2] == {"error": "Replay"}
