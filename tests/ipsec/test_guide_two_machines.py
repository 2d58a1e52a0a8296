"""docs/vpn-two-machines.md run as written, with network namespaces for the machines: gateways A and B (each with
eth0 for management, eth1 to its site, eth2 to the WAN), hosts a1 and b1. The guide's own commands are read from
the page (the interface preparation, the switch command, controller.yaml, the hosts' routes, the checks) and run
in the namespace of the machine they are written for; the ping crosses the tunnel, the WAN carries only ESP, and
the controller's commands answer."""
import os
import pathlib
import re
import shlex
import subprocess
import sys
import time
import uuid

import pytest

from conftest import ROOT
from p4sec.infra.netns import ns, sh

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")
GUIDE = ROOT / "docs" / "vpn-two-machines.md"


def blocks(lang):
    return re.findall(rf"```{lang}\n(.*?)```", GUIDE.read_text(), re.S)


def commands(block, p4sec_bin=None):
    """The shell commands of a code block: comments dropped, `sudo` and the checkout-relative .venv made absolute
    (.venv/bin/p4sec: the p4sec binary under test)."""
    out = []
    block = block.replace("\\\n", " ")      # a command continued on the next line is one command
    for line in block.splitlines():
        line = line.split("  #")[0].strip()
        if not line or line.startswith("#"):
            continue
        line = re.sub(r"\bsudo ", "", line)
        if p4sec_bin:
            line = re.sub(r"^(\.venv/bin/)?p4sec ", f"{p4sec_bin} ", line)
        line = line.replace(".venv/bin/", f"{pathlib.Path(sys.executable).parent}/")
        out.append(line)
    return out


def find(block_list, needle):
    return next(b for b in block_list if needle in b)


@pytest.fixture
def machines(p4sec_bin):
    t = uuid.uuid4().hex[:5]
    n = {k: f"g2m{k}{t}" for k in ("A", "B", "a1", "b1")}
    for x in n.values():
        sh("ip", "netns", "add", x)
        ns(x, "ip", "link", "set", "lo", "up")

    def link(x, xi, y, yi):
        tmp1, tmp2 = f"t{uuid.uuid4().hex[:8]}", f"t{uuid.uuid4().hex[:8]}"
        sh("ip", "link", "add", tmp1, "type", "veth", "peer", "name", tmp2)
        sh("ip", "link", "set", tmp1, "netns", x)
        sh("ip", "link", "set", tmp2, "netns", y)
        ns(x, "ip", "link", "set", tmp1, "name", xi)
        ns(y, "ip", "link", "set", tmp2, "name", yi)

    link(n["A"], "eth0", n["B"], "eth0")          # management
    link(n["A"], "eth2", n["B"], "eth2")          # WAN
    link(n["a1"], "eth0", n["A"], "eth1")         # site A
    link(n["b1"], "eth0", n["B"], "eth1")         # site B
    for g, addr in (("A", "203.0.113.1/24"), ("B", "203.0.113.2/24")):
        ns(n[g], "ip", "addr", "add", addr, "dev", "eth0")
        ns(n[g], "ip", "link", "set", "eth0", "up")
    # the hosts as the guide's configuration names them (their MACs in lan.mac)
    for h, addr, mac in (("a1", "10.1.0.10/16", "52:54:00:aa:00:10"), ("b1", "10.2.0.20/16", "52:54:00:bb:00:20")):
        ns(n[h], "ip", "link", "set", "eth0", "address", mac)
        ns(n[h], "ip", "addr", "add", addr, "dev", "eth0")
        ns(n[h], "ip", "link", "set", "eth0", "up")
        ns(n[h], "sysctl", "-qw", "net.ipv6.conf.eth0.disable_ipv6=1", check=False)
    yield n
    for x in n.values():
        sh("ip", "netns", "del", x, check=False)


def test_the_two_machine_guide_as_written(machines, p4sec_bin, tmp_path):
    n = machines
    sh_blocks = blocks("sh")
    procs = []
    env = dict(os.environ, PATH=f"{pathlib.Path(sys.executable).parent}:{os.environ['PATH']}")

    def run(machine, cmd, **kw):
        r = subprocess.run(["ip", "netns", "exec", n[machine], "bash", "-c", cmd], capture_output=True, text=True,
                           cwd=tmp_path, env=env, timeout=60, **kw)
        assert r.returncode == 0, (machine, cmd, r.stdout, r.stderr)
        return r.stdout

    try:
        # 2. the certificates (made on A; B reads the same directory here, as if copied), the interfaces,
        # then the switch (gateway B: its own management address and certificate)
        for c in commands(find(sh_blocks, "p4sec-ca init ca")):
            run("A", c)
        for g in ("A", "B"):
            for c in commands(find(sh_blocks, "promisc on")):
                run(g, c)
        switch = commands(find(sh_blocks, "p4sec switch --port 1=eth1"), p4sec_bin)[0]
        for g, addr in (("A", "203.0.113.1"), ("B", "203.0.113.2")):
            log = open(tmp_path / f"switch{g}.log", "w")
            procs.append(subprocess.Popen(["ip", "netns", "exec", n[g], "bash", "-c", switch.replace("203.0.113.1", addr).replace("gw-a", f"gw-{g.lower()}")],
                                          stderr=log, cwd=tmp_path, env=env))
        # 3. compile and run the controller on A, with the guide's controller.yaml
        (tmp_path / "programs").symlink_to(ROOT / "programs")
        for c in commands(find(sh_blocks, "p4sec compile programs/ipsec_gateway.p4"), p4sec_bin):
            run("A", c)
        (tmp_path / "controller.yaml").write_text(find(blocks("yaml"), "gateways:"))
        time.sleep(1)
        ctl = subprocess.Popen(["ip", "netns", "exec", n["A"], "bash", "-c", commands(find(sh_blocks, "p4sec-controller run"))[0]],
                               stdout=subprocess.PIPE, stderr=open(tmp_path / "controller.log", "w"), text=True, cwd=tmp_path, env=env)
        procs.append(ctl)
        line = ctl.stdout.readline()
        assert "ready, REST API on http://127.0.0.1:8080" in line, (tmp_path / "controller.log").read_text()[-3000:]
        # 4. the hosts' routes
        hosts = find(sh_blocks, "ip neigh replace 10.1.255.254")
        part_a, part_b = re.split(r"^# on host b1.*$", hosts, flags=re.M)
        for c in commands(part_a):
            run("a1", c)
        for c in commands(part_b):
            run("b1", c)
        # 5. the checks: ping across, only ESP on the WAN, the controller's commands
        cap = subprocess.Popen(["ip", "netns", "exec", n["B"], "tcpdump", "-nli", "eth2", "-c", "6", "-w", str(tmp_path / "wan.pcap")],
                               stderr=subprocess.DEVNULL)
        time.sleep(1)
        checks = commands(find(sh_blocks, "ping -c 3 10.2.0.20"))
        out = run("a1", checks[0])
        assert "3 received" in out, out
        cap.wait(timeout=20)
        from scapy.all import ESP, rdpcap
        wan = rdpcap(str(tmp_path / "wan.pcap"))
        assert len(wan) == 6 and all(ESP in p for p in wan), [p.summary() for p in wan]
        for c in checks[2:]:
            out = run("A", c)
            if "tunnels list" in c:
                assert re.search(r"A-B\s+A <-> B\s+aes-gcm-128\s+esp\s+up", out), out
            if "tunnels show" in c:
                assert "tunnel A-B: up" in out and "events (" in out, out
        assert "3 received" in run("a1", checks[0])        # after the rekey
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
