"""programs/keyed_bloom.p4: a Bloom filter and a count-min sketch indexed by keyed hashes, as a "known flow"
pre-check. Shows that flows crafted to collide under CRC32 (computable without any key) pass an unkeyed
filter and are stopped by the same filter indexed with SipHash-2-4 and a secret key."""
import pathlib
import zlib

import siphash24
from scapy.layers.inet import IP, TCP, UDP, ICMP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from .stf import Stf

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "programs" / "keyed_bloom.p4"
KEY = bytes.fromhex("8f1c2d3e4a5b6c7d8e9fa0b1c2d3e4f5")
INSIDE, OUTSIDE = 1, 2


def program(tmp_path, alg):
    p = tmp_path / f"keyed_bloom_{alg}.p4"
    p.write_text(f"#define KB_ALG {alg}\n" + PROGRAM.read_text())
    return p


def tuple_bytes(src, dst, sport, dport, proto):
    ip = lambda a: bytes(int(x) for x in a.split("."))
    return ip(src) + ip(dst) + sport.to_bytes(2, "big") + dport.to_bytes(2, "big") + bytes([proto])


def indices(alg, t):
    """The two 16-bit Bloom indices the program derives from its 32-bit hash result."""
    if alg == "CRC32":
        h = zlib.crc32(t)
    else:
        h = int.from_bytes(siphash24.siphash24(t, key=KEY).digest()[:4], "big")
    return h & 0xFFFF, h >> 16


def config(stf, limit=1000):
    key = "0x" + KEY.hex()
    stf.add(f"add KbIngress.kb_port sm.ingress_port:{INSIDE} KbIngress.learn(port:{OUTSIDE}, key:{key})")
    stf.add(f"add KbIngress.kb_port sm.ingress_port:{OUTSIDE} KbIngress.check(port:{INSIDE}, key:{key}, limit:{limit})")


def out_pkt(src, dst, sport, dport, udp=False, payload=b"reply"):
    l4 = UDP(sport=sport, dport=dport) if udp else TCP(sport=sport, dport=dport, flags="A")
    return Ether(dst="02:00:00:00:00:01", src="02:00:00:00:00:02") / IP(src=src, dst=dst) / l4 / Raw(payload)


def in_pkt(src, dst, sport, dport, udp=False):
    l4 = UDP(sport=sport, dport=dport) if udp else TCP(sport=sport, dport=dport, flags="S")
    return Ether(dst="02:00:00:00:00:02", src="02:00:00:00:00:01") / IP(src=src, dst=dst) / l4


def crc32_collisions(t, free=range(4, 12), want=8):
    """Messages of t's length that differ from t only in bytes `free` and have the same CRC32. CRC32 is affine,
    so crc(t ^ d) == crc(t) exactly when crc(d) == crc(0...0): a linear condition on d, solved over GF(2)."""
    zero = zlib.crc32(bytes(len(t)))
    cols = []
    for byte in free:
        for bit in range(8):
            d = bytearray(len(t))
            d[byte] = 1 << bit
            cols.append((zlib.crc32(bytes(d)) ^ zero, 1 << len(cols)))
    basis = {}  # pivot bit -> (value, combination)
    kernel = []
    for v, c in cols:
        while v:
            p = v.bit_length() - 1
            if p not in basis:
                basis[p] = (v, c)
                break
            bv, bc = basis[p]
            v, c = v ^ bv, c ^ bc
        if v == 0:
            kernel.append(c)
    found = []
    for c in kernel[:want]:
        d = bytearray(len(t))
        for i in range(len(cols)):
            if c >> i & 1:
                byte, bit = free[i // 8], i % 8
                d[byte] ^= 1 << bit
        forged = bytes(a ^ b for a, b in zip(t, d))
        assert forged != t and zlib.crc32(forged) == zlib.crc32(t)
        found.append(forged)
    return found


def fields(t):
    ip = lambda b: ".".join(str(x) for x in b)
    return ip(t[0:4]), ip(t[4:8]), int.from_bytes(t[8:10], "big"), int.from_bytes(t[10:12], "big")


def run_ok(stf, p4sec_bin, prog, tmp_path):
    r = stf.run(p4sec_bin, prog, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


def test_return_traffic_of_known_flows_passes_and_the_rest_is_dropped(p4sec_bin, tmp_path):
    stf = Stf()
    config(stf)
    learned = [("10.0.0.5", "192.0.2.10", 40000 + i, 443, False) for i in range(20)] + [("10.0.0.6", "198.51.100.7", 5353, 53, True)]
    for src, dst, sp, dp, udp in learned:
        p = in_pkt(src, dst, sp, dp, udp)
        stf.packet(INSIDE, p)
        stf.expect(OUTSIDE, p)
    for src, dst, sp, dp, udp in learned:
        r = out_pkt(dst, src, dp, sp, udp)
        stf.packet(OUTSIDE, r)
        stf.expect(INSIDE, r)
    unknown = [out_pkt("192.0.2.10", "10.0.0.5", 443, 50000 + i) for i in range(30)]
    unknown.append(out_pkt("192.0.2.10", "10.0.0.5", 443, 40000, udp=True))  # right ports, wrong protocol
    for u in unknown:
        stf.packet(OUTSIDE, u)
    stf.packet(OUTSIDE, Ether() / IP(src="192.0.2.10", dst="10.0.0.5") / ICMP())  # not TCP/UDP
    stf.packet(7, in_pkt("10.0.0.5", "192.0.2.10", 1, 2))  # unconfigured port
    stf.add(f"check_counter KbIngress.kb_stats(0) packets == {len(learned)}")
    stf.add(f"check_counter KbIngress.kb_stats(1) packets == {len(learned)}")
    stf.add(f"check_counter KbIngress.kb_stats(2) packets == {len(unknown)}")
    stf.add("check_counter KbIngress.kb_stats(4) packets == 1")
    stf.add("check_counter KbIngress.kb_stats(5) packets == 1")
    run_ok(stf, p4sec_bin, program(tmp_path, "SIPHASH_2_4"), tmp_path)


def test_count_min_sketch_limits_a_flow(p4sec_bin, tmp_path):
    stf = Stf()
    config(stf, limit=3)
    stf.packet(INSIDE, in_pkt("10.0.0.5", "192.0.2.10", 40000, 443))
    stf.expect(OUTSIDE, in_pkt("10.0.0.5", "192.0.2.10", 40000, 443))
    r = out_pkt("192.0.2.10", "10.0.0.5", 443, 40000)
    for _ in range(5):
        stf.packet(OUTSIDE, r)
    for _ in range(3):
        stf.expect(INSIDE, r)
    stf.add("check_counter KbIngress.kb_stats(1) packets == 3")
    stf.add("check_counter KbIngress.kb_stats(3) packets == 2")
    run_ok(stf, p4sec_bin, program(tmp_path, "SIPHASH_2_4"), tmp_path)


def test_crc32_collisions_pass_an_unkeyed_filter_but_not_a_keyed_one(p4sec_bin, tmp_path):
    inside = ("10.0.0.5", "192.0.2.10", 40000, 443)
    t = tuple_bytes(*inside, 6)
    forged = crc32_collisions(t)
    assert len(forged) >= 5
    attacks = []
    for f in forged:
        a, b, pa, pb = fields(f)
        assert a == inside[0], "the attack still targets the protected host"
        # the outside packet whose reverse tuple is f: src = b, dst = a, sport = pb, dport = pa
        attacks.append(out_pkt(b, a, pb, pa, payload=b"attack"))
        assert indices("CRC32", f) == indices("CRC32", t)
        assert indices("SIPHASH_2_4", f) != indices("SIPHASH_2_4", t)

    for alg, passes in [("CRC32", True), ("SIPHASH_2_4", False)]:
        stf = Stf()
        config(stf)
        stf.packet(INSIDE, in_pkt(*inside))
        stf.expect(OUTSIDE, in_pkt(*inside))
        for a in attacks:
            stf.packet(OUTSIDE, a)
            if passes:
                stf.expect(INSIDE, a)
        stf.add(f"check_counter KbIngress.kb_stats(1) packets == {len(attacks) if passes else 0}")
        stf.add(f"check_counter KbIngress.kb_stats(2) packets == {0 if passes else len(attacks)}")
        run_ok(stf, p4sec_bin, program(tmp_path, alg), tmp_path)
