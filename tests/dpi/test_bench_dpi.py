"""Smoke test of the URL-filter benchmark (python -m bench.dpi, issue #7) with tiny parameters: it runs to
the end, every system forwards unlisted requests in every cell and drops listed ones, the JSON and the plot are
written, and nothing is left behind. Properties only, no timing targets."""
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "python")] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")
needs_iptables = pytest.mark.skipif(not shutil.which("iptables-restore"), reason="needs iptables (apt-get install iptables)")


def bench(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "bench.dpi", *args], capture_output=True, text=True,
                          timeout=timeout, env=ENV, cwd=ROOT)


def namespaces():
    r = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    return {line.split()[0] for line in r.stdout.splitlines() if line.strip()}


@needs_root
@needs_iptables
def test_tiny_run_forwards_blocks_and_reports(p4sec_bin, tmp_path):
    out, png = tmp_path / "bench.json", tmp_path / "bench.png"
    before = namespaces()
    r = bench("--domains", "1,100", "--flows", "1,10", "--seconds", "0.2", "--samples", "30", "--rounds", "1",
              "--json", str(out), "--plot", str(png), "--p4sec", str(p4sec_bin))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "Traceback" not in r.stderr
    doc = json.loads(out.read_text())
    assert doc["benchmark"] == "url_filter_dpi"
    assert doc["parameters"]["domains"] == [1, 100] and doc["parameters"]["flows"] == [1, 10]
    systems = doc["parameters"]["systems"]
    assert {"netfilter", "fast"} <= set(systems)
    for s in systems:
        got = sorted(c["domains"] for c in doc["cells"] if c["system"] == s)
        assert got == [0, 1, 100], (s, got)
        assert sorted(f["flows"] for f in doc["flows"] if f["system"] == s) == [1, 10]
    for c in doc["cells"]:
        where = f"{c['system']} with {c['domains']} domains"
        assert c["throughput"]["forwarded"] > 0 and c["throughput"]["pps"] > 0, where
        lat = c["latency_us"]
        assert lat["samples"] > 0 and 0 < lat["median"] <= lat["p99"], where
        if c["domains"]:
            chk = c["block_check"]
            assert chk["ok"] and chk["unlisted_arrived"] and chk["blocked_arrived"] == 0 and chk["blocked_sent"] > 0, where
            assert "added_latency_us" in c, where
    for c in doc["cells"]:
        if c["system"] == "netfilter":
            assert c["config"]["rules"] == c["domains"]
        if c["system"] == "fast" and c["domains"]:
            # every request was inspected (none forwarded without a scan) and the listed ones were blocked
            assert c["switch_counters"]["not_inspected"] == 0 and c["switch_counters"]["blocked"] > 0
    for f in doc["flows"]:
        assert f["throughput"]["forwarded"] > 0, f
    names = {t["target"] for t in doc["targets"]}
    assert any("10x netfilter" in n for n in names) and any("flat" in n for n in names)
    assert all(t["verdict"] in ("PASS", "MISS") for t in doc["targets"])
    assert "targets:" in r.stdout and "throughput" in r.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # namespaces and their iptables state are gone
    assert not {n for n in namespaces() - before if n.startswith(("bdA", "bdM", "bdB"))}


@pytest.mark.parametrize("args, message", [
    (["--domains", "1,x"], "--domains"),
    (["--domains", "0"], "--domains"),
    (["--flows", ""], "--flows"),
    (["--seconds", "-1"], "--seconds"),
    (["--rounds", "0"], "--rounds"),
    (["--systems", "netfilter,bogus"], "--systems"),
    (["--p4sec", "/nonexistent/p4sec"], "--p4sec"),
    (["--json", "/nonexistent/dir/x.json"], "does not exist"),
])
def test_bad_arguments_give_messages(args, message):
    r = bench(*args, timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    assert message in r.stderr and "Traceback" not in r.stderr, r.stderr
