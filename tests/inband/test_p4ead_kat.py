"""P4EAD through the switch: the official ASCON KATs (NIST SP 800-232 Ascon-AEAD128 and ASCON-128 v1.2) as request
packets to programs/p4ead_service.p4, in plain P4 (1 to 4 rounds per pass) and with the extern."""
import pathlib
import subprocess

import pytest

from tests.hashing.stf import Stf
from tests.inband.kat import load_kats, passes_expected, request, MAC_A, MAC_B

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "programs" / "p4ead_service.p4"
KEY_ID = 7
BUILDS = {"rpp1": ["P4EAD_RPP=1"], "rpp2": ["P4EAD_RPP=2"], "rpp3": ["P4EAD_RPP=3"], "rpp4": ["P4EAD_RPP=4"], "extern": ["P4EAD_EXTERN"]}


def rpp_of(build):
    return 0 if build == "extern" else int(build[3:])


def run(p4sec_bin, stf, build, tmp_path):
    path = pathlib.Path(tmp_path) / "test.stf"
    path.write_text("\n".join(stf.lines) + "\n")
    args = [str(p4sec_bin), "stf", str(PROGRAM), str(path)]
    for d in BUILDS[build]:
        args += ["-D", d]
    return subprocess.run(args, capture_output=True, text=True, timeout=300)


def reply(op, variant, nonce, ad, data, tag, status, build, alen=None, dlen=None):
    rpp = rpp_of(build)
    passes = 1 if rpp == 0 else passes_expected(variant, len(ad), len(data), rpp)
    return request(op, variant, KEY_ID, nonce, ad, data, tag=tag, status=status, passes=passes, rpp=rpp, src=MAC_B, dst=MAC_A)


@pytest.mark.parametrize("variant", ["aead128", "v12"])
@pytest.mark.parametrize("build", list(BUILDS))
def test_all_kats_encrypt_and_decrypt(p4sec_bin, tmp_path, variant, build):
    kats = load_kats(variant)
    assert len(kats) == 1089
    stf = Stf()
    stf.add(f"add SvcIngress.p4ead_keys hdr.req.key_id:{KEY_ID} SvcIngress.set_key(k:0x{kats[0][1].hex()})")
    for (_count, key, nonce, pt, ad, ct) in kats:
        assert key == kats[0][1]
        ctext, tag = ct[:-16], ct[-16:]
        stf.packet(1, request(0, variant, KEY_ID, nonce, ad, pt))
        stf.expect(1, reply(0, variant, nonce, ad, ctext, tag, 1, build))
        stf.packet(1, request(1, variant, KEY_ID, nonce, ad, ctext, tag=tag))
        stf.expect(1, reply(1, variant, nonce, ad, pt, tag, 1, build))
    r = run(p4sec_bin, stf, build, tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]


@pytest.mark.parametrize("build", ["rpp2", "extern"])
def test_forged_requests_fail_and_release_nothing(p4sec_bin, tmp_path, build):
    kats = [k for k in load_kats("v12") if len(k[3]) == 24 and len(k[4]) == 5][:1] + \
        [k for k in load_kats("v12") if len(k[3]) == 32 and len(k[4]) == 32][:1]
    stf = Stf()
    stf.add(f"add SvcIngress.p4ead_keys hdr.req.key_id:{KEY_ID} SvcIngress.set_key(k:0x{kats[0][1].hex()})")
    for (_c, key, nonce, pt, ad, ct) in kats:
        ctext, tag = ct[:-16], ct[-16:]
        flips = [("ct", i) for i in range(0, len(ctext) * 8, 37)] + [("tag", i) for i in range(0, 128, 29)] + \
            [("ad", i) for i in range(0, len(ad) * 8, 11)] + [("nonce", 5)]
        for what, bit in flips:
            c, t, a, n = bytearray(ctext), bytearray(tag), bytearray(ad), bytearray(nonce)
            {"ct": c, "tag": t, "ad": a, "nonce": n}[what][bit // 8] ^= 0x80 >> (bit % 8)
            stf.packet(1, request(1, "v12", KEY_ID, bytes(n), bytes(a), bytes(c), tag=bytes(t)))
            stf.expect(1, reply(1, "v12", bytes(n), bytes(a), bytes(len(c)), bytes(t), 2, build))
    # no key for the id, lengths beyond 32 bytes, an unknown variant
    nonce = bytes(16)
    stf.packet(1, request(0, "v12", KEY_ID + 1, nonce, b"", b"abc"))
    stf.expect(1, request(0, "v12", KEY_ID + 1, nonce, b"", b"abc", status=3, rpp=rpp_of(build), src=MAC_B, dst=MAC_A))
    stf.packet(1, request(0, 9, KEY_ID, nonce, b"", b"abc"))
    stf.expect(1, request(0, 9, KEY_ID, nonce, b"", b"abc", status=5, rpp=rpp_of(build), src=MAC_B, dst=MAC_A))
    long = request(0, "v12", KEY_ID, nonce, b"", bytes(40))
    stf.packet(1, long)
    stf.expect(1, MAC_A + MAC_B + long[12:16] + bytes([4]) + long[17:19] + bytes([rpp_of(build)]) + long[20:])
    r = run(p4sec_bin, stf, build, tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]


def test_pass_count_follows_the_paper_formula():
    # the paper's example: 8-byte input, 4-byte AD, 4 rounds per pass (Tofino2): (30 + 6 (1 + 0)) / 4 = 9 passes
    assert passes_expected("v12", 4, 8, 4) == 9
    for p in (8, 16, 24, 32):
        for q in (1, 4, 8, 16):
            for r in (1, 2, 3):
                assert passes_expected("v12", q, p, r) * r >= 30 + 6 * (p // 8 + q // 8) > (passes_expected("v12", q, p, r) - 1) * r
