"""BMv2's whole command line on p4sec, run by BMv2's program names (symlinks `simple_switch_grpc`, `p4c`,
`p4c-bm2-ss` to p4sec): the flags the P4 tutorials' `p4runtime_switch.py` and the P4 guides' `runptf.sh` pass
(`--nanolog`, `--pcap DIR`, `--log-console`, `--log-file`, `--log-flush`, `--dump-packet-data`), BMv2's debug
outputs (pcap files named after the interfaces, the per-packet log in BMv2's words at its default level trace),
options p4sec cannot honour refused by name, and the compiler by p4c's names writing what p4c writes."""
import os
import subprocess
import time
import uuid

import pytest

from conftest import ROOT
# (free_port through the neighbouring test module: one place names where the helper lives)
from test_simple_switch_grpc import Client, build, free_port, start, stop  # noqa: F401  (build: the fixture)

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for veth pairs")


@pytest.fixture
def links(p4sec_bin, tmp_path):
    """Two veth pairs (the switch takes `a` and `b`, the test the peers), and `simple_switch_grpc`, a symlink."""
    t = uuid.uuid4().hex[:5]
    a, b = f"bca{t}", f"bcb{t}"
    for n in (a, b):
        subprocess.run(["ip", "link", "add", n, "type", "veth", "peer", "name", n + "p"], check=True)
        for d in (n, n + "p"):
            subprocess.run(["ip", "link", "set", d, "up"], check=True)
            subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{d}.disable_ipv6=1"], check=False)
    link = tmp_path / "simple_switch_grpc"
    link.symlink_to(p4sec_bin)
    yield a, b, link
    for n in (a, b):
        subprocess.run(["ip", "link", "del", n], check=False)


def send_routed(info, c, a, b):
    """A route to 10.2.0.0/16 out of port 2, then one frame in on port 1 (through `a`'s peer); the frame routed
    out of port 2 as `b`'s peer sees it."""
    from scapy.all import Ether, IP, UDP, AsyncSniffer, sendp
    c.route(info, [10, 2, 0, 0], 16, 2)
    sniffer = AsyncSniffer(iface=b + "p", lfilter=lambda p: IP in p and p[IP].dst == "10.2.0.9")
    sniffer.start()
    time.sleep(0.5)
    frame = Ether(dst="02:00:00:00:00:01") / IP(src="10.1.0.1", dst="10.2.0.9", ttl=9) / UDP(dport=9) / (b"x" * 20)
    sendp(frame, iface=a + "p", verbose=False)
    time.sleep(1.0)
    return bytes(frame), sniffer.stop()


@root_only
def test_the_tutorials_command_line_logs_every_packet_and_captures_per_interface(build, links, tmp_path):
    """The command `p4runtime_switch.py` builds (one shell line, output redirected to logs/sN.log): the switch
    starts, `--nanolog` is noted, `--pcap pcaps` writes IFACE_in.pcap / IFACE_out.pcap, and the log holds each
    packet's path in BMv2's words at BMv2's default level (trace) with `--log-console` and no `-L`."""
    from scapy.all import rdpcap, IP
    out, info = build
    a, b, link = links
    (tmp_path / "pcaps").mkdir()
    (tmp_path / "logs").mkdir()
    port, thrift = free_port(), free_port()
    cmd = (f"{link} -i 1@{a} -i 2@{b} --pcap {tmp_path / 'pcaps'} --nanolog ipc:///tmp/bm-{port}-log.ipc --device-id 0 "
           f"{out / 'router.json'} --log-console --thrift-port {thrift} -- --grpc-server-addr 127.0.0.1:{port}")
    log = tmp_path / "logs" / "s1.log"
    proc, channel = start(["sh", "-c", f"exec {cmd} > {log} 2>&1"], port)
    c = None
    try:
        c = Client(channel, 0)
        sent, got = send_routed(info, c, a, b)
        assert got and got[0][IP].ttl == 8, "the routed frame did not come out of port 2"
    finally:
        stop(proc, channel, c)
    text = log.read_text()
    assert "--nanolog ipc:///tmp/" in text and "no nanomsg" in text, text[:2000]
    for needle in ("[bmv2] [D]", "Processing packet received on port 1", "Parser state 'RouterParser.parse_ipv4'",
                   "Extracting header 'hdr.ipv4'", "Applying table 'RouterIngress.ipv4_lpm'",
                   "* hdr.ipv4.dst_addr", ": 0a020009", "Table 'RouterIngress.ipv4_lpm': hit",
                   "Action entry is RouterIngress.set_nhop - 200000000aa,20000000001,2,", "Egress port is 2",
                   f"Transmitting packet of size {len(sent)} out of port 2"):
        assert needle in text, f"{needle!r} not in the log:\n{text[-3000:]}"
    caps = sorted(p.name for p in (tmp_path / "pcaps").iterdir())
    assert caps == sorted([f"{a}_in.pcap", f"{a}_out.pcap", f"{b}_in.pcap", f"{b}_out.pcap"]), caps
    assert sent in [bytes(f) for f in rdpcap(str(tmp_path / "pcaps" / f"{a}_in.pcap"))]
    routed = [f for f in rdpcap(str(tmp_path / "pcaps" / f"{b}_out.pcap")) if IP in f and f[IP].dst == "10.2.0.9"]
    assert len(routed) == 1 and routed[0][IP].ttl == 8


@root_only
def test_runptf_flags_log_file_flushed_with_packet_data(build, links, tmp_path):
    """`runptf.sh`'s `--log-file ss-log --log-flush --dump-packet-data 10000`: the log is in the file (not on the
    console), readable while the switch runs (flushed per message), with the bytes of the packets received and
    sent; `-L info` keeps the per-packet trace lines out but the packet data in."""
    out, info = build
    a, b, link = links
    port = free_port()
    logf = tmp_path / "ss-log"
    proc, channel = start([str(link), "--device-id", "0", "--log-file", str(logf), "--log-flush", "--dump-packet-data",
                           "10000", "-L", "info", "-i", f"1@{a}", "-i", f"2@{b}", "--no-p4", "--thrift-port", str(free_port()),
                           "--", "--grpc-server-addr", f"127.0.0.1:{port}"], port)
    c = None
    try:
        c = Client(channel, 0)
        c.set_pipeline(info, (out / "router.json").read_bytes())
        sent, got = send_routed(info, c, a, b)
        assert got
        text = logf.read_text()  # the switch still runs: what is there was flushed
        assert f"Received packet data: {sent.hex()}" in text, text[-3000:]
        assert f"Sent packet data: {bytes(got[0]).hex()}" in text, text[-3000:]
        assert "Applying table" not in text and "[bmv2] [T]" not in text, text[-3000:]
    finally:
        stop(proc, channel, c)
    assert "Received packet data" not in proc.stderr.read()


@pytest.mark.parametrize("args,needle", [
    (["--restore-state", "state.bin"], "--restore-state state.bin"),
    (["--packet-in", "ipc:///tmp/x.ipc"], "--packet-in ipc:///tmp/x.ipc"),
    (["-i", "600@veth9"], "--max-port-count 512"),
    (["--max-port-count", "4", "-i", "4@veth9"], "--max-port-count 4"),
    (["--", "--load-modules", "m.so"], "--load-modules m.so"),
    (["--", "--drop-port", "64"], "--drop-port 64"),
    (["--", "--grpc-server-ssl"], "--grpc-server-cert"),
])
def test_options_p4sec_cannot_honour_are_refused_by_name(p4sec_bin, args, needle):
    if args[0] == "--":
        args = ["--no-p4", *args]
    r = subprocess.run([str(p4sec_bin), "simple_switch_grpc", *args], capture_output=True, text=True, timeout=20)
    assert r.returncode == 2, r.stderr
    assert needle in r.stderr, r.stderr


def test_version_and_json_version(tmp_path, p4sec_bin):
    link = tmp_path / "simple_switch"
    link.symlink_to(p4sec_bin)
    r = subprocess.run([str(link), "-v"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0 and r.stdout.startswith("p4sec "), r.stdout + r.stderr
    r = subprocess.run([str(link), "--json-version"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0 and "p4sec compile" in r.stdout


def test_p4c_by_name_writes_what_p4c_writes(tmp_path, p4sec_bin):
    """`p4c --target bmv2 --arch v1model --p4runtime-files X.p4info.txtpb X.p4` (runptf.sh; no -o: the current
    directory) writes X.json and the P4Info only; `p4c-bm2-ss --p4v 16 -o F.json --p4runtime-file ... -g` too;
    `-b bmv2 -o DIR` writes DIR/X.json."""
    from google.protobuf import text_format
    from p4.config.v1 import p4info_pb2
    for name in ("p4c", "p4c-bm2-ss"):
        (tmp_path / name).symlink_to(p4sec_bin)
    src = tmp_path / "router.p4"
    src.write_text((ROOT / "programs" / "ipv4_router.p4").read_text())
    work = tmp_path / "w"
    work.mkdir()
    r = subprocess.run([str(tmp_path / "p4c"), "--target", "bmv2", "--arch", "v1model", "--p4runtime-files",
                        "router.p4info.txtpb", str(src)], cwd=work, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in work.iterdir()) == ["router.json", "router.p4info.txtpb"]
    info = text_format.Parse((work / "router.p4info.txtpb").read_text(), p4info_pb2.P4Info())
    assert any(t.preamble.name == "RouterIngress.ipv4_lpm" for t in info.tables)
    r = subprocess.run([str(tmp_path / "p4c-bm2-ss"), "--p4v", "16", "-g", "--Wdisable=unused", "-DCPU_PORT=255",
                        "-o", str(tmp_path / "b" / "bmv2.json"), "--p4runtime-file", str(tmp_path / "b" / "p4info.txt"),
                        "--p4runtime-format", "text", str(src)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["bmv2.json", "p4info.txt"]
    r = subprocess.run([str(tmp_path / "p4c"), "-b", "bmv2", "-o", str(tmp_path / "d"), str(src)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert [p.name for p in (tmp_path / "d").iterdir()] == ["router.json"]
    r = subprocess.run([str(tmp_path / "p4c"), "--target", "tofino", str(src)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "tofino" in r.stderr


def test_p4_tmp_p4config_sits_beside_the_official_p4runtime_package():
    """`from p4.tmp import p4config_pb2` (the tutorials' and guides' clients) works after scripts/setup, inside the
    official `p4runtime` package's `p4` directory, whose own modules stay its own."""
    import pathlib
    import p4
    from p4.v1 import p4runtime_pb2
    from p4.tmp import p4config_pb2
    base = pathlib.Path(p4.__file__).parent
    assert pathlib.Path(p4runtime_pb2.__file__).parent == base / "v1"
    assert pathlib.Path(p4config_pb2.__file__).parent == base / "tmp"
    c = p4config_pb2.P4DeviceConfig(reassign=True, device_data=b"{}")
    c.extras.kv["k"] = "v"
    back = p4config_pb2.P4DeviceConfig.FromString(c.SerializeToString())
    assert back.reassign and back.device_data == b"{}" and dict(back.extras.kv) == {"k": "v"}
    assert p4config_pb2.P4DeviceConfig.DESCRIPTOR.full_name == "p4.tmp.P4DeviceConfig"


def test_use_files_reads_and_writes_the_interfaces_pcap_files(p4sec_bin, tmp_path):
    """`--use-files 0 -i 1@veth0 -i 2@veth1`: as BMv2, port 1 reads veth0_in.pcap and writes veth0_out.pcap (no
    interface is opened); tests/switch/programs/queue_ecn.p4 sends what comes in on port 1 out of port 2; with only
    file ports the run ends once the input is processed."""
    from scapy.all import Ether, IP, UDP, rdpcap, wrpcap
    out = tmp_path / "ecn.json"
    subprocess.run([str(p4sec_bin), "compile", str(ROOT / "tests" / "switch" / "programs" / "queue_ecn.p4"), "-o", str(out)],
                   check=True, capture_output=True)
    frames = [Ether(dst="02:00:00:00:02:02") / IP(src="10.0.1.1", dst="10.0.2.2", tos=1) / UDP(sport=7, dport=9) / bytes(40)
              for _ in range(3)]
    wrpcap(str(tmp_path / "veth0_in.pcap"), frames)
    wrpcap(str(tmp_path / "veth1_in.pcap"), [])
    link = tmp_path / "simple_switch_grpc"
    link.symlink_to(p4sec_bin)
    r = subprocess.run([str(link), "--use-files", "0", "-i", "1@veth0", "-i", "2@veth1", "--log-console", "-L", "info",
                        str(out)], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "--use-files" in r.stderr
    sent = [f for f in rdpcap(str(tmp_path / "veth1_out.pcap")) if UDP in f and f[UDP].dport == 9]
    assert len(sent) == 3 and all(f[IP].dst == "10.0.2.2" for f in sent)
    assert len(rdpcap(str(tmp_path / "veth0_out.pcap"))) == 0
