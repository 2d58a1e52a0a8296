"""AF_XDP ports (`--port N=xdp:IFACE`): the p4sec switch on veth pairs whose host ends live in network
namespaces, the IPv4 router program pushed over P4Runtime, scapy sending from one namespace and sniffing in
the other. Frames of 60, 1500 and 9000 bytes (jumbo frames through multi-buffer sockets and the switch's own
frags-aware XDP program); the fallback to the packet socket, with its reason logged, where AF_XDP cannot be
used (P4SEC_NO_XDP, another XDP program on the interface)."""
import os
import re
import subprocess
import sys
import time

import pytest
from p4sec.infra.netns import sh

from swrig import metrics_of, start_router, topo, topo2  # noqa: F401 (fixtures)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces and XDP")

# frames of exactly `size` bytes (Ethernet header included, no FCS): UDP payload = size - 42
SEND_SNIFF = r"""
import sys, time
from scapy.all import Ether, IP, UDP, Raw, sendp, AsyncSniffer, conf
role, iface, n, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
if role == "sniff":
    s = AsyncSniffer(iface=iface, filter="udp and port 4242", count=n, timeout=10)
    s.start(); time.sleep(0.5); print("ready", flush=True); s.join()
    for p in s.results or []:
        print(bytes(p).hex(), flush=True)
else:
    payload = bytes(i % 251 for i in range(size - 42))
    frames = [Ether(dst="02:00:00:00:00:01", src="02:00:00:00:01:01") / IP(src="10.0.1.1", dst="10.0.2.2", ttl=64, id=i)
              / UDP(sport=4242, dport=4242) / Raw(payload) for i in range(n)]
    assert len(bytes(frames[0])) == size, len(bytes(frames[0]))
    sendp(frames, iface=iface, verbose=False)
"""


def set_mtu(topo, mtu):
    for n, host, sw in topo:
        sh("ip", "link", "set", sw, "mtu", str(mtu))
        sh("ip", "netns", "exec", n, "ip", "link", "set", host, "mtu", str(mtu))


def run_router(p4sec_bin, topo, tmp_path, sizes, n=5, env=None, workers=1):
    """Start the switch with both ports as xdp:IFACE, program the route to 10.0.2.0/24 via port 2, send `n`
    frames of each size from h1 and check what h2 gets; returns (switch log, metrics)."""
    (ns1, h1, s1), (ns2, h2, s2) = topo
    sw, mport, logf = start_router(p4sec_bin, tmp_path, ["--port", f"1=xdp:{s1}", "--port", f"2=xdp:{s2}"], workers=workers,
                                   env={**os.environ, **(env or {})})
    try:
        for size in sizes:
            sniff = subprocess.Popen(["ip", "netns", "exec", ns2, sys.executable, "-c", SEND_SNIFF, "sniff", h2, str(n), str(size)],
                                     stdout=subprocess.PIPE, text=True)
            assert sniff.stdout.readline().strip() == "ready"
            subprocess.run(["ip", "netns", "exec", ns1, sys.executable, "-c", SEND_SNIFF, "send", h1, str(n), str(size)],
                           check=True, timeout=60)
            got = [bytes.fromhex(line.strip()) for line in sniff.stdout if line.strip()]
            sniff.wait(timeout=20)
            assert len(got) == n, f"{size}-byte frames: received {len(got)} of {n}; log: {logf.read_text()[-1500:]}"
            for f in got:
                assert len(f) == size, f"a {size}-byte frame arrived with {len(f)} bytes"
                assert f[0:6] == bytes.fromhex("020000000202"), "destination MAC rewritten"
                assert f[14 + 8] == 63, "TTL decremented"
                assert f[14 + 16:14 + 20] == bytes([10, 0, 2, 2])
                assert f[42:] == bytes(i % 251 for i in range(size - 42)), "payload intact"
        metrics = metrics_of(mport)
        return logf.read_text(), metrics
    finally:
        sw.terminate()
        sw.wait(timeout=10)


def test_xdp_port_forwards_and_counts_60_and_1500_byte_frames(p4sec_bin, topo, tmp_path):
    (_, _, s1), (_, _, s2) = topo
    n = 5
    log, metrics = run_router(p4sec_bin, topo, tmp_path, [60, 1514], n=n)
    # both ports really are AF_XDP sockets (veth: native XDP, copy mode)
    for p, s in ((1, s1), (2, s2)):
        assert f"port {p}: interface `{s}` (AF_XDP, native XDP" in log, log
    assert "falling back" not in log, log
    assert "libxdp:" not in log, "libxdp's messages only at --log debug"
    # the frames went through the XDP sockets and were counted there (scapy may add nothing on these veths)
    assert metrics[f'p4sec_port_rx_packets_total{{port="1",iface="xdp:{s1}"}}'] >= 2 * n
    assert metrics[f'p4sec_port_tx_packets_total{{port="2",iface="xdp:{s2}"}}'] >= 2 * n
    assert metrics[f'p4sec_port_tx_errors_total{{port="2",iface="xdp:{s2}"}}'] == 0
    assert metrics['p4sec_table_lookups_total{table="RouterIngress.ipv4_lpm",result="hit"}'] >= 2 * n


def test_xdp_port_carries_frames_up_to_its_largest(p4sec_bin, topo, tmp_path):
    """An MTU of 3000: frames of 3014 bytes still fit one 4096-byte UMEM buffer (less the kernel's 256 bytes of
    headroom), so the port stays on AF_XDP."""
    (_, _, s1), (_, _, s2) = topo
    set_mtu(topo, 3000)
    log, _ = run_router(p4sec_bin, topo, tmp_path, [3014], n=3)
    assert f"port 1: interface `{s1}` (AF_XDP, native XDP" in log, log
    assert "falling back" not in log, log


def test_veth_mtu_above_its_single_buffer_limit_takes_multi_buffer(p4sec_bin, topo, tmp_path):
    """An MTU of 3700 fits one UMEM buffer, but a veth refuses a program that is not frags-aware above about
    3500: the port takes the multi-buffer path instead of falling back, and 3714-byte frames arrive."""
    (_, _, s1), (_, _, s2) = topo
    set_mtu(topo, 3700)
    log, _ = run_router(p4sec_bin, topo, tmp_path, [60, 3714], n=3)
    for p, s in ((1, s1), (2, s2)):
        assert f"port {p}: interface `{s}` (AF_XDP, native XDP, copy mode, multi-buffer" in log, log
    assert "falling back" not in log, log


def xdp_attached(iface):
    """The id of the XDP program attached to `iface` (the switch's end, in the root namespace), or None."""
    out = subprocess.run(["ip", "-d", "link", "show", iface], capture_output=True, text=True, check=True).stdout
    m = re.search(r"prog/xdp id (\d+)", out)
    return int(m.group(1)) if m else None


def test_jumbo_frames_through_multi_buffer_xdp_sockets(p4sec_bin, topo, tmp_path):
    """An MTU of 9000 does not fit one UMEM buffer: the ports become multi-buffer XDP sockets under the switch's
    frags-aware program, and frames of 60 to 9014 bytes (one, two and three buffers, and a buffer's exact
    size) arrive whole. The program goes with the switch."""
    (_, _, s1), (_, _, s2) = topo
    set_mtu(topo, 9000)
    sizes = [60, 3838, 4096, 4097, 8192, 9014]
    log, metrics = run_router(p4sec_bin, topo, tmp_path, sizes, n=3)
    for p, s in ((1, s1), (2, s2)):
        assert f"port {p}: interface `{s}` (AF_XDP, native XDP, copy mode, multi-buffer" in log, log
    assert "falling back" not in log, log
    assert metrics[f'p4sec_port_rx_packets_total{{port="1",iface="xdp:{s1}"}}'] >= 3 * len(sizes)
    assert metrics[f'p4sec_port_tx_packets_total{{port="2",iface="xdp:{s2}"}}'] >= 3 * len(sizes)
    assert metrics[f'p4sec_port_rx_errors_total{{port="1",iface="xdp:{s1}"}}'] == 0
    assert metrics[f'p4sec_port_tx_errors_total{{port="2",iface="xdp:{s2}"}}'] == 0
    # the switch has stopped: its program is no longer on the interfaces
    assert xdp_attached(s1) is None and xdp_attached(s2) is None


@pytest.mark.parametrize("mtu", [1500, 9000])
def test_xdp_program_is_removed_when_the_switch_is_killed(p4sec_bin, topo, tmp_path, mtu):
    """The switch's XDP program (frags-aware for jumbo frames) hangs on a BPF link: a switch killed with SIGKILL
    leaves no program behind that would keep taking the interface's frames, and a switch started again gets
    AF_XDP with its own program and forwards."""
    (_, _, s1), (_, _, s2) = topo
    if mtu != 1500:
        set_mtu(topo, mtu)
    (tmp_path / "a").mkdir()
    sw, _, logf = start_router(p4sec_bin, tmp_path / "a", ["--port", f"1=xdp:{s1}", "--port", f"2=xdp:{s2}"], env=dict(os.environ))
    try:
        log = logf.read_text()
        assert ("multi-buffer" in log) == (mtu > 1500), log
        assert f"port 1: interface `{s1}` (AF_XDP" in log and "the switch's" in log, log
        assert xdp_attached(s1) is not None
    finally:
        sw.kill()
        sw.wait(timeout=10)
    # the kernel releases the link with the process's last descriptor
    for _ in range(50):
        if xdp_attached(s1) is None:
            break
        time.sleep(0.1)
    assert xdp_attached(s1) is None and xdp_attached(s2) is None
    log, metrics = run_router(p4sec_bin, topo, tmp_path, [60], n=3)
    assert f"port 1: interface `{s1}` (AF_XDP" in log and "the switch's" in log, log
    assert metrics[f'p4sec_port_tx_packets_total{{port="2",iface="xdp:{s2}"}}'] >= 3


def test_interface_holding_libxdps_program_gets_it_reused(p4sec_bin, topo, tmp_path):
    """An interface that still holds libxdp's XSK program (left, e.g., by a switch killed before it had its own
    program on a BPF link; here attached with `ip link`): the switch's own program cannot be attached next to
    it, so libxdp takes the socket with its program, and the port forwards on AF_XDP."""
    obj = next((p for p in ("/usr/lib/x86_64-linux-gnu/bpf/xsk_def_xdp_prog.o", "/usr/lib/aarch64-linux-gnu/bpf/xsk_def_xdp_prog.o",
                            "/usr/lib/bpf/xsk_def_xdp_prog.o") if os.path.exists(p)), None)
    if obj is None:
        pytest.skip("libxdp's xsk_def_xdp_prog.o is not installed (Debian: libxdp1)")
    (_, _, s1), (_, _, s2) = topo
    sh("ip", "link", "set", "dev", s1, "xdpdrv", "obj", obj, "sec", "xdp")
    assert xdp_attached(s1) is not None
    log, metrics = run_router(p4sec_bin, topo, tmp_path, [60, 1514], n=3)
    assert f"port 1: interface `{s1}` (AF_XDP, native XDP, copy mode, libxdp's XDP program" in log, log
    assert f"port 2: interface `{s2}` (AF_XDP, native XDP, copy mode, the switch's XDP program" in log, log
    assert metrics[f'p4sec_port_rx_packets_total{{port="1",iface="xdp:{s1}"}}'] >= 6


def test_jumbo_port_falls_back_when_the_interface_has_another_xdp_program(p4sec_bin, topo, tmp_path):
    """A second switch on an interface whose XDP hook the first one holds: the multi-buffer setup fails with the
    reason logged, and the port falls back to the packet socket."""
    (_, _, s1), (_, _, s2) = topo
    set_mtu(topo, 9000)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, _, _ = start_router(p4sec_bin, tmp_path / "a", ["--port", f"1=xdp:{s1}"], env=dict(os.environ))
    try:
        second, _, logf = start_router(p4sec_bin, tmp_path / "b", ["--port", f"1=xdp:{s1}", "--port", f"2={s2}"], env=dict(os.environ))
        second.terminate()
        second.wait(timeout=10)
        log = logf.read_text()
        assert f"port 1: AF_XDP not used on `{s1}` (MTU 9000 does not fit a 4096-byte UMEM buffer, and multi-buffer AF_XDP " \
               "cannot be used: cannot attach a multi-buffer XDP program" in log, log
        assert "another XDP program is attached to it" in log, log
        assert f"port 1: interface `{s1}` (packet socket" in log, log
    finally:
        first.terminate()
        first.wait(timeout=10)


def test_fallback_when_xdp_cannot_be_set_up(p4sec_bin, topo, tmp_path):
    """P4SEC_NO_XDP makes every AF_XDP setup fail (as a missing libxdp would): the switch logs the reason, uses
    the packet socket and forwards."""
    (_, _, s1), (_, _, s2) = topo
    log, metrics = run_router(p4sec_bin, topo, tmp_path, [60], n=5, env={"P4SEC_NO_XDP": "1"})
    assert f"port 1: AF_XDP not used on `{s1}` (P4SEC_NO_XDP is set); falling back to the packet socket" in log, log
    assert "AF_XDP, native XDP" not in log, log
    assert metrics[f'p4sec_port_rx_packets_total{{port="1",iface="xdp:{s1}"}}'] >= 5


def test_xdp_on_a_single_queue_veth_with_two_workers_falls_back(p4sec_bin, topo, tmp_path):
    """Two workers need two receive queues (one XDP socket each); a veth made with one has no queue 1, so the
    port falls back to a PACKET_FANOUT group and still forwards."""
    (_, _, s1), (_, _, s2) = topo
    log, _ = run_router(p4sec_bin, topo, tmp_path, [60], n=5, workers=2)
    assert f"port 1: AF_XDP not used on `{s1}` (" in log and "queue 1" in log, log


def test_benchmark_prints_both_port_kinds_in_one_run(tmp_path, p4sec_bin):
    """`python -m bench.veth --port-kind afpacket,xdp`: one row per port kind in the same run, each with the
    switch's CPU time per frame and its workers' heap allocations, and the xdp row really on AF_XDP. Not a speed test."""
    import json
    from bench import veth as bench_veth
    out = tmp_path / "veth.json"
    bench_veth.main(["--seconds", "0.5", "--sizes", "64", "--workers", "1", "--lossless-steps", "0", "--port-kind", "afpacket,xdp",
                     "--json", str(out), "--p4sec", str(p4sec_bin)])
    rows = json.loads(out.read_text())["rows"]
    assert [(r["port_kind"], r["port_used"]) for r in rows] == [("afpacket", "afpacket"), ("xdp", "xdp")]
    for r in rows:
        assert r["p4sec_pps"] > 1000 and r["p4sec_pps"] <= r["offered_pps_p4sec_run"] * 1.05
        assert 0 < r["switch_cpu_ns_per_frame"] < 1e9
        # the switch's workers, warmed up by the sender's first 0.3 s, allocate nothing in the measured window
        assert r["heap_allocations"] == 0, r


def test_two_workers_on_two_queue_veths_each_get_an_xdp_socket(p4sec_bin, topo2, tmp_path):
    """Two workers, veths with two queues: worker w binds queue w, both ports stay on AF_XDP and forward."""
    (_, _, s1), (_, _, s2) = topo2
    log, metrics = run_router(p4sec_bin, topo2, tmp_path, [60, 1514], n=5, workers=2)
    for p, s in ((1, s1), (2, s2)):
        assert f"port {p}: interface `{s}` (AF_XDP, native XDP, copy mode, the switch's XDP program, 2 receive queue(s)" in log, log
    assert "falling back" not in log, log
    assert metrics[f'p4sec_port_tx_packets_total{{port="2",iface="xdp:{s2}"}}'] >= 10


def test_two_workers_share_one_multi_buffer_program(p4sec_bin, topo2, tmp_path):
    """Two workers on two-queue veths at MTU 9000: one frags-aware program per interface, whose XSK map directs
    each queue to its worker's socket; jumbo and small frames are forwarded, and the program goes with the
    switch."""
    (_, _, s1), (_, _, s2) = topo2
    set_mtu(topo2, 9000)
    log, metrics = run_router(p4sec_bin, topo2, tmp_path, [60, 9014], n=4, workers=2)
    for p, s in ((1, s1), (2, s2)):
        assert f"port {p}: interface `{s}` (AF_XDP, native XDP, copy mode, multi-buffer" in log and "2 receive queue(s)" in log, log
    assert "falling back" not in log, log
    assert metrics[f'p4sec_port_tx_packets_total{{port="2",iface="xdp:{s2}"}}'] >= 8
    assert xdp_attached(s1) is None and xdp_attached(s2) is None

