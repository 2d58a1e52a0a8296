"""Smoke test of the IPsec benchmark (python -m bench.ipsec): it runs, measures and writes its JSON."""
import json
import os
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")


def test_bench_ipsec_runs_and_reports(p4sec_bin, tmp_path):
    out = tmp_path / "b.json"
    r = subprocess.run([sys.executable, "-m", "bench.ipsec", "--tunnels", "3", "--seconds", "1", "--suites", "aes-gcm-128",
                        "--jumbo", "9000", "--jumbo-suites", "bypass",
                        "--offloads-off-suites", "null", "--p4sec", str(p4sec_bin), "--json", str(out)],
                       capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "tunnel setup" in r.stdout and "SA renewal" in r.stdout
    d = json.loads(out.read_text())
    assert d["tunnels"] == 3 and 0 < d["setup_ms_median"] < 1000 and 0 < d["renewal_ms_median"] < 1000
    assert 0 < d["teardown_ms_median"] <= d["teardown_ms_p90"] < 1000 and "tunnel teardown" in r.stdout
    assert (d["link_mtu"], d["host_mtu"], d["offloads"], d["switch_gro"], d["wan"]) == (1500, 1400, True, True, "afpacket")
    assert (d["jumbo_link_mtu"], d["jumbo_host_mtu"]) == (9000, 8900)
    if shutil.which("iperf3"):
        assert d["goodput_mbps"]["aes-gcm-128"] > 1, "TCP crossed the tunnel"
        # the jumbo row is its own, labelled as such, never in place of the standard one
        assert d["goodput_jumbo_mbps"]["bypass"] > 1 and "bypass" not in d["goodput_mbps"]
        assert "Jumbo frames, NOT the standard figure" in r.stdout
        # hosts without offloads: a row of its own
        assert d["goodput_no_offloads_mbps"]["null"] > 1 and "null" not in d["goodput_mbps"]
        assert "Hosts' offloads off" in r.stdout
        assert isinstance(d["goodput_retransmits"]["aes-gcm-128"], int)
    r = subprocess.run([sys.executable, "-m", "bench.ipsec", "--tunnels", "0"], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "--tunnels" in r.stderr


def test_bench_ipsec_without_offloads(p4sec_bin, tmp_path):
    out = tmp_path / "b.json"
    # (and the link between the switches through AF_XDP sockets)
    r = subprocess.run([sys.executable, "-m", "bench.ipsec", "--tunnels", "1", "--seconds", "1", "--suites", "bypass", "--no-offloads",
                        "--jumbo", "0", "--wan", "xdp", "--p4sec", str(p4sec_bin), "--json", str(out)], capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    d = json.loads(out.read_text())
    # the main rows without offloads, and then no separate row for it
    assert d["offloads"] is False and d["goodput_no_offloads_mbps"] == {} and d["goodput_jumbo_mbps"] == {}
    assert d["wan"] == "xdp"
    if shutil.which("iperf3"):
        assert d["goodput_mbps"]["bypass"] > 1 and "hosts' offloads off" in r.stdout
