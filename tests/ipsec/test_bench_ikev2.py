"""The IKEv2 benchmark (python -m bench.ikev2) runs end to end with small settings: every pair sets up, carries
TCP and rekeys, and the figures are where they belong in its JSON."""
import json
import os
import subprocess
import sys

import pytest

from bench.ikev2_rig import missing
from conftest import ROOT

pytestmark = pytest.mark.skipif(missing() is not None and os.environ.get("CI", "").lower() not in ("true", "1"),
                                reason=missing() or "")


def test_bench_ikev2_strongswan_pairs(p4sec_bin, tmp_path):
    out = tmp_path / "b.json"
    r = subprocess.run([sys.executable, "-m", "bench.ikev2", "--setups", "2", "--seconds", "1", "--p4sec", str(p4sec_bin),
                        "--json", str(out)], capture_output=True, text=True, timeout=400, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    d = json.loads(out.read_text())
    assert set(d) == {"p4sec<->strongSwan", "p4sec<->p4sec IKEv2", "strongSwan<->strongSwan libipsec", "p4sec IKE-less"}
    for name, row in d.items():
        assert len(row["setup_ms"]) == 2 and all(x > 0 for x in row["setup_ms"]), name
        assert row["goodput_mbps"] and row["goodput_mbps"] > 0, name
        assert len(row["rekey_ms"]) == 3 and all(x > 0 for x in row["rekey_ms"]), name
