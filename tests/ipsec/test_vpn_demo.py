"""The README's demo (python -m bench.vpn_demo) runs end to end: a tunnel, ESP on the wire decrypted with the
controller's keys, a renewal, goodput; with the hosts' offloads on (the default) and off."""
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")


@pytest.mark.parametrize("extra", [[], ["--no-offloads"]])
def test_vpn_demo_runs_end_to_end(p4sec_bin, extra):
    r = subprocess.run([sys.executable, "-m", "bench.vpn_demo", "--seconds", "1", "--p4sec", str(p4sec_bin), *extra],
                       capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "VPN demo: OK" in r.stdout
    # the capture of the WAN link decrypted with the keys the controller reports
    assert "decrypted:   IP / UDP 10.1.0.1" in r.stdout and "hello from H1 through the p4sec IPsec tunnel #0" in r.stdout
    assert "renew S1->S2" in r.stdout
    want = "hosts' offloads off" if extra else "hosts' offloads on"
    assert want in r.stdout or "iperf3 is not installed" in r.stdout
