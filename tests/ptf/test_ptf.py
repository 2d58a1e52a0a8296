"""PTF (the P4 community's packet test framework, PyPI `ptf`) against a running p4sec switch: veth pairs whose test
ends live in a network namespace made here, the switch programmed over P4Runtime, then `ptf` runs the test classes
in tests/ptf/ptftests inside that namespace. Programs: the IPv4 router and url_filter.p4 (clone + recirculate)."""
import os
import pathlib
import subprocess
import sys
import time
import uuid

import pytest

from p4sec import dpi
from p4sec.infra.netns import free_port, sh
from p4sec.infra.runtime import Switch, ip, mac

ROOT = pathlib.Path(__file__).resolve().parents[2]
PTF = pathlib.Path(sys.executable).parent / "ptf"      # the command of the environment running the tests (.venv)
pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
              pytest.mark.skipif(not PTF.exists(), reason=f"ptf is not installed at {PTF} (./scripts/setup)")]


@pytest.fixture
def rig(p4sec_bin, tmp_path):
    t = uuid.uuid4().hex[:5]
    ns = f"ptf{t}"
    sh("ip", "netns", "add", ns)
    pairs = [(f"pt1{t}", f"sw1{t}"), (f"pt2{t}", f"sw2{t}")]
    for test_end, sw_end in pairs:
        sh("ip", "link", "add", test_end, "type", "veth", "peer", "name", sw_end)
        sh("ip", "link", "set", test_end, "netns", ns)
        sh("ip", "netns", "exec", ns, "ip", "link", "set", test_end, "up")
        sh("ip", "netns", "exec", ns, "sysctl", "-qw", f"net.ipv6.conf.{test_end}.disable_ipv6=1", check=False)
        sh("ip", "link", "set", sw_end, "up")
        sh("sysctl", "-qw", f"net.ipv6.conf.{sw_end}.disable_ipv6=1", check=False)
    procs = []

    def start(program):
        out = tmp_path / program
        sh(str(p4sec_bin), "compile", str(ROOT / "programs" / f"{program}.p4"), "-o", str(out))
        port = free_port()
        procs.append(subprocess.Popen([str(p4sec_bin), "switch", "--grpc", f"127.0.0.1:{port}", "--port", f"1={pairs[0][1]}",
                                       "--port", f"2={pairs[1][1]}"], stderr=subprocess.DEVNULL))
        time.sleep(0.5)
        sw = Switch(f"127.0.0.1:{port}")
        sw.push(out)
        return sw

    def ptf(test):
        r = subprocess.run(["ip", "netns", "exec", ns, str(PTF), "--test-dir", str(ROOT / "tests" / "ptf" / "ptftests"),
                            "--interface", f"1@{pairs[0][0]}", "--interface", f"2@{pairs[1][0]}", "--log-file", str(tmp_path / "ptf.log"),
                            "--disable-ipv6", test], capture_output=True, text=True, timeout=300, cwd=tmp_path)
        return r

    yield start, ptf
    for p in procs:
        p.terminate()
        p.wait(timeout=10)
    sh("ip", "netns", "del", ns, check=False)
    for _, sw_end in pairs:
        sh("ip", "link", "del", sw_end, check=False)


def test_ptf_ipv4_router(rig):
    start, ptf = rig
    sw = start("ipv4_router")
    for prefix, dmac, port in (("10.0.2.0", "02:00:00:00:00:02", 2), ("10.0.1.0", "02:00:00:00:00:01", 1)):
        sw.table_insert("RouterIngress.ipv4_lpm", {"hdr.ipv4.dst_addr": ("lpm", ip(prefix), 24)}, "RouterIngress.set_nhop",
                        {"dst_mac": mac(dmac), "src_mac": mac("02:00:00:00:00:fe"), "port": port})
    r = ptf("router")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "Ran 2 tests" in r.stderr + r.stdout and "OK" in r.stderr + r.stdout
    sw.close()


def test_ptf_clone_and_recirculate(rig):
    from p4.v1 import p4runtime_pb2
    start, ptf = rig
    sw = start("url_filter")
    d = dpi.Dfa(dpi.read_list("evil.com\nads.tracker.net\n"), payload=True)
    for mode, classes in ((0, dpi.CLASS_OF), (1, dpi.CLASS_OF_DNS)):
        for b, c in enumerate(classes):
            if c:
                sw.table_insert("UfrIngress.byte_class", {"hdr.label.mode": ("exact", bytes([mode])), "hdr.byte.b": ("exact", bytes([b]))},
                                "UfrIngress.set_class", {"cls": c})
    with sw.batch():
        for s, c, t, blocked in d.entries():
            sw.table_insert("UfrIngress.dfa", {"hdr.label.state": ("exact", s.to_bytes(4, "big")), "meta.cls": ("exact", bytes([c]))},
                            "UfrIngress.step", {"next": t, "blocked": int(blocked)})
    sw.table_insert("UfrEgress.dfa_start", {"hdr.label.mode": ("exact", b"\x00")}, "UfrEgress.set_start", {"state": d.delta[0].get(dpi.END, 0)})
    sw.table_insert("UfrEgress.dfa_start", {"hdr.label.mode": ("exact", b"\x01")}, "UfrEgress.set_start", {"state": 0})
    sw.table_insert("UfrIngress.ufr_port", {"sm.ingress_port": ("exact", b"\x01")}, "UfrIngress.forward", {"port": 2})
    # the clone session of the scanner (its copies recirculate; port 99 is never used on the wire)
    u = p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT)
    cs = u.entity.packet_replication_engine_entry.clone_session_entry
    cs.session_id = 100
    cs.replicas.add(egress_port=99, instance=1)
    sw._write(u)
    r = ptf("clone_recirculate")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    sw.close()
