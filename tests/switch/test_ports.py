"""The switch's port kinds and observability options: pcap file ports (batch runs), --pcap-dir captures, --log
levels, TAP and TUN ports (root only: they carry UDP between network namespaces and a veth port through the
IPv4 router), and the errors for bad port arguments."""
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid

import pytest
from p4sec.infra.netns import ns as nsx, sh
from scapy.all import ARP, IP, UDP, Ether, Raw, rdpcap, wrpcap

from conftest import ROOT
from swrig import wait_for
from test_p4runtime import free_port

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for TUN/TAP devices and network namespaces")
TUN_SWITCH_MAC = "02:70:34:73:65:63"


def tun_host_mac(port):
    return f"02:74:75:6e:{port >> 8:02x}:{port & 0xff:02x}"


@pytest.fixture(scope="module")
def fwd(p4sec_bin, tmp_path_factory):
    """tests/switch/programs/port_fwd.p4: port 1 -> 2, anything else -> 1, TTL decremented, no tables."""
    out = tmp_path_factory.mktemp("fwd") / "fwd"
    subprocess.run([str(p4sec_bin), "compile", str(ROOT / "tests" / "switch" / "programs" / "port_fwd.p4"), "-o", str(out)], check=True)
    return out


@pytest.fixture(scope="module")
def router(p4sec_bin, tmp_path_factory):
    out = tmp_path_factory.mktemp("router") / "router"
    subprocess.run([str(p4sec_bin), "compile", str(ROOT / "programs" / "ipv4_router.p4"), "-o", str(out)], check=True)
    return out


def switch(p4sec_bin, *args, timeout=30):
    r = subprocess.run([str(p4sec_bin), "switch", *map(str, args)], capture_output=True, text=True, timeout=timeout)
    assert "panicked" not in r.stderr, r.stderr
    return r


def udp(i, ttl=64, src="10.0.1.1", dst="10.0.2.2"):
    return (Ether(dst="02:00:00:00:00:02", src="02:00:00:00:00:01") / IP(src=src, dst=dst, ttl=ttl, id=i)
            / UDP(sport=1000 + i, dport=4242) / Raw(bytes([i]) * (10 + i)))


def stamped(frames, start=1_700_000_000):
    for i, f in enumerate(frames):
        f.time = start + i * 0.25
    return frames


def check_forwarded(sent, got):
    """`got` is `sent` after the pipeline: TTL one less, a correct header checksum, the rest unchanged."""
    assert len(got) == len(sent)
    for s, g in zip(sent, got):
        if IP not in s:
            assert bytes(g) == bytes(s)
            continue
        assert g[IP].ttl == s[IP].ttl - 1
        assert g[IP].id == s[IP].id
        want = g[IP].copy()
        del want.chksum
        assert g[IP].chksum == IP(bytes(want))[IP].chksum, "IPv4 header checksum recomputed"
        assert bytes(g[UDP]) == bytes(s[UDP])
        assert bytes(g)[:12] == bytes(s)[:12]


@pytest.mark.parametrize("workers", [1, 2])
def test_pcap_batch_run_forwards_and_exits_by_itself(p4sec_bin, fwd, tmp_path, workers):
    a = stamped([udp(i) for i in range(40)] + [udp(99, ttl=1), Ether(dst="ff:ff:ff:ff:ff:ff") / ARP(pdst="10.0.0.9")])
    bad = udp(98)
    bad[IP].chksum = 0x1234  # a wrong header checksum: dropped
    a.insert(5, bad)
    b = stamped([udp(i, src="10.0.2.2", dst="10.0.1.1") for i in range(3)], start=1_800_000_000)
    wrpcap(str(tmp_path / "a.pcap"), a)
    wrpcap(str(tmp_path / "b.pcap"), b)
    t0 = time.time()
    r = switch(p4sec_bin, "--program", fwd, "--workers", workers,
               "--port", f"1=pcap:in={tmp_path / 'a.pcap'},out={tmp_path / 'o1.pcap'}",
               "--port", f"2=pcap:in={tmp_path / 'b.pcap'},out={tmp_path / 'o2.pcap'}")
    assert r.returncode == 0, r.stderr
    assert time.time() - t0 < 10
    assert "all pcap inputs consumed (46 frames)" in r.stderr, r.stderr
    o2 = rdpcap(str(tmp_path / "o2.pcap"))
    expect = [f for f in a if not (IP in f and (f[IP].ttl <= 1 or f[IP].chksum == 0x1234))]
    check_forwarded(expect, o2)
    assert [float(f.time) for f in o2] == [float(f.time) for f in expect], "input timestamps are kept"
    check_forwarded(b, rdpcap(str(tmp_path / "o1.pcap")))


def test_pcap_out_only_and_raw_ip_input(p4sec_bin, fwd, tmp_path):
    """A raw-IP pcap (link type 101) gets the synthetic Ethernet header of TUN ports; an out-only port."""
    pkts = [IP(src="10.0.1.1", dst="10.0.2.2", ttl=9) / UDP(sport=5, dport=6) / Raw(b"raw")]
    wrpcap(str(tmp_path / "raw.pcap"), pkts, linktype=101)
    r = switch(p4sec_bin, "--program", fwd, "--port", f"1=pcap:in={tmp_path / 'raw.pcap'}", "--port", f"2=pcap:out={tmp_path / 'o.pcap'}")
    assert r.returncode == 0, r.stderr
    (f,) = rdpcap(str(tmp_path / "o.pcap"))
    assert f[Ether].dst == TUN_SWITCH_MAC and f[Ether].src == tun_host_mac(1) and f[Ether].type == 0x0800
    assert f[IP].ttl == 8 and bytes(f[UDP]) == bytes(pkts[0][UDP])


def test_pcap_dir_captures_what_went_in_and_out(p4sec_bin, fwd, tmp_path):
    a = stamped([udp(i) for i in range(5)])
    wrpcap(str(tmp_path / "a.pcap"), a)
    cap = tmp_path / "cap" / "sub"
    r = switch(p4sec_bin, "--program", fwd, "--pcap-dir", cap,
               "--port", f"1=pcap:in={tmp_path / 'a.pcap'}", "--port", f"2=pcap:out={tmp_path / 'o.pcap'}")
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in cap.iterdir()) == ["port1-in.pcap", "port1-out.pcap", "port2-in.pcap", "port2-out.pcap"]
    assert [bytes(f) for f in rdpcap(str(cap / "port1-in.pcap"))] == [bytes(f) for f in a]
    out = rdpcap(str(tmp_path / "o.pcap"))
    assert [bytes(f) for f in rdpcap(str(cap / "port2-out.pcap"))] == [bytes(f) for f in out]
    check_forwarded(a, out)
    assert len(rdpcap(str(cap / "port1-out.pcap"))) == 0 and len(rdpcap(str(cap / "port2-in.pcap"))) == 0


def test_log_levels(p4sec_bin, fwd, tmp_path):
    wrpcap(str(tmp_path / "a.pcap"), [udp(0), udp(1, ttl=1)])
    args = ["--program", fwd, "--port", f"1=pcap:in={tmp_path / 'a.pcap'}", "--port", f"2=pcap:out={tmp_path / 'o.pcap'}"]
    quiet = switch(p4sec_bin, *args, "--log", "error")
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    info = switch(p4sec_bin, *args)
    assert "port 1: end of" in info.stderr and "trace:" not in info.stderr
    n = len(udp(0))
    trace = switch(p4sec_bin, *args, "--log", "trace")
    assert trace.returncode == 0
    assert f"port 1: {n} bytes in -> port 2 ({n} bytes)" in trace.stderr, trace.stderr
    assert f"port 1: {len(udp(1))} bytes in -> dropped" in trace.stderr, trace.stderr
    pipeline = switch(p4sec_bin, *args, "--log", "warn", "--trace")
    assert "packet of" in pipeline.stderr and "end of" not in pipeline.stderr
    bad = switch(p4sec_bin, *args, "--log", "loud")
    assert bad.returncode != 0 and "loud" in bad.stderr


def write_pcap_bytes(path, data):
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("case", ["unknown-kind", "missing-file", "not-pcap", "short", "pcapng", "directory", "truncated-record",
                                  "bad-linktype", "dup-number", "dup-name", "dup-name-kinds", "dup-out", "in-is-out", "out-dir-missing",
                                  "empty-pcap", "bad-pcap-option", "long-name", "bad-number", "cpu-port", "no-such-iface", "no-such-xdp-iface"])
def test_bad_ports_are_precise_errors(p4sec_bin, fwd, tmp_path, case):
    good = tmp_path / "good.pcap"
    wrpcap(str(good), [udp(0)])
    hdr = good.read_bytes()[:24]
    ports, extra, expect = [], [], None
    if case == "unknown-kind":
        ports, expect = ["1=socket:eth0"], "unknown port kind `socket`"
    elif case == "missing-file":
        ports, expect = [f"1=pcap:in={tmp_path / 'nope.pcap'}"], "nope.pcap: No such file or directory"
    elif case == "not-pcap":
        f = write_pcap_bytes(tmp_path / "t.pcap", b"this is a text file, not a capture\n")
        ports, expect = [f"1=pcap:in={f}"], "is not a pcap file (it starts with 74 68 69 73)"
    elif case == "short":
        f = write_pcap_bytes(tmp_path / "s.pcap", hdr[:10])
        ports, expect = [f"1=pcap:in={f}"], "is not a pcap file (only 10 bytes"
    elif case == "pcapng":
        f = write_pcap_bytes(tmp_path / "n.pcapng", b"\x0a\x0d\x0d\x0a" + bytes(60))
        ports, expect = [f"1=pcap:in={f}"], "is a pcapng file"
    elif case == "directory":
        ports, expect = [f"1=pcap:in={tmp_path}"], "is a directory"
    elif case == "truncated-record":
        f = write_pcap_bytes(tmp_path / "tr.pcap", good.read_bytes()[:-5])
        ports, expect = [f"1=pcap:in={f}", f"2=pcap:out={tmp_path / 'o.pcap'}"], "record 1 is truncated"
    elif case == "bad-linktype":
        f = write_pcap_bytes(tmp_path / "lt.pcap", hdr[:20] + (147).to_bytes(4, "little"))
        ports, expect = [f"1=pcap:in={f}"], "link type 147 is not supported"
    elif case == "dup-number":
        ports, expect = [f"1=pcap:in={good}", f"1=pcap:out={tmp_path / 'o.pcap'}"], "port 1 is given twice"
    elif case == "dup-name":
        ports, expect = ["3=tap:p4dup0", "4=tap:p4dup0"], "interface `p4dup0` is named by two ports (3 and 4)"
    elif case == "dup-name-kinds":
        ports, expect = ["3=lo", "4=tun:lo"], "interface `lo` is named by two ports (3 and 4)"
    elif case == "dup-out":
        ports, expect = [f"1=pcap:out={tmp_path / 'o.pcap'}", f"2=pcap:in={good},out={tmp_path}/./o.pcap"], "is written by two ports"
    elif case == "in-is-out":
        ports, expect = [f"1=pcap:in={good},out={good}"], "is both read and written by the port"
    elif case == "out-dir-missing":
        ports, expect = [f"1=pcap:in={good},out={tmp_path / 'no' / 'o.pcap'}"], "cannot create"
    elif case == "empty-pcap":
        ports, expect = ["1=pcap:"], "a pcap port needs in=FILE, out=FILE or both"
    elif case == "bad-pcap-option":
        ports, expect = [f"1=pcap:in={good},snaplen=9"], "unknown pcap option `snaplen=9`"
    elif case == "long-name":
        ports, expect = ["1=tap:a-much-too-long-name"], "is too long"
    elif case == "bad-number":
        ports, expect = ["one=pcap:in=x"], "bad port number `one`"
    elif case == "cpu-port":
        ports, extra, expect = [f"7=pcap:in={good}"], ["--cpu-port", "7"], "port 7 is the CPU port"
    elif case in ("no-such-iface", "no-such-xdp-iface") and os.geteuid() != 0:
        pytest.skip("without root the packet socket is refused before the interface is looked up")
    elif case == "no-such-iface":
        ports, expect = ["1=p4nosuch0"], "port 1: no interface named `p4nosuch0`"
    elif case == "no-such-xdp-iface":
        # the same error, without a detour through AF_XDP's fallback
        ports, expect = ["1=xdp:p4nosuch0"], "port 1: no interface named `p4nosuch0`"
    args = ["--program", fwd, "--grpc", f"127.0.0.1:{free_port()}", *extra]
    for p in ports:
        args += ["--port", p]
    r = switch(p4sec_bin, *args, timeout=20)
    assert r.returncode != 0, r.stderr
    assert expect in r.stderr, r.stderr
    assert "falling back" not in r.stderr, r.stderr
    assert not os.path.exists("/sys/class/net/p4dup0")


def test_tun_without_permission_is_an_error(p4sec_bin, fwd):
    name = f"p4np{uuid.uuid4().hex[:6]}"
    cmd = [str(p4sec_bin), "switch", "--program", str(fwd), "--grpc", f"127.0.0.1:{free_port()}", "--port", f"1=tun:{name}"]
    if os.geteuid() == 0:
        if not shutil.which("setpriv"):
            pytest.skip("setpriv is needed to drop CAP_NET_ADMIN")
        cmd = ["setpriv", "--inh-caps=-net_admin", "--bounding-set=-net_admin"] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    assert r.returncode != 0
    assert f"port 1: cannot create TUN device `{name}`" in r.stderr and "needs root or CAP_NET_ADMIN" in r.stderr, r.stderr
    assert "panicked" not in r.stderr
    assert not os.path.exists(f"/sys/class/net/{name}")


@ROOT_ONLY
def test_tap_on_an_existing_interface_name_is_an_error(p4sec_bin, fwd):
    r = switch(p4sec_bin, "--program", fwd, "--grpc", f"127.0.0.1:{free_port()}", "--port", "3=tap:lo", timeout=20)
    assert r.returncode != 0
    assert "cannot create TAP device `lo`: an interface of that name already exists and is not a free TAP device" in r.stderr, r.stderr


ECHO = r"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", 4242)); s.settimeout(20)
print("ready", flush=True)
for _ in range(int(sys.argv[1])):
    data, peer = s.recvfrom(2048)
    s.sendto(data.upper(), peer)
"""

CLIENT = r"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(1)
got = 0
for i in range(int(sys.argv[2])):
    msg = f"{sys.argv[3]}-{i}".encode()
    for attempt in range(5):
        s.sendto(msg, (sys.argv[1], 4242))
        try:
            data, peer = s.recvfrom(2048)
        except socket.timeout:
            continue
        assert data == msg.upper() and peer[0] == sys.argv[1], (data, peer)
        got += 1
        break
print(got, flush=True)
"""


@pytest.fixture
def hosts():
    """Three namespaces: `tap` and `tun` (their devices are moved in by the test) and `veth` with a veth pair
    (10.0.2.2/24, MAC 02:00:00:00:02:02) whose other end `sw` stays here for the switch."""
    tag = uuid.uuid4().hex[:6]
    ns = {k: f"p4p{k}{tag}" for k in ("tap", "tun", "veth")}
    for n in ns.values():
        sh("ip", "netns", "add", n)
    host, sw = f"hv{tag}", f"sv{tag}"
    sh("ip", "link", "add", host, "type", "veth", "peer", "name", sw)
    sh("ip", "link", "set", host, "netns", ns["veth"])
    v = ns["veth"]
    nsx(v, "ip", "link", "set", host, "address", "02:00:00:00:02:02")
    nsx(v, "ip", "addr", "add", "10.0.2.2/24", "dev", host)
    nsx(v, "ip", "link", "set", host, "up")
    nsx(v, "ip", "neigh", "add", "10.0.2.254", "lladdr", "02:00:00:00:00:01", "dev", host)
    for net in ("10.0.1.0/24", "10.0.9.0/24"):
        nsx(v, "ip", "route", "add", net, "via", "10.0.2.254")
    sh("ip", "link", "set", sw, "up")
    sh("sysctl", "-qw", f"net.ipv6.conf.{sw}.disable_ipv6=1")
    yield {"ns": ns, "sw": sw, "tap": f"p4ta{tag}", "tun": f"p4tu{tag}"}
    subprocess.run(["ip", "link", "del", sw], capture_output=True)
    for n in ns.values():
        subprocess.run(["ip", "netns", "del", n], capture_output=True)


@ROOT_ONLY
@pytest.mark.parametrize("workers", [1, 2])
def test_tap_and_tun_ports_carry_traffic(p4sec_bin, router, hosts, tmp_path, workers):
    from p4sec.infra.runtime import Switch, ip, mac
    ns, tap, tun = hosts["ns"], hosts["tap"], hosts["tun"]
    port = free_port()
    cap = tmp_path / "cap"
    log = tmp_path / "switch.log"
    sw = subprocess.Popen([str(p4sec_bin), "switch", "--grpc", f"127.0.0.1:{port}", "--workers", str(workers), "--log", "trace",
                           "--pcap-dir", str(cap), "--port", f"2={hosts['sw']}", "--port", f"3=tap:{tap}", "--port", f"4=tun:{tun}"],
                          stderr=open(log, "w"))
    try:
        wait_for(lambda: f"TUN device `{tun}` created" in log.read_text() or sw.poll() is not None, "the TUN device")
        assert sw.poll() is None, log.read_text()
        for dev in (tap, tun):
            flags = int(open(f"/sys/class/net/{dev}/flags").read(), 16)
            assert flags & 1, f"{dev} is up"
        # the devices go to their own namespaces (moving them takes them down)
        t, u = ns["tap"], ns["tun"]
        sh("ip", "link", "set", tap, "netns", t)
        nsx(t, "ip", "link", "set", tap, "address", "02:00:00:00:01:01")
        nsx(t, "ip", "addr", "add", "10.0.1.1/24", "dev", tap)
        nsx(t, "ip", "link", "set", tap, "up")
        nsx(t, "ip", "neigh", "add", "10.0.1.254", "lladdr", "02:00:00:00:00:01", "dev", tap)
        nsx(t, "ip", "route", "add", "10.0.2.0/24", "via", "10.0.1.254")
        sh("ip", "link", "set", tun, "netns", u)
        nsx(u, "ip", "addr", "add", "10.0.9.1/24", "dev", tun)
        nsx(u, "ip", "link", "set", tun, "up")
        nsx(u, "ip", "route", "add", "10.0.2.0/24", "dev", tun)

        ctl = Switch(f"127.0.0.1:{port}")
        ctl.push(router)
        lpm = "RouterIngress.ipv4_lpm"
        for net, dst, p in (("10.0.2.0", "02:00:00:00:02:02", 2), ("10.0.1.0", "02:00:00:00:01:01", 3), ("10.0.9.0", "02:00:00:00:09:09", 4)):
            ctl.table_insert(lpm, {"hdr.ipv4.dst_addr": ("lpm", ip(net), 24)}, "RouterIngress.set_nhop",
                             {"dst_mac": mac(dst), "src_mac": mac("02:00:00:00:00:01"), "port": p})

        n = 4
        echo = subprocess.Popen(["ip", "netns", "exec", ns["veth"], sys.executable, "-c", ECHO, str(2 * n)], stdout=subprocess.PIPE, text=True)
        assert echo.stdout.readline().strip() == "ready"
        for who in ("tap", "tun"):
            r = subprocess.run(["ip", "netns", "exec", ns[who], sys.executable, "-c", CLIENT, "10.0.2.2", str(n), who],
                               capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stderr
            assert int(r.stdout) == n, f"{who}: {r.stdout} of {n} echoed; log: {log.read_text()[-3000:]}"
        echo.wait(timeout=20)
        assert "bytes in -> port 2" in log.read_text()

        # deleting the TUN device is noticed like a vanishing interface
        nsx(u, "ip", "link", "del", tun)
        wait_for(lambda: f"port 4 (`tun:{tun}`) is gone" in log.read_text(), "the gone message")
        assert sw.poll() is None
        ctl.close()
    finally:
        sw.send_signal(signal.SIGTERM)
        rc = sw.wait(timeout=10)
    assert rc == 0, log.read_text()[-3000:]
    # the TAP device is removed at exit, although it lives in another namespace now
    assert subprocess.run(["ip", "netns", "exec", ns["tap"], "ip", "link", "show", tap], capture_output=True).returncode != 0

    def udp_frames(f):
        return [p for p in rdpcap(str(cap / f)) if UDP in p and 4242 in (p[UDP].sport, p[UDP].dport)]
    tap_in = udp_frames("port3-in.pcap")
    assert len(tap_in) >= n and all(p[IP].src == "10.0.1.1" and p[Ether].src == "02:00:00:00:01:01" for p in tap_in)
    tap_out = udp_frames("port3-out.pcap")
    assert len(tap_out) >= n and all(p[IP].dst == "10.0.1.1" and p[Ether].dst == "02:00:00:00:01:01" for p in tap_out)
    tun_in = udp_frames("port4-in.pcap")
    assert len(tun_in) >= n
    assert all(p[Ether].dst == TUN_SWITCH_MAC and p[Ether].src == tun_host_mac(4) and p[IP].src == "10.0.9.1" for p in tun_in)
    tun_out = udp_frames("port4-out.pcap")
    assert len(tun_out) >= n and all(p[IP].dst == "10.0.9.1" and p[IP].ttl == 63 for p in tun_out)
    veth_out = udp_frames("port2-out.pcap")
    assert {p[IP].src for p in veth_out} == {"10.0.1.1", "10.0.9.1"}
    assert all(p[IP].ttl == 63 and p[Ether].dst == "02:00:00:00:02:02" for p in veth_out)
    assert len(udp_frames("port2-in.pcap")) >= 2 * n
