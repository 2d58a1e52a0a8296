"""programs/inband_kv_cache.p4: cache hits and misses, and in-band control packets that only change the cache when
they are authentic, new and exactly what their tag covers (no first fragments, no trailing bytes) (plain-P4 P4EAD at 1 and 4 rounds per pass, and the extern); the unauthenticated
baseline build, by contrast, takes forged updates."""
import pathlib
import struct
import subprocess

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from conftest import console_script
from p4sec import inband
from tests.hashing.stf import Stf

INBAND = console_script("p4sec-inband")

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "programs" / "inband_kv_cache.p4"
CLIENT_MAC, SERVER_MAC, SWITCH_MAC = "02:00:00:00:00:01", "02:00:00:00:00:02", "02:00:00:00:00:fe"
CLIENT_IP, SERVER_IP = "10.0.0.1", "10.0.0.2"
KEY = bytes(range(0x40, 0x50))
SENDER = 5
BUILDS = {"rpp1": ["P4EAD_RPP=1"], "rpp4": ["P4EAD_RPP=4"], "extern": ["INBAND_EXTERN"], "noauth": ["INBAND_NO_AUTH"]}


def get(key, req_id=1):
    return Ether(src=CLIENT_MAC, dst=SERVER_MAC) / IP(src=CLIENT_IP, dst=SERVER_IP, id=1) / UDP(sport=40000, dport=inband.KV_PORT, chksum=0) / \
        inband.kv_payload(inband.KV_GET, key, req_id=req_id)


def hit(key, value, req_id=1):
    return Ether(src=SERVER_MAC, dst=CLIENT_MAC) / IP(src=SERVER_IP, dst=CLIENT_IP, id=1) / UDP(sport=inband.KV_PORT, dport=40000, chksum=0) / \
        inband.kv_payload(inband.KV_REPLY, key, value, req_id=req_id, status=inband.KV_HIT)


def control(payload):
    return Ether(src=SERVER_MAC, dst=SWITCH_MAC) / IP(src=SERVER_IP, dst="10.0.0.254", id=2) / UDP(sport=40001, dport=inband.CTL_PORT, chksum=0) / payload


def setup(stf, variant="aead128"):
    stf.add(f"add KvIngress.l2_fwd hdr.ethernet.dst_addr:0x{SERVER_MAC.replace(':', '')} KvIngress.forward(port:2)")
    stf.add(f"add KvIngress.l2_fwd hdr.ethernet.dst_addr:0x{CLIENT_MAC.replace(':', '')} KvIngress.forward(port:1)")
    stf.add(f"add KvIngress.ctl_senders hdr.ctl.sender:{SENDER} KvIngress.set_sender(key:0x{KEY.hex()}, variant:{inband.VARIANTS[variant]}, index:{SENDER})")


def run(p4sec_bin, stf, build, tmp_path):
    path = pathlib.Path(tmp_path) / "test.stf"
    path.write_text("\n".join(stf.lines) + "\n")
    args = [str(p4sec_bin), "stf", str(PROGRAM), str(path)]
    for d in BUILDS[build]:
        args += ["-D", d]
    return subprocess.run(args, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("variant", ["aead128", "v12"])
@pytest.mark.parametrize("build", ["rpp1", "rpp4", "extern"])
def test_only_authentic_new_control_packets_change_the_cache(p4sec_bin, tmp_path, build, variant):
    stf = Stf()
    setup(stf, variant)
    k1, k2, k3 = 0x1111, 0x2222, 0x3333
    pay = lambda seq, ups, key=KEY, sender=SENDER: inband.control_payload(key, variant, sender, seq, ups)
    stats = dict.fromkeys(inband.CTL_STATS, 0)

    # a miss goes on to the server
    stf.packet(1, get(k1))
    stf.expect(2, get(k1))
    # seq 1 installs k1 and k2; the switch consumes it and answers from the cache
    seq1 = pay(1, [(k1, 100), (k2, 200)])
    stf.packet(2, control(seq1))
    stats["accepted"] += 1
    stf.packet(1, get(k1, 2))
    stf.expect(1, hit(k1, 100, 2))
    stf.packet(1, get(k2, 3))
    stf.expect(1, hit(k2, 200, 3))

    # forgeries of seq 2 (k1 := 666): every 5th bit of header, body and tag flipped in turn
    forged = bytearray(pay(2, [(k1, 666)]))
    last_seq = 1
    for bit in range(0, len(forged) * 8, 5):
        f = bytearray(forged)
        f[bit // 8] ^= 0x80 >> (bit % 8)
        version, op, count, sender, seq = struct.unpack("!BBHIQ", f[:16])
        if sender != SENDER:
            stats["unknown_sender"] += 1
        elif version != 1 or op != 1 or count > 2:
            stats["malformed"] += 1
        elif seq <= last_seq:
            stats["replayed"] += 1
        else:
            stats["bad_tag"] += 1
        stf.packet(2, control(bytes(f)))
    # an unauthenticated packet (clear body, no tag) and one from an unknown sender with a good tag of its own key
    stf.packet(2, control(inband.control_payload(KEY, variant, SENDER, 2, [(k1, 667)], auth=False)))
    stats["bad_tag"] += 1
    stf.packet(2, control(pay(2, [(k1, 668)], key=bytes(16), sender=SENDER + 1)))
    stats["unknown_sender"] += 1
    # a genuine fresh packet (seq 2, k1 := 669), but not exactly what the tag covers: sent as a first fragment
    # (MF set), with 8 bytes after the tag in the UDP payload, with the IP datagram longer than the UDP datagram,
    # and with 4 bytes after the IP datagram in the frame
    fresh = pay(2, [(k1, 669)])
    frag = Ether(src=SERVER_MAC, dst=SWITCH_MAC) / IP(src=SERVER_IP, dst="10.0.0.254", id=3, flags="MF") / \
        UDP(sport=40001, dport=inband.CTL_PORT, chksum=0) / fresh
    stf.packet(2, frag)
    stf.packet(2, control(fresh + bytes(8)))
    longer_ip = control(fresh)
    longer_ip[IP].len = 20 + 8 + len(fresh) + 4
    stf.packet(2, bytes(longer_ip) + bytes(4))
    stf.packet(2, bytes(control(fresh)) + bytes(4))
    stats["malformed"] += 4
    stf.packet(1, get(k1, 4))
    stf.expect(1, hit(k1, 100, 4))

    # seq 2 (genuine) changes k1; replaying seq 1 does not bring 100 back
    stf.packet(2, control(pay(2, [(k1, 101)])))
    stats["accepted"] += 1
    stf.packet(2, control(seq1))
    stats["replayed"] += 1
    stf.packet(1, get(k1, 5))
    stf.expect(1, hit(k1, 101, 5))
    # reordered: seq 4 arrives before seq 3; the older one is refused
    seq3, seq4 = pay(3, [(k3, 300)]), pay(4, [(k3, 301)])
    stf.packet(2, control(seq4))
    stf.packet(2, control(seq3))
    stats["accepted"] += 1
    stats["replayed"] += 1
    stf.packet(1, get(k3, 6))
    stf.expect(1, hit(k3, 301, 6))
    # a PUT invalidates the cached copy: the next GET misses
    put = Ether(src=CLIENT_MAC, dst=SERVER_MAC) / IP(src=CLIENT_IP, dst=SERVER_IP, id=1) / UDP(sport=40000, dport=inband.KV_PORT, chksum=0) / \
        inband.kv_payload(inband.KV_PUT, k2, 201)
    stf.packet(1, put)
    stf.expect(2, put)
    stf.packet(1, get(k2, 7))
    stf.expect(2, get(k2, 7))

    for i, name in enumerate(inband.CTL_STATS[:5]):
        stf.add(f"check_counter KvIngress.ctl_stats({i}) packets == {stats[name]}")
    stf.add("check_counter KvIngress.kv_stats(0) packets == 5")
    stf.add("check_counter KvIngress.kv_stats(1) packets == 2")
    assert stats["bad_tag"] > 50 and stats["unknown_sender"] > 5 and stats["malformed"] > 5
    r = run(p4sec_bin, stf, build, tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]


def test_the_unauthenticated_baseline_takes_forged_updates(p4sec_bin, tmp_path):
    stf = Stf()
    setup(stf)
    stf.packet(2, control(inband.control_payload(KEY, "aead128", SENDER, 9, [(0x1111, 100)], auth=False)))
    stf.packet(1, get(0x1111))
    stf.expect(1, hit(0x1111, 100))
    # an attacker rewrites the value: without a tag, a higher sequence number is all it takes
    stf.packet(2, control(inband.control_payload(KEY, "aead128", SENDER, 10, [(0x1111, 666)], auth=False)))
    stf.packet(1, get(0x1111, 2))
    stf.expect(1, hit(0x1111, 666, 2))
    r = run(p4sec_bin, stf, "noauth", tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]


def test_control_payloads_verify_in_python_and_match_the_reference_cipher():
    ascon = pytest.importorskip("ascon")
    p = inband.control_payload(KEY, "v12", SENDER, 42, [(7, 8), (9, 10)])
    assert inband.verify_control_payload(KEY, "v12", p) == (SENDER, 42, [(7, 8), (9, 10)])
    # the designers' Python implementation of ASCON-128 v1.2 agrees
    assert ascon.encrypt(KEY, inband.nonce_for(SENDER, 42), p[:16], inband.body_of([(7, 8), (9, 10)]), variant="Ascon-128") == p[16:]
    bad = bytearray(p)
    bad[20] ^= 1
    with pytest.raises(inband.AuthError):
        inband.verify_control_payload(KEY, "v12", bytes(bad))
    with pytest.raises(inband.InbandError):
        inband.body_of([(1, 2)] * 3)


def test_cli_builds_and_verifies(tmp_path):
    r = subprocess.run([INBAND, "build", "--key", KEY.hex(), "--sender", "5", "--seq", "3", "0x10=0x20"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    v = subprocess.run([INBAND, "verify", "--key", KEY.hex(), r.stdout.strip()], capture_output=True, text=True)
    assert v.returncode == 0 and '"updates": [[16, 32]]' in v.stdout, v.stdout + v.stderr
    bad = subprocess.run([INBAND, "verify", "--key", bytes(16).hex(), r.stdout.strip()], capture_output=True, text=True)
    assert bad.returncode == 1 and "verify" in bad.stderr
    bad = subprocess.run([INBAND, "build", "--key", "abcd", "--sender", "5", "--seq", "3", "1=2"], capture_output=True, text=True)
    assert bad.returncode == 1 and "16 bytes" in bad.stderr
