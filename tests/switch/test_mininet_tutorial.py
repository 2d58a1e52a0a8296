"""The P4 tutorials' way under mininet (Debian's `mininet` package, which scripts/setup installs), driven
non-interactively by tests/switch/mn_tutorial.py: a two-switch topology whose switch class passes BMv2's
command line as the tutorials' `p4runtime_switch.py` does, to a program named `simple_switch_grpc` (a symlink to
p4sec), the programs compiled by a program named `p4c` (also a symlink) and loaded through BMv2's device config.

Checked: h1 pings h2 through both switches (the basic exercise); each switch's frames are captured in
pcaps/<interface>_in.pcap and _out.pcap, the two switches' files side by side (none overwritten); logs/s1.log
has each packet's path in BMv2's words; and the ecn exercise: with the link from s2 to h2 slow, s2's egress
queue builds up and marks ECN. How congestion is produced: as in the tutorials, the links are mininet's TCLink
and that one has `bw=1`, which mininet applies with an htb qdisc at 1 Mbit/s (the netem part it adds for
`delay` fails on this kernel, which lacks netem; mininet reports the error and goes on); h1 sends a burst of 600
frames of 1400 bytes (the switches have no queue rate set)."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT
from test_p4runtime import free_port
from test_backpressure import BIG
from test_queues import parse

pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="needs root for mininet"),
              pytest.mark.skipif(not shutil.which("mnexec"), reason="mininet is not installed (./scripts/setup installs it)")]


def test_tutorial_exercises_run_under_mininet(p4sec_bin, tmp_path):
    from scapy.all import rdpcap, IP
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("p4c", "simple_switch_grpc"):
        (bin_dir / name).symlink_to(p4sec_bin)
    build = tmp_path / "build"
    build.mkdir()
    for name, src in (("router", ROOT / "programs" / "ipv4_router.p4"), ("ecn", ROOT / "tests" / "switch" / "programs" / "queue_ecn.p4")):
        shutil.copy(src, build / f"{name}.p4")
        # as the tutorials' Makefile: p4c-bm2-ss --p4v 16 --p4runtime-files build/X.p4.p4info.txt -o build/X.json X.p4
        subprocess.run([str(bin_dir / "p4c"), "--target", "bmv2", "--arch", "v1model", "--p4runtime-files",
                        str(build / f"{name}.p4.p4info.txt"), "-o", str(build / f"{name}.json"), str(build / f"{name}.p4")],
                       check=True, capture_output=True)
    (tmp_path / "tool.py").write_text(BIG)
    cfg = {"workdir": str(tmp_path), "bin_dir": str(bin_dir), "tool": str(tmp_path / "tool.py"),
           "router": [str(build / "router.json"), str(build / "router.p4.p4info.txt")],
           "ecn": [str(build / "ecn.json"), str(build / "ecn.p4.p4info.txt")],
           "grpc": [free_port(), free_port()], "thrift": [free_port(), free_port()]}
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    r = subprocess.run([sys.executable, str(ROOT / "tests" / "switch" / "mn_tutorial.py"), str(tmp_path / "cfg.json")],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    # basic: the ping went through both switches
    assert " 0% packet loss" in out["ping"], out["ping"]
    # pcaps/ holds both switches' captures, named after their interfaces
    caps = sorted(p.name for p in (tmp_path / "pcaps").iterdir())
    assert caps == sorted(f"s{s}-eth{p}_{d}.pcap" for s in (1, 2) for p in (1, 2) for d in ("in", "out")), caps
    echo = [f for f in rdpcap(str(tmp_path / "pcaps" / "s1-eth1_in.pcap")) if IP in f and f[IP].dst == "10.0.2.2"]
    assert echo, "h1's pings are not in s1-eth1_in.pcap"
    assert [f for f in rdpcap(str(tmp_path / "pcaps" / "s2-eth1_out.pcap")) if IP in f and f[IP].dst == "10.0.2.2"]
    # logs/s1.log: the per-packet trace, at BMv2's default level with --log-console
    log = (tmp_path / "logs" / "s1.log").read_text()
    for needle in ("Processing packet received on port 1", "Applying table 'RouterIngress.ipv4_lpm'",
                   "Table 'RouterIngress.ipv4_lpm': hit", "Transmitting packet of size"):
        assert needle in log, f"{needle!r} not in logs/s1.log"
    # ecn: the queue behind the slow link built up, marks where it was at depth 10 or more
    frames = [parse(h) for h in out["ecn_frames"]]
    assert frames, "no frame of the burst reached h2"
    depths = [f["enq_qdepth"] for f in frames]
    assert "htb" in out["shaping"] and "rate 1Mbit" in out["shaping"], out["shaping"]
    assert max(depths) >= 15, f"no queue built up at s2: {depths}"
    assert len(frames) < 600, "a burst far above the link's rate went through whole: nothing was queued or dropped"
    assert all(f["ecn"] == (3 if f["enq_qdepth"] >= 10 else 1) for f in frames)
    assert sum(f["ecn"] == 3 for f in frames) >= 5
