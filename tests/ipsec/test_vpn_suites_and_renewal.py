"""The paper's Figure 18 setup (H1 - S1 = WAN = S2 - H2) driven by the controller: every cipher suite (and
BYPASS) crosses the WAN as ESP that scapy decrypts with the keys the controller reports; and re-keying under
load, driven by the SAs' own soft-lifetime digests, loses no packet of a sequence-numbered UDP stream."""
import os
import subprocess
import sys

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.ipsec import ESP, SecurityAssociation
from scapy.layers.l2 import Ether

from ctlrig import gateway_pair
from p4sec.infra import runtime
from test_site_to_site import net, send_and_capture  # noqa: F401 (fixture)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")

SCAPY = {"null": ("NULL", "SHA2-256-128"), "aes-ctr-hmac-md5": ("AES-CTR", "HMAC-MD5-96"), "aes-gcm-128": ("AES-GCM", None),
         "chacha20-poly1305": ("CHACHA20-POLY1305", None)}

STREAM = r"""
import socket, struct, sys, time
role, iface = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.bind((iface, 0))
if role == "send":
    frame, n, rate = bytes.fromhex(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
    start = time.monotonic()
    for i in range(n):
        while time.monotonic() < start + i / rate:
            time.sleep(0.0002)
        s.send(frame[:-4] + struct.pack("!I", i))
    print(n, flush=True)
else:
    n, got = int(sys.argv[3]), set()
    s.settimeout(3)
    print("ready", flush=True)
    try:
        while len(got) < n:
            f = s.recv(2048)
            if len(f) >= 46 and f[12:14] == b"\x08\x00" and f[23] == 17 and f[36:38] == b"\x10\x92":
                got.add(struct.unpack("!I", f[-4:])[0])
    except socket.timeout:
        pass
    print(" ".join(map(str, sorted(got))), flush=True)
"""


@pytest.fixture
def vpn(p4sec_bin, net, tmp_path):
    with gateway_pair(p4sec_bin, net, tmp_path, grace=0.5) as (ctl, _, _):
        yield ctl


def test_every_suite_crosses_as_esp_that_scapy_decrypts(vpn, net):
    for suite in ["bypass"] + list(SCAPY):
        spis = vpn.connect("A", "B", suite=suite)
        got, esp = send_and_capture(net, 2)
        assert len(got) == 2 and all(b"secret-payload" in g for g in got), suite
        if suite == "bypass":
            vpn.disconnect("A-B")
            continue
        assert len(esp) == 2, f"{suite}: the WAN carried ESP"
        spi = spis[("A", "B")][0]
        cfg = vpn.keys(spi)
        crypt, auth = SCAPY[suite]
        rx = SecurityAssociation(ESP, spi=spi, crypt_algo=crypt, crypt_key=bytes(cfg["enc_key"]) or None, auth_algo=auth,
                                 auth_key=bytes(cfg["auth_key"]) or None, tunnel_header=IP(src="192.0.2.1", dst="198.51.100.1"),
                                 esn_en=True, esn=0)
        for e in esp:
            outer = Ether(e)[IP]
            assert outer[ESP].spi == spi
            if suite != "null":
                assert b"secret-payload" not in e, f"{suite}: encrypted on the WAN"
            inner = rx.decrypt(outer)
            assert inner[IP].src == "10.1.0.1" and inner[IP].dst == "10.2.0.2"
            assert b"secret-payload" in bytes(inner[UDP].payload)
        vpn.disconnect("A-B")
    # torn down: nothing gets through any more (no policy: DISCARD)
    got, esp = send_and_capture(net, 1)
    assert got == [] and esp == []
    assert [s["state"] for s in vpn.sas()] == ["deleted"] * 8


def test_renewal_under_load_loses_no_packet(vpn, net):
    # soft limit every 300 packets, hard at 600: the SA itself asks for renewal many times during the run
    vpn.connect("A", "B", suite="aes-gcm-128", soft={"packets": 300}, hard={"packets": 600})
    n, rate = 4000, 1500
    frame = bytes(Ether(dst="02:00:00:00:00:01") / IP(src="10.1.0.1", dst="10.2.0.2", ttl=64) / UDP(sport=4242, dport=4242) / (b"x" * 60))
    rx = subprocess.Popen(["ip", "netns", "exec", net["ns2"], sys.executable, "-c", STREAM, "recv", net["h2"], str(n)],
                          stdout=subprocess.PIPE, text=True)
    assert rx.stdout.readline().strip() == "ready"
    tx = subprocess.run(["ip", "netns", "exec", net["ns1"], sys.executable, "-c", STREAM, "send", net["h1"], frame.hex(), str(n), str(rate)],
                        capture_output=True, text=True, timeout=60)
    assert tx.stdout.strip() == str(n), tx.stderr
    got = {int(x) for x in rx.communicate(timeout=30)[0].split()}
    renewals = [e for e in vpn.events("A-B") if e[2].startswith("renew A->B")]
    assert len(renewals) >= 8, vpn.events("A-B")
    assert all("soft lifetime" in e[2] and "SAD-dec" in e[2] and "SAD-enc" in e[2] for e in renewals)
    missing = sorted(set(range(n)) - got)
    assert not missing, f"{len(missing)} of {n} lost across {len(renewals)} renewals: {missing[:20]}"
    retired = [e for e in vpn.events("A-B") if "old SAD-dec" in e[2] and "removed" in e[2]]
    assert len(retired) >= len(renewals) - 2


def test_a_failed_renewal_leaves_nothing_half_installed(vpn, net):
    """The new SAD-dec is installed on the receiver, then writing the sender's SAD-enc fails: the new SAD-dec and
    its SA are removed again, the slot is free, the old SA stays active, and the next renewal works."""
    ctl = vpn
    ctl.connect("A", "B", "aes-gcm-128")
    old = {r["spi"]: r for r in ctl.sas() if r["state"] == "active"}
    spi = next(s for s, r in old.items() if r["src"] == "A")
    sw_a, sw_b = ctl.gateways["A"].switch, ctl.gateways["B"].switch
    before_b = len(sw_b.table_read("GwIngress.sad_dec"))
    free_b = list(ctl.gateways["B"].free_slots)
    real = sw_a.extern_write

    def failing(*a, **k):
        raise runtime.WriteError("injected: the switch refused the SAD-enc", [False])
    sw_a.extern_write = failing
    try:
        with pytest.raises(runtime.WriteError, match="injected"):
            ctl.renew(spi)
    finally:
        sw_a.extern_write = real
    assert len(sw_b.table_read("GwIngress.sad_dec")) == before_b, "the new SAD-dec entry was removed"
    assert len(ctl.gateways["B"].free_slots) == len(free_b) + 1, "its slot is free again"
    assert {r["spi"] for r in ctl.sas() if r["state"] == "active"} == set(old), "the old SAs stay active"
    assert not [r for r in ctl.sas() if r["spi"] not in old and r["state"] != "deleted"], "no trace of the new SA"
    assert any("failed, the old SA" in str(e) for e in ctl.events())
    new = ctl.renew(spi)
    assert new and new != spi
    assert len(sw_b.table_read("GwIngress.sad_dec")) == before_b + 1, "new SAD-dec beside the retiring one"
