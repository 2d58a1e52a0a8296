"""docs/p4runtime-controller.md run as written, inside a network namespace of its own (so its TAP names and
localhost:9559 are its own): the guide's compile command, its switch command, its controller.py through
p4runtime-shell and its scapy sender, read from the page; the packet comes out of port 2 rewritten by the entry."""
import os
import pathlib
import re
import subprocess
import sys
import time
import uuid

import pytest

from conftest import ROOT
from p4sec.infra.netns import ns, sh

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (TAP devices, a network namespace)")
GUIDE = ROOT / "docs" / "p4runtime-controller.md"


def test_the_p4runtime_guide_as_written(p4sec_bin, tmp_path):
    text = GUIDE.read_text()
    sh_blocks = re.findall(r"```sh\n(.*?)```", text, re.S)
    controller = re.findall(r"```python\n(.*?)```", text, re.S)[0]
    venv = pathlib.Path(sys.executable).parent

    def fix(cmd):
        cmd = re.sub(r"\bsudo ", "", cmd.split("  #")[0]).strip()
        cmd = re.sub(r"^(\.venv/bin/)?p4sec ", f"{p4sec_bin} ", cmd)
        return cmd.replace(".venv/bin/", f"{venv}/")

    name = f"p4rtg{uuid.uuid4().hex[:6]}"
    sh("ip", "netns", "add", name)
    ns(name, "ip", "link", "set", "lo", "up")
    env = dict(os.environ, PATH=f"{venv}:{os.environ['PATH']}")
    (tmp_path / "programs").symlink_to(ROOT / "programs")
    sw = None
    try:
        compile_cmd = fix(next(b for b in sh_blocks if "p4sec compile programs/ipv4_router.p4" in b).splitlines()[0])
        subprocess.run(["bash", "-c", compile_cmd], cwd=tmp_path, check=True)
        switch_cmd = fix(next(b for b in sh_blocks if "p4sec switch --port 1=tap:p4tap1" in b).strip())
        sw = subprocess.Popen(["ip", "netns", "exec", name, "bash", "-c", switch_cmd], cwd=tmp_path, env=env,
                              stderr=open(tmp_path / "switch.log", "w"))
        deadline = time.time() + 30
        while "P4Runtime (device 1) on 127.0.0.1:9559" not in (tmp_path / "switch.log").read_text():
            assert time.time() < deadline and sw.poll() is None, (tmp_path / "switch.log").read_text()
            time.sleep(0.1)
        (tmp_path / "controller.py").write_text(controller)
        r = subprocess.run(["ip", "netns", "exec", name, sys.executable, "controller.py"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and "10.2.0.0" not in r.stderr, r.stderr
        # the entry read back: the /16 prefix, port 2
        assert "prefix_len: 16" in r.stdout and 'value: "\\002"' in r.stdout, r.stdout
        sender = next(b for b in sh_blocks if "AsyncSniffer" in b)
        r = subprocess.run(["ip", "netns", "exec", name, "bash", "-c", fix(sender.splitlines()[0]) + "\n"
                            + "\n".join(sender.splitlines()[1:])], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0, r.stderr
        assert "10.2.0.2:5678" in r.stdout and "ttl 63 dst 02:00:00:00:00:02" in r.stdout, r.stdout
        assert "the pipeline has 1 table (" in (tmp_path / "switch.log").read_text()
    finally:
        if sw is not None:
            sw.terminate()
            sw.wait(timeout=10)
        sh("ip", "netns", "del", name, check=False)
