"""programs/frame_auth.p4: whole-frame MAC tags between two switches, checked against independent
implementations (siphash24's C reference code, Python's hmac and hashlib)."""
import hashlib
import hmac
import pathlib

import pytest
import siphash24
from scapy.layers.inet import IP, UDP, TCP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from .stf import Stf

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "programs" / "frame_auth.p4"
KEY = bytes(range(0x10, 0x20))
KEY_HEX = "0x" + KEY.hex()
ALGS = {0: "siphash", 1: "hmac-sha256", 2: "blake2b"}


def tag(alg, key, message):
    if alg == 0:
        return siphash24.siphash24(message, key=key).digest()
    if alg == 1:
        return hmac.new(key, message, hashlib.sha256).digest()[:8]
    return hashlib.blake2b(message, key=key, digest_size=8).digest()  # output length = result width


def protected(frame, alg, key=KEY, pn=1, an=0):
    """The frame as the protecting switch sends it: shim (original EtherType, association number, PN, tag)
    after the addresses; the tag covers addresses, original EtherType, AN, PN and the rest of the frame."""
    raw = bytes(frame)
    anpn = bytes([an]) + pn.to_bytes(4, "big")
    t = tag(alg, key, raw[:14] + anpn + raw[14:])
    return raw[:12] + b"\x88\xb5" + raw[12:14] + anpn + t + raw[14:]


def frames():
    return [
        Ether(dst="02:00:00:00:00:02", src="02:00:00:00:00:01") / IP(src="10.0.0.1", dst="10.0.1.1") / UDP(sport=1234, dport=53) / Raw(b"x" * 18),
        Ether(dst="02:00:00:00:00:02", src="02:00:00:00:00:01") / IP(src="10.0.0.1", dst="10.0.1.1") / TCP(sport=4444, dport=80, flags="S"),
        Ether(dst="ff:ff:ff:ff:ff:ff", src="02:00:00:00:00:09", type=0x0806) / Raw(bytes(range(46))),
        Ether(dst="02:00:00:00:00:02", src="02:00:00:00:00:01") / IP(src="10.0.0.1", dst="10.0.1.1") / UDP() / Raw(bytes(1400)),
    ]


def rx_sa(stf, port, an, alg, key_hex=KEY_HEX):
    stf.add(f"add FaIngress.fa_rx_sa sm.ingress_port:{port} hdr.fa.an:{an} FaIngress.rx_sa(alg:{alg}, key:{key_hex})")


def config(stf, alg, key_hex=KEY_HEX):
    # port 1 -> 2: protect under association 0; port 3 -> 4: verify (association 0); port 5 -> 6: pass
    stf.add(f"add FaIngress.fa_port sm.ingress_port:1 FaIngress.protect(port:2, alg:{alg}, key:{key_hex}, an:0)")
    stf.add("add FaIngress.fa_port sm.ingress_port:3 FaIngress.verify(port:4)")
    rx_sa(stf, 3, 0, alg, key_hex)
    stf.add("add FaIngress.fa_port sm.ingress_port:5 FaIngress.pass(port:6)")


def reg(port, an=0):
    """Index of an association's PN and window registers."""
    return port * 4 + an


def check_ok(r):
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("alg", sorted(ALGS), ids=list(ALGS.values()))
def test_protect_then_verify_restores_the_frame(p4sec_bin, tmp_path, alg):
    stf = Stf()
    config(stf, alg)
    fs = frames()
    for pn, f in enumerate(fs, 1):
        stf.packet(1, f)
        stf.expect(2, protected(f, alg, pn=pn))
    for pn, f in enumerate(fs, 1):
        stf.packet(3, protected(f, alg, pn=pn))
        stf.expect(4, f)
    stf.add(f"check_counter FaIngress.fa_stats(0) packets == {len(fs)}")
    stf.add(f"check_counter FaIngress.fa_stats(1) packets == {len(fs)}")
    stf.add("check_counter FaIngress.fa_stats(2) packets == 0")
    check_ok(stf.run(p4sec_bin, PROGRAM, tmp_path))


@pytest.mark.parametrize("alg", sorted(ALGS), ids=list(ALGS.values()))
def test_wrong_tags_modified_and_untagged_frames_are_dropped_and_counted(p4sec_bin, tmp_path, alg):
    stf = Stf()
    config(stf, alg)
    good = protected(frames()[0], alg)
    bad, no_sa = [], []
    # every bit of the addresses, of the original EtherType, of the PN and of the tag, and some of the payload
    for bit in list(range(0, 96)) + list(range(112, 128)) + list(range(136, 232)) + list(range(232, len(good) * 8, 37)):
        b = bytearray(good)
        b[bit // 8] ^= 0x80 >> (bit % 8)
        bad.append(bytes(b))
    bad.append(good[:-1])                                   # truncated
    bad.append(good + b"\x00")                              # extended
    bad.append(protected(frames()[0], alg, key=bytes(16)))  # tagged with another key
    bad.append(good[:17] + (2).to_bytes(4, "big") + good[21:])  # PN 1's tag on PN 2
    # every bit of the association number: an AN the port has no key for
    for bit in range(128, 136):
        b = bytearray(good)
        b[bit // 8] ^= 0x80 >> (bit % 8)
        no_sa.append(bytes(b))
    for b in bad + no_sa:
        stf.packet(3, b)
    stf.packet(3, bytes(frames()[1]))                       # untagged on a verify port
    stf.packet(1, good)                                     # already tagged on a protect port
    stf.packet(9, bytes(frames()[0]))                       # unconfigured port
    stf.packet(3, good)                                     # the genuine frame still passes
    stf.expect(4, frames()[0])
    stf.add(f"check_counter FaIngress.fa_stats(2) packets == {len(bad)}")
    stf.add(f"check_counter FaIngress.fa_stats(9) packets == {len(no_sa)}")
    stf.add("check_counter FaIngress.fa_stats(3) packets == 1")
    stf.add("check_counter FaIngress.fa_stats(4) packets == 1")
    stf.add("check_counter FaIngress.fa_stats(6) packets == 1")
    stf.add("check_counter FaIngress.fa_stats(1) packets == 1")
    check_ok(stf.run(p4sec_bin, PROGRAM, tmp_path))


def test_a_frame_passing_a_wrong_tag_is_caught_by_the_runner(p4sec_bin, tmp_path):
    """The harness itself: expecting a frame that the switch drops must fail."""
    stf = Stf()
    config(stf, 0)
    b = bytearray(protected(frames()[0], 0))
    b[30] ^= 1
    stf.packet(3, bytes(b))
    stf.expect(4, frames()[0])
    r = stf.run(p4sec_bin, PROGRAM, tmp_path)
    assert r.returncode != 0


def test_pass_port_and_unknown_algorithm(p4sec_bin, tmp_path):
    stf = Stf()
    stf.add(f"add FaIngress.fa_port sm.ingress_port:1 FaIngress.protect(port:2, alg:7, key:{KEY_HEX}, an:0)")
    stf.add("add FaIngress.fa_port sm.ingress_port:5 FaIngress.pass(port:6)")
    f = frames()[0]
    stf.packet(5, f)
    stf.expect(6, f)
    stf.packet(1, f)
    stf.add("check_counter FaIngress.fa_stats(5) packets == 1")
    check_ok(stf.run(p4sec_bin, PROGRAM, tmp_path))


def test_wrong_key_width_is_a_load_error(p4sec_bin, tmp_path):
    src = PROGRAM.read_text().replace("bit<128> key;", "bit<64> key;").replace("bit<128> key", "bit<64> key")
    p = tmp_path / "bad.p4"
    p.write_text(src)
    stf = Stf()
    r = stf.run(p4sec_bin, p, tmp_path)
    assert r.returncode != 0
    assert "crypto_hash `FaIngress.siphash` (SipHash-2-4): the key must be bit<128>, not bit<64>" in r.stdout + r.stderr


def test_replayed_and_too_old_frames_are_dropped_and_counted(p4sec_bin, tmp_path):
    """The verifying port's anti-replay window: 64 PNs below the highest accepted one, each accepted once;
    frames that fail the tag check do not move it."""
    stf = Stf()
    config(stf, 0)
    f = frames()[0]
    accepted, rejected = [], []

    def send(pn, ok, frame=None):
        stf.packet(3, frame or protected(f, 0, pn=pn))
        if ok:
            stf.expect(4, f)
            accepted.append(pn)
        else:
            rejected.append(pn)

    for pn in (1, 2, 3):
        send(pn, True)
    send(2, False)                 # replayed
    send(5, True)
    send(4, True)                  # late, but inside the window and new
    send(4, False)                 # replayed
    send(0, False)                 # PN 0 is never sent
    # a forged frame with a high PN does not move the window: PN 100 is still new afterwards
    forged = bytearray(protected(f, 0, pn=100))
    forged[25] ^= 1
    stf.packet(3, bytes(forged))
    send(70, True)
    send(6, False)                 # 64 below the highest: too old
    send(7, True)                  # 63 below: still in the window
    send(100, True)
    send(36, False)                # 64 below 100
    send(37, True)
    send(37, False)
    stf.add(f"check_counter FaIngress.fa_stats(1) packets == {len(accepted)}")
    stf.add(f"check_counter FaIngress.fa_stats(7) packets == {len(rejected)}")
    stf.add("check_counter FaIngress.fa_stats(2) packets == 1")
    # the controller's rekey resets the window: PN 1 is new again
    stf.add(f"register_write FaIngress.rx_top {reg(3)} 0")
    stf.add(f"register_write FaIngress.rx_window {reg(3)} 0")
    send(1, True)
    stf.add(f"check_counter FaIngress.fa_stats(1) packets == {len(accepted)}")
    check_ok(stf.run(p4sec_bin, PROGRAM, tmp_path))


def test_each_link_numbers_its_frames_and_a_used_up_pn_space_stops_sending(p4sec_bin, tmp_path):
    stf = Stf()
    config(stf, 0)
    # a second protected link: port 7 -> 8; its PNs are its own
    stf.add(f"add FaIngress.fa_port sm.ingress_port:7 FaIngress.protect(port:8, alg:0, key:{KEY_HEX}, an:0)")
    fs = frames()
    stf.packet(1, fs[0])
    stf.expect(2, protected(fs[0], 0, pn=1))
    stf.packet(7, fs[1])
    stf.expect(8, protected(fs[1], 0, pn=1))
    stf.packet(1, fs[2])
    stf.expect(2, protected(fs[2], 0, pn=2))
    # the last PN of link 2, then nothing until the controller rekeys and resets the register
    stf.add(f"register_write FaIngress.tx_pn {reg(2)} 0xfffffffe")
    stf.packet(1, fs[0])
    stf.expect(2, protected(fs[0], 0, pn=0xFFFFFFFF))
    stf.packet(1, fs[1])
    stf.packet(1, fs[2])
    stf.add("check_counter FaIngress.fa_stats(8) packets == 2")
    stf.add(f"register_write FaIngress.tx_pn {reg(2)} 0")
    stf.packet(1, fs[3])
    stf.expect(2, protected(fs[3], 0, pn=1))
    stf.add("check_counter FaIngress.fa_stats(0) packets == 5")
    check_ok(stf.run(p4sec_bin, PROGRAM, tmp_path))


def test_two_associations_verify_side_by_side_each_with_its_own_key_and_window(p4sec_bin, tmp_path):
    """A key change without losing frames: while the receiver has associations 0 and 1, frames of both verify,
    interleaved, each association with its own key and replay window; the AN is covered by the tag; frames
    under an association the port has no key for are dropped and counted."""
    key2 = bytes(range(0xa0, 0xb0))
    stf = Stf()
    config(stf, 0)
    rx_sa(stf, 3, 1, 0, "0x" + key2.hex())
    # a sender already moved to association 1: its PNs for AN 1 start at 1
    stf.add(f"add FaIngress.fa_port sm.ingress_port:7 FaIngress.protect(port:8, alg:0, key:0x{key2.hex()}, an:1)")
    f, g = frames()[0], frames()[1]
    stf.packet(7, f)
    stf.expect(8, protected(f, 0, key2, pn=1, an=1))
    stf.packet(7, g)
    stf.expect(8, protected(g, 0, key2, pn=2, an=1))
    verified, replayed, wrong, no_sa = 0, 0, 0, 0
    for an, key, pn, ok in [(0, KEY, 5, True), (1, key2, 1, True), (0, KEY, 6, True), (1, key2, 2, True),
                            (0, KEY, 3, True),    # late but new in AN 0's window
                            (1, key2, 1, False),  # replayed in AN 1
                            (0, KEY, 6, False)]:  # replayed in AN 0
        stf.packet(3, protected(f, 0, key, pn=pn, an=an))
        if ok:
            stf.expect(4, f)
            verified += 1
        else:
            replayed += 1
    # the tag covers the AN: AN 0's frame relabelled AN 1 fails, even with the same key in both
    stf.packet(3, protected(f, 0, KEY, pn=9, an=1))
    wrong += 1
    rx_sa(stf, 9, 0, 0)
    rx_sa(stf, 9, 1, 0)
    stf.add("add FaIngress.fa_port sm.ingress_port:9 FaIngress.verify(port:10)")
    b = bytearray(protected(f, 0, KEY, pn=1, an=0))
    b[16] = 1
    stf.packet(9, bytes(b))
    wrong += 1
    stf.packet(9, protected(f, 0, KEY, pn=1, an=0))
    stf.expect(10, f)
    verified += 1
    # associations without a key: AN 2 (in range, not installed) and AN 7 (out of range)
    for an in (2, 7):
        stf.packet(3, protected(f, 0, KEY, pn=1, an=an))
        no_sa += 1
    stf.add(f"check_counter FaIngress.fa_stats(1) packets == {verified}")
    stf.add(f"check_counter FaIngress.fa_stats(7) packets == {replayed}")
    stf.add(f"check_counter FaIngress.fa_stats(2) packets == {wrong}")
    stf.add(f"check_counter FaIngress.fa_stats(9) packets == {no_sa}")
    check_ok(stf.run(p4sec_bin, PROGRAM, tmp_path))
