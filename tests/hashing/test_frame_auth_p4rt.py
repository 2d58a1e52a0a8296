"""programs/frame_auth.p4 on a running p4sec switch, configured over P4Runtime by p4sec.frameauth (and its CLI):
real frames on veth ports, tags and packet numbers checked against siphash24's reference code, replay, and a
key change that loses no frames (a new association at the receiver, then at the sender, then the old one
retired) end to end."""
import json
import os
import subprocess
import sys
import uuid

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from p4sec.frameauth import FrameAuth, FrameAuthError
from p4sec.infra.netns import free_port, ns, sh
from p4sec.infra.runtime import Switch

from .test_frame_auth import PROGRAM, protected

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")

KEY1, KEY2 = bytes(range(0x10, 0x20)), bytes(range(0xa0, 0xb0))
SRC = "02:00:00:00:00:01"

# runs inside the namespace: sniff on some interfaces, send frames, print what each interface received
SEND_SNIFF = r"""
import json, sys, time
from scapy.all import AsyncSniffer, sendp
job = json.loads(sys.stdin.read())
seen = [0]
def count(_):
    seen[0] += 1
sniffers = {i: AsyncSniffer(iface=i, filter="ether src " + job["src"], prn=count, store=True) for i in job["sniff"]}
for s in sniffers.values():
    s.start()
time.sleep(0.4)
for iface, frame in job["send"]:
    sendp(bytes.fromhex(frame), iface=iface, verbose=False)
    time.sleep(0.02)
deadline = time.time() + job["wait"]
while time.time() < deadline and seen[0] < job["expect"]:
    time.sleep(0.05)
time.sleep(0.2)
print(json.dumps({i: [bytes(p).hex() for p in s.stop()] for i, s in sniffers.items()}))
"""


def frames():
    return [Ether(dst="02:00:00:00:00:02", src=SRC) / IP(src="10.0.0.1", dst="10.0.1.1", id=i) / UDP(sport=1000 + i, dport=53) / Raw(bytes([i]) * (20 + 30 * i))
            for i in range(3)]


@pytest.fixture
def rig(p4sec_bin, tmp_path):
    t = uuid.uuid4().hex[:5]
    n = f"fa{t}"
    sh("ip", "netns", "add", n)
    ends = []
    for i in range(1, 5):
        test_end, sw_end = f"ft{i}{t}", f"fs{i}{t}"
        sh("ip", "link", "add", test_end, "type", "veth", "peer", "name", sw_end)
        sh("ip", "link", "set", test_end, "netns", n)
        ns(n, "sysctl", "-qw", f"net.ipv6.conf.{test_end}.disable_ipv6=1", check=False)
        ns(n, "ip", "link", "set", test_end, "up")
        sh("sysctl", "-qw", f"net.ipv6.conf.{sw_end}.disable_ipv6=1", check=False)
        sh("ip", "link", "set", sw_end, "up")
        ends.append((test_end, sw_end))
    out = tmp_path / "frame_auth"
    sh(str(p4sec_bin), "compile", str(PROGRAM), "-o", str(out))
    grpc_port = free_port()
    log = open(tmp_path / "switch.log", "w")
    proc = subprocess.Popen([str(p4sec_bin), "switch", "--grpc", f"127.0.0.1:{grpc_port}"]
                            + [a for i, (_, s) in enumerate(ends, 1) for a in ("--port", f"{i}={s}")], stderr=log)
    sw = Switch(f"127.0.0.1:{grpc_port}")
    sw.push(out)

    def exchange(send, sniff, expect, wait=4.0):
        job = {"src": SRC, "send": [(ends[p - 1][0], bytes(f).hex()) for p, f in send], "sniff": [ends[p - 1][0] for p in sniff],
               "expect": expect, "wait": wait}
        r = subprocess.run(["ip", "netns", "exec", n, sys.executable, "-c", SEND_SNIFF], input=json.dumps(job), capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        got = json.loads(r.stdout.strip().splitlines()[-1])
        return {p: [bytes.fromhex(h) for h in got[ends[p - 1][0]]] for p in sniff}

    yield sw, out, grpc_port, exchange
    sw.close()
    proc.terminate()
    proc.wait(timeout=10)
    for _, s in ends:
        subprocess.run(["ip", "link", "del", s], capture_output=True)
    subprocess.run(["ip", "netns", "del", n], capture_output=True)


def test_tags_replay_and_rekey_over_p4runtime(rig):
    sw, out, grpc_port, exchange = rig
    fa = FrameAuth(sw)
    fa.protect(1, 2, "siphash", KEY1)
    fa.verify(3, 4, "siphash", KEY1.hex())
    fs = frames()

    # protect: each frame numbered 1, 2, 3 on link 2 and tagged over the whole frame and its PN
    got = exchange([(1, f) for f in fs], [2], expect=3)[2]
    assert got == [protected(f, 0, KEY1, pn) for pn, f in enumerate(fs, 1)]
    assert fa.last_pn(2) == 3

    # verify: the tagged frames come back as they were; a replayed one does not
    got = exchange([(3, g) for g in got] + [(3, got[0])], [4], expect=4, wait=2.0)[4]
    assert got == [bytes(f) for f in fs]
    st = fa.stats()
    assert (st["tagged"], st["verified"], st["replayed"], st["wrong_tag"]) == (3, 3, 1, 0), st

    # a frame leaves under association 0 and is still on its way when the key changes
    in_flight = exchange([(1, fs[1])], [2], expect=1)[2]
    assert in_flight == [protected(fs[1], 0, KEY1, 4)]
    # key change: the receiver takes association 1 next to 0, then the sender moves to it (PNs from 1)
    fa.rekey("verify", 3, 4, "siphash", KEY2, an=1)
    fa.rekey("protect", 1, 2, "siphash", KEY2, an=1)
    assert (fa.last_pn(2, an=0), fa.last_pn(2, an=1)) == (4, 0)
    new = exchange([(1, fs[0])], [2], expect=1)[2]
    assert new == [protected(fs[0], 0, KEY2, 1, an=1)]
    # both the frame in flight under the old association and the new one verify: nothing is lost
    got = exchange([(3, new[0]), (3, in_flight[0])], [4], expect=2, wait=2.0)[4]
    assert got == [bytes(fs[0]), bytes(fs[1])]
    # the old association retired: its frames are dropped from now on
    fa.retire(3, 0)
    got = exchange([(3, protected(fs[2], 0, KEY1, 5))], [4], expect=0, wait=1.0)[4]
    assert got == []
    st = fa.stats()
    assert (st["verified"], st["wrong_tag"], st["replayed"], st["no_association"]) == (5, 0, 1, 1), st
    # moving the sender to the association it already uses would restart its PNs under a live window
    with pytest.raises(FrameAuthError, match="already sends under association 1"):
        fa.rekey("protect", 1, 2, "siphash", KEY1, an=1)

    # the CLI reads the same counters; bad input is a precise error, not a traceback
    cli = [sys.executable, "-m", "p4sec.frameauth", "--grpc", f"127.0.0.1:{grpc_port}", "--election-id", "2", "--program", str(out)]
    r = subprocess.run(cli + ["show", "--json"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == st
    r = subprocess.run(cli + ["verify", "5", "6", "--key", "abcd"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "the key must be 16 bytes (32 hex digits), not 2" in r.stderr
    r = subprocess.run(cli + ["retire", "9", "--an", "0"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "port 9 has no receive association 0" in r.stderr and "Traceback" not in r.stderr, r.stderr
    r = subprocess.run(cli + ["rekey", "protect", "3", "4", "--an", "2", "--key", KEY2.hex()], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "port 3 is not a protecting port" in r.stderr, r.stderr
    r = subprocess.run(cli + ["rekey", "verify", "3", "4", "--an", "4", "--key", KEY2.hex()], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "association number 4 is not one of 0..3" in r.stderr, r.stderr
    # the CLI's key change, receiver side: association 2 installed
    r = subprocess.run(cli + ["rekey", "verify", "3", "4", "--an", "2", "--key", KEY1.hex()], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert sw.table_get("FaIngress.fa_rx_sa", {"sm.ingress_port": ("exact", b"\x00\x03"), "hdr.fa.an": ("exact", b"\x02")}) == \
        ("FaIngress.rx_sa", {"alg": 0, "key": int.from_bytes(KEY1, "big")})
