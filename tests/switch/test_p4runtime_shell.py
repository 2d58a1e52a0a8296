"""The p4sec switch driven by p4runtime-shell (PyPI), the P4 community's interactive P4Runtime client."""
import subprocess

import p4sec  # noqa: F401
import pytest

from conftest import ROOT
from test_p4runtime import free_port

sh = pytest.importorskip("p4runtime_sh.shell")


def test_p4runtime_shell_programs_and_reads(p4sec_bin, tmp_path):
    out = tmp_path / "router"
    subprocess.run([str(p4sec_bin), "compile", str(ROOT / "programs" / "ipv4_router.p4"), "-o", str(out)], check=True)
    port = free_port()
    proc = subprocess.Popen([str(p4sec_bin), "switch", "--grpc", f"127.0.0.1:{port}"], stderr=subprocess.PIPE)
    try:
        import grpc
        ch = grpc.insecure_channel(f"127.0.0.1:{port}")
        grpc.channel_ready_future(ch).result(timeout=30)  # the switch is listening
        ch.close()
        sh.setup(device_id=1, grpc_addr=f"127.0.0.1:{port}", election_id=(0, 1),
                 config=sh.FwdPipeConfig(str(out / "p4info.txtpb"), str(out / "program.json")))
        for prefix, nh in (("10.0.0.0/8", "3"), ("192.168.1.0/24", "4")):
            te = sh.TableEntry("RouterIngress.ipv4_lpm")(action="RouterIngress.set_nhop")
            te.match["hdr.ipv4.dst_addr"] = prefix
            te.action["dst_mac"] = "02:00:00:00:00:02"
            te.action["src_mac"] = "02:00:00:00:00:01"
            te.action["port"] = nh
            te.insert()
        got = {e.match["hdr.ipv4.dst_addr"].lpm.prefix_len: e.action["port"].value for e in sh.TableEntry("RouterIngress.ipv4_lpm").read()}
        assert got == {8: b"\x03", 24: b"\x04"}
        te = sh.TableEntry("RouterIngress.ipv4_lpm")(action="RouterIngress.set_nhop")
        te.match["hdr.ipv4.dst_addr"] = "10.0.0.0/8"
        te.action["dst_mac"] = "02:00:00:00:00:02"
        te.action["src_mac"] = "02:00:00:00:00:01"
        te.action["port"] = "5"
        te.modify()
        te.delete()
        assert len(list(sh.TableEntry("RouterIngress.ipv4_lpm").read())) == 1
        with pytest.raises(Exception):
            te.delete()  # already gone
    finally:
        sh.teardown()
        proc.terminate()
        proc.wait(timeout=10)
