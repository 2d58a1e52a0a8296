"""programs/syn_cookies.p4: SYN cookies computed with SipHash-2-4 in the data plane; cookies and reply
packets are checked against siphash24's reference code and scapy's TCP/IP encoding (checksums included)."""
import pathlib

import siphash24
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from .stf import Stf

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "programs" / "syn_cookies.p4"
KEY = bytes.fromhex("00112233445566778899aabbccddeeff")
CLIENT_PORT, SERVER_PORT = 1, 2
CMAC, SMAC = "02:00:00:00:00:01", "02:00:00:00:00:02"
SERVER = "192.0.2.80"


def ip4(a):
    return bytes(int(x) for x in a.split("."))


def cookie(src, dst, sport, dport, epoch, key=KEY):
    """The first 31 bits of SipHash-2-4 over the 4-tuple and the epoch, then the epoch's low bit."""
    msg = ip4(src) + ip4(dst) + sport.to_bytes(2, "big") + dport.to_bytes(2, "big") + bytes([epoch % 256])
    first = int.from_bytes(siphash24.siphash24(msg, key=key).digest()[:4], "big")
    return (first & ~1) | (epoch & 1)


def config(stf, active=1, epoch=7, key=KEY):
    stf.add(f"add ScIngress.sc_port sm.ingress_port:{CLIENT_PORT} ScIngress.protect(server_port:{SERVER_PORT}, active:{active}, key:0x{key.hex()}, epoch:{epoch})")
    stf.add(f"add ScIngress.sc_port sm.ingress_port:{SERVER_PORT} ScIngress.server(client_port:{CLIENT_PORT})")


def syn(client, sport, seq, options=True):
    opts = [("MSS", 1460), ("SAckOK", b""), ("WScale", 7)] if options else []
    return Ether(dst=SMAC, src=CMAC) / IP(src=client, dst=SERVER, id=4321, ttl=61) / TCP(sport=sport, dport=80, seq=seq, flags="S", window=64240, options=opts)


def ack(client, sport, seq, ack_no, payload=b""):
    p = Ether(dst=SMAC, src=CMAC) / IP(src=client, dst=SERVER, ttl=61) / TCP(sport=sport, dport=80, seq=seq, ack=ack_no, flags="A", window=502)
    return p / Raw(payload) if payload else p


def reply(client, sport, seq, ack_no, flags):
    """What the switch must send back (scapy fills lengths and checksums)."""
    window = 0 if flags == "R" else 8192
    return Ether(dst=CMAC, src=SMAC) / IP(src=SERVER, dst=client, id=0, flags="DF", ttl=64) / TCP(sport=80, dport=sport, seq=seq, ack=ack_no, flags=flags, window=window)


def run_ok(stf, p4sec_bin, tmp_path):
    r = stf.run(p4sec_bin, PROGRAM, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


def test_syn_is_answered_with_a_cookie_and_the_right_ack_admits_the_client(p4sec_bin, tmp_path):
    stf = Stf()
    config(stf)
    clients = [("198.51.100.%d" % i, 40000 + i, 1000 * i + 17) for i in range(1, 9)]
    for c, sport, isn in clients:
        stf.packet(CLIENT_PORT, syn(c, sport, isn))
        stf.expect(CLIENT_PORT, reply(c, sport, cookie(c, SERVER, sport, 80, 7), isn + 1, "SA"))
    for c, sport, isn in clients:
        k = cookie(c, SERVER, sport, 80, 7)
        stf.packet(CLIENT_PORT, ack(c, sport, isn + 1, k + 1))
        stf.expect(CLIENT_PORT, reply(c, sport, k + 1, 0, "R"))
    # admitted clients now reach the server unchanged, SYN and data alike
    for c, sport, isn in clients:
        s = syn(c, sport + 1, isn + 5)
        stf.packet(CLIENT_PORT, s)
        stf.expect(SERVER_PORT, s)
    d = ack(clients[0][0], 40001, 5, 6, b"GET / HTTP/1.1\r\n\r\n")
    stf.packet(CLIENT_PORT, d)
    stf.expect(SERVER_PORT, d)
    n = len(clients)
    stf.add(f"check_counter ScIngress.sc_stats(0) packets == {n}")
    stf.add(f"check_counter ScIngress.sc_stats(1) packets == {n}")
    stf.add(f"check_counter ScIngress.sc_stats(4) packets == {n + 1}")
    run_ok(stf, p4sec_bin, tmp_path)


def test_wrong_cookies_and_unknown_clients_are_dropped_and_counted(p4sec_bin, tmp_path):
    stf = Stf()
    config(stf)
    c, sport, isn = "203.0.113.9", 50000, 99
    k = cookie(c, SERVER, sport, 80, 7)
    wrong = [
        ack(c, sport, isn + 1, k),                                   # cookie, not cookie + 1
        ack(c, sport, isn + 1, k + 2),
        ack(c, sport + 1, isn + 1, k + 1),                          # another client port
        ack("203.0.113.10", sport, isn + 1, k + 1),                 # another address
        ack(c, sport, isn + 1, cookie(c, SERVER, sport, 80, 5) + 1),  # two epochs back
        ack(c, sport, isn + 1, cookie(c, SERVER, sport, 80, 8) + 1),  # the next epoch
        ack(c, sport, isn + 1, (k ^ 1) + 1),                          # the cookie with the other epoch bit
        ack(c, sport, isn + 1, cookie(c, SERVER, sport, 80, 7, key=bytes(16)) + 1),  # another key
    ]
    for w in wrong:
        stf.packet(CLIENT_PORT, w)
    others = [
        Ether(dst=SMAC, src=CMAC) / IP(src=c, dst=SERVER) / TCP(sport=sport, dport=80, flags="F"),
        Ether(dst=SMAC, src=CMAC) / IP(src=c, dst=SERVER) / TCP(sport=sport, dport=80, flags="SA"),
        Ether(dst=SMAC, src=CMAC) / IP(src=c, dst=SERVER) / UDP(sport=53, dport=53),
    ]
    for o in others:
        stf.packet(CLIENT_PORT, o)
    stf.packet(5, syn(c, sport, isn))  # unconfigured port
    # the client was never admitted: its next SYN is still answered, not forwarded
    stf.packet(CLIENT_PORT, syn(c, sport, isn))
    stf.expect(CLIENT_PORT, reply(c, sport, k, isn + 1, "SA"))
    stf.add(f"check_counter ScIngress.sc_stats(2) packets == {len(wrong)}")
    stf.add(f"check_counter ScIngress.sc_stats(3) packets == {len(others)}")
    stf.add("check_counter ScIngress.sc_stats(7) packets == 1")
    stf.add("check_counter ScIngress.sc_stats(1) packets == 0")
    run_ok(stf, p4sec_bin, tmp_path)


def test_inactive_defence_and_server_side_pass_unchanged(p4sec_bin, tmp_path):
    stf = Stf()
    config(stf, active=0)
    s = syn("198.51.100.1", 40000, 1)
    stf.packet(CLIENT_PORT, s)
    stf.expect(SERVER_PORT, s)
    back = Ether(dst=CMAC, src=SMAC) / IP(src=SERVER, dst="198.51.100.1") / TCP(sport=80, dport=40000, flags="SA", seq=5, ack=2)
    stf.packet(SERVER_PORT, back)
    stf.expect(CLIENT_PORT, back)
    stf.add("check_counter ScIngress.sc_stats(5) packets == 1")
    stf.add("check_counter ScIngress.sc_stats(6) packets == 1")
    run_ok(stf, p4sec_bin, tmp_path)


def test_a_handshake_that_straddles_an_epoch_change_completes(p4sec_bin, tmp_path):
    """SYN-ACKs sent in the epoch before the current one are still honoured (the controller advanced the
    epoch from 7 to 8 between the SYN-ACK and the client's ACK); across the 255 -> 0 wrap as well."""
    for before, now in [(7, 8), (8, 9), (255, 0)]:
        stf = Stf()
        config(stf, epoch=now)
        c, sport, isn = "198.51.100.77", 41000 + now, 5000
        k = cookie(c, SERVER, sport, 80, before)
        stf.packet(CLIENT_PORT, ack(c, sport, isn + 1, k + 1))
        stf.expect(CLIENT_PORT, reply(c, sport, k + 1, 0, "R"))
        # and a fresh SYN of another (not yet admitted) client gets a cookie of the current epoch
        c2 = "198.51.100.78"
        stf.packet(CLIENT_PORT, syn(c2, sport, isn))
        stf.expect(CLIENT_PORT, reply(c2, sport, cookie(c2, SERVER, sport, 80, now), isn + 1, "SA"))
        stf.add("check_counter ScIngress.sc_stats(1) packets == 1")
        stf.add("check_counter ScIngress.sc_stats(2) packets == 0")
        run_ok(stf, p4sec_bin, tmp_path)
