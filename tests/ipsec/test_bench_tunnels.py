"""Many tunnels (python -m bench.tunnels) with a small N through two real p4sec switches: every tunnel's entries
are read back from the switches, sampled tunnels carry traffic that their own inbound SA counts, a subnet pair
without a tunnel carries nothing; and the controller's per-subnet tunnels refuse bad prefixes precisely."""
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from p4sec.infra import runtime
from p4sec.ipsec.controller import ControllerError, Gateway, IpsecController
from p4sec.infra.netns import free_port

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")


def test_bench_tunnels_sets_up_and_verifies_200_tunnels(p4sec_bin, tmp_path):
    out = tmp_path / "t.json"
    r = subprocess.run([sys.executable, "-m", "bench.tunnels", "--tunnels", "200", "--sample", "6", "--p4sec", str(p4sec_bin),
                        "--json", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    d = json.loads(out.read_text())
    assert d["tunnels"] == 200 and d["controller_tunnels_up"] == 200
    for key in ("total_s", "tunnels_per_s", "setup_ms_median", "setup_ms_p99", "rss_kb_before", "rss_kb_after"):
        assert key in d, key
    assert d["setup_ms_median"] > 0 and d["setup_ms_p99"] >= d["setup_ms_median"] and len(d["rss_kb_after"]) == 2
    assert d["readback"] == {"S1": {"sad_dec": 200, "spd": 200}, "S2": {"sad_dec": 200, "spd": 200}}
    assert len(d["sample"]) == 6 and {s["tunnel"] for s in d["sample"]} >= {0, 199}
    for s in d["sample"]:
        assert s["arrived"] and s["sa_packets"] == 1, s
    assert d["sample_ok"] == 6 and d["stray_arrived"] is False
    r = subprocess.run([sys.executable, "-m", "bench.tunnels", "--tunnels", "0"], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "--tunnels" in r.stderr


@pytest.fixture
def two_switches(p4sec_bin, tmp_path):
    gw = tmp_path / "gw"
    subprocess.run([str(p4sec_bin), "compile", str(ROOT / "programs" / "ipsec_gateway.p4"), "-o", str(gw)], check=True)
    ports = [free_port(), free_port()]
    procs = [subprocess.Popen([str(p4sec_bin), "switch", "--grpc", f"127.0.0.1:{p}"], stderr=subprocess.DEVNULL) for p in ports]
    sws = [runtime.Switch(f"127.0.0.1:{p}") for p in ports]
    ctl = IpsecController(str(tmp_path / "ctl.db"))
    ctl.add_gateway(Gateway("A", sws[0], "192.0.2.1", "10.1.0.0/16", 1, "02:00:00:00:0a:01", 2, "02:00:00:00:0b:02", "198.51.100.0/24"), gw)
    ctl.add_gateway(Gateway("B", sws[1], "198.51.100.1", "10.2.0.0/16", 1, "02:00:00:00:0b:01", 2, "02:00:00:00:0a:02", "192.0.2.0/24"), gw)
    yield ctl, sws
    ctl.close()
    for s in sws:
        s.close()
    for p in procs:
        p.terminate()
        p.wait(timeout=10)


def test_subnet_pair_tunnels_and_their_errors(two_switches):
    ctl, (sa, sb) = two_switches
    ctl.connect("A", "B", name="x", a_prefix="10.1.1.0/24", b_prefix="10.2.1.0/24")
    ctl.connect("A", "B", name="y", a_prefix="10.1.2.0/24", b_prefix="10.2.1.0/24")
    assert len(sa.table_read("GwIngress.spd")) == 2 and len(sb.table_read("GwIngress.sad_dec")) == 2
    t = {x["name"]: x for x in ctl.tunnels()}
    assert (t["x"]["a_prefix"], t["x"]["b_prefix"]) == ("10.1.1.0/24", "10.2.1.0/24")
    with pytest.raises(ControllerError, match="tunnel x already protects 10.1.1.0/24 <-> 10.2.1.0/24"):
        ctl.connect("A", "B", name="z", a_prefix="10.1.1.0/24", b_prefix="10.2.1.0/24")
    with pytest.raises(ControllerError, match="tunnel x already protects"):
        ctl.connect("B", "A", name="z", a_prefix="10.2.1.0/24", b_prefix="10.1.1.0/24")
    with pytest.raises(ControllerError, match="not inside A's site 10.1.0.0/16"):
        ctl.connect("A", "B", name="z", a_prefix="10.9.0.0/24")
    with pytest.raises(ControllerError, match="prefix for B: .*does not appear to be an IPv4 or IPv6 network"):
        ctl.connect("A", "B", name="z", b_prefix="10.2.1.300/24")
    with pytest.raises(ControllerError, match="host bits set"):
        ctl.connect("A", "B", name="z", b_prefix="10.2.1.1/24")
    with pytest.raises(ControllerError, match="no gateway C"):
        ctl.connect("A", "C", name="z")
    # nothing of the refused tunnels reached the switches or the database
    assert len(sa.table_read("GwIngress.spd")) == 2 and len(sb.table_read("GwIngress.sad_dec")) == 2
    assert "z" not in {x["name"] for x in ctl.tunnels()}
    # down: only that tunnel's entries go, and its subnet pair can be used again
    ctl.disconnect("x")
    assert len(sa.table_read("GwIngress.spd")) == 1 and len(sb.table_read("GwIngress.sad_dec")) == 1
    ctl.connect("A", "B", name="z", a_prefix="10.1.1.0/24", b_prefix="10.2.1.0/24")
    assert len(sa.table_read("GwIngress.spd")) == 2


def test_a_refused_setup_leaves_nothing_behind(two_switches):
    """The switch refuses phase 2 (its SPD already holds the policy): phase 1's SAD-dec entries and SAs are removed
    again on both switches, and the slots are reused by the next tunnel."""
    ctl, (sa, sb) = two_switches
    sa.table_insert("GwIngress.spd", {"hdr.ipv4.src_addr": ("ternary", runtime.ip("10.1.5.0"), runtime.prefix_mask(24)),
                                      "hdr.ipv4.dst_addr": ("ternary", runtime.ip("10.2.5.0"), runtime.prefix_mask(24))}, "GwIngress.bypass", {}, priority=10)
    with pytest.raises(runtime.WriteError):
        ctl.connect("A", "B", name="clash", a_prefix="10.1.5.0/24", b_prefix="10.2.5.0/24")
    assert len(sa.table_read("GwIngress.sad_dec")) == 0 and len(sb.table_read("GwIngress.sad_dec")) == 0
    assert len(sb.table_read("GwIngress.spd")) == 0, "B's policy of the refused tunnel was removed"
    assert ctl.sas() == [] and "clash" not in {x["name"] for x in ctl.tunnels()}
    ctl.connect("A", "B", name="ok", a_prefix="10.1.6.0/24", b_prefix="10.2.6.0/24")
    # the refused tunnel's slots (0 and 1 on each gateway) were given back and are used again
    assert {s["out_slot"] for s in ctl.sas("ok")} | {s["in_slot"] for s in ctl.sas("ok")} <= {0, 1}
    assert [g.next_slot for g in ctl.gateways.values()] == [2, 2]
    assert len(sa.table_read("GwIngress.spd")) == 2, "the hand-made policy stayed, the new tunnel's was added"
