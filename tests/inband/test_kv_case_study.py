"""The P4EAD case study end to end in namespaces (python -m bench.kvcase): client, switch, server and controller;
the in-band updates of the authenticated build all verify, and the cache recovers after every shift of the hot set."""
import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")


def test_case_study_with_and_without_authentication(p4sec_bin, tmp_path):
    out, png = tmp_path / "kv.json", tmp_path / "kv.png"
    r = subprocess.run([sys.executable, "-m", "bench.kvcase", "--builds", "noauth,rpp1", "--duration", "4", "--shift-every", "2",
                        "--rate", "1000", "--p4sec", str(p4sec_bin), "--json", str(out), "--plot", str(png)],
                       capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "miss ratio per second" in r.stdout and png.stat().st_size > 10000
    res = {x["build"]: x for x in json.loads(out.read_text())["results"]}
    for build, x in res.items():
        sent, sw = x["controller"]["control_packets"], x["switch"]
        assert sent > 10, x["controller"]
        # every update the controller sent was taken; none was refused
        assert sw["accepted"] == sent and sw["bad_tag"] == 0 and sw["replayed"] == 0 and sw["unknown_sender"] == 0, (build, sw)
        assert sw["kv_hits"] > 0 and sw["kv_misses"] > 0
        s = x["summary"]
        # right after a shift the new hot keys miss; once the controller pushed them, they hit
        assert s["first_0.5s_after_shifts"] > s["second_half_of_epochs"] + 0.1, (build, s)
    # plain-P4 P4EAD recirculates: 56 passes per AEAD128 control packet (16-byte AD, 32-byte body, 1 round per pass)
    assert res["rpp1"]["switch"]["passes"] == 56 * res["rpp1"]["switch"]["accepted"]
    assert res["noauth"]["switch"]["passes"] == 0
