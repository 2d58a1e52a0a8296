"""A PTF suite written for BMv2 (tests/ptf/bmv2tests, with its own P4Runtime base test in tests/ptf/bmv2lib that
pushes the program in BMv2's device config), started the way the P4 guides' `runptf.sh` scripts start theirs,
with only the program names pointed at p4sec (symlinks `p4c` and `simple_switch_grpc` first on PATH):

    p4c --target bmv2 --arch v1model --p4runtime-files router.p4info.txtpb router.p4
    simple_switch_grpc --device-id 0 --log-file ss-log --log-flush --dump-packet-data 10000 \\
        -i 0@veth0 -i 1@veth2 --no-p4 &
    ptf --pypath bmv2lib -i 0@veth1 -i 1@veth3 \\
        --test-params="grpcaddr='localhost:9559';p4info='router.p4info.txtpb';config='router.json'" --test-dir bmv2tests

All of it in a network namespace of its own (so the guides' interface names and BMv2's default gRPC port 9559
are free), as root."""
import os
import pathlib
import shutil
import subprocess
import sys
import time
import uuid

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
HERE = pathlib.Path(__file__).resolve().parent
PTF = pathlib.Path(sys.executable).parent / "ptf"
pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
              pytest.mark.skipif(not PTF.exists(), reason=f"ptf is not installed at {PTF} (./scripts/setup)")]


def sh(*cmd, **kw):
    return subprocess.run(cmd, check=kw.pop("check", True), capture_output=True, text=True, **kw)


@pytest.fixture
def guide(p4sec_bin, tmp_path):
    """The namespace with veth0-veth1 and veth2-veth3, a PATH whose p4c and simple_switch_grpc are p4sec, and the
    working directory with the program and the suite."""
    ns = f"rptf{uuid.uuid4().hex[:6]}"
    sh("ip", "netns", "add", ns)
    sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
    for a, b in (("veth0", "veth1"), ("veth2", "veth3")):
        sh("ip", "netns", "exec", ns, "ip", "link", "add", a, "type", "veth", "peer", "name", b)
        for d in (a, b):
            sh("ip", "netns", "exec", ns, "ip", "link", "set", d, "up")
            sh("ip", "netns", "exec", ns, "sysctl", "-qw", f"net.ipv6.conf.{d}.disable_ipv6=1", check=False)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("p4c", "simple_switch_grpc"):
        (bin_dir / name).symlink_to(p4sec_bin)
    (bin_dir / "ptf").symlink_to(PTF)
    shutil.copy(ROOT / "programs" / "ipv4_router.p4", tmp_path / "router.p4")
    for d in ("bmv2lib", "bmv2tests"):
        shutil.copytree(HERE / d, tmp_path / d)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
    procs = []
    yield ns, tmp_path, env, procs
    for p in procs:
        p.terminate()
        p.wait(timeout=10)
    sh("ip", "netns", "del", ns, check=False)


def test_a_bmv2_ptf_suite_started_as_runptf_starts_it(guide):
    ns, work, env, procs = guide
    r = sh("p4c", "--target", "bmv2", "--arch", "v1model", "--p4runtime-files", "router.p4info.txtpb", "router.p4",
           cwd=work, env=env)
    assert (work / "router.json").exists() and (work / "router.p4info.txtpb").exists(), r.stdout + r.stderr
    procs.append(subprocess.Popen(["ip", "netns", "exec", ns, "simple_switch_grpc", "--device-id", "0", "--log-file",
                                   "ss-log", "--log-flush", "--dump-packet-data", "10000", "-i", "0@veth0", "-i", "1@veth2",
                                   "--no-p4"], cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    log = work / "ss-log"
    for _ in range(100):
        if log.exists() and "P4Runtime (device 0) on 0.0.0.0:9559" in log.read_text():
            break
        assert procs[0].poll() is None, procs[0].stderr.read()
        time.sleep(0.1)
    else:
        raise AssertionError(f"the switch did not start: {log.read_text() if log.exists() else 'no ss-log'}")
    r = sh("ip", "netns", "exec", ns, "ptf", "--pypath", "bmv2lib", "-i", "0@veth1", "-i", "1@veth3",
           "--test-params=grpcaddr='localhost:9559';p4info='router.p4info.txtpb';config='router.json'",
           "--test-dir", "bmv2tests", cwd=work, env=env, check=False, timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    assert "Ran 2 tests" in out and "OK" in out, out[-2000:]
    text = log.read_text()
    # BMv2's debug output the guides point at: every packet in ss-log, with its data
    assert "Table 'RouterIngress.ipv4_lpm': hit" in text and "Action entry is RouterIngress.set_nhop" in text
    assert "Received packet data: 0200000000fe02000000001008004500" in text, text[-3000:]
    assert "Transmitting packet of size" in text and "out of port 1" in text
