"""Host-to-site with the client agent (userspace backend): a road-warrior namespace reaches a site host through
S1; the agent gets its SAs from the controller over mutual TLS and runs p4sec on a TUN port; the WAN carries ESP;
a revoked certificate locks the client out; the CA and agent refuse bad input precisely."""
import contextlib
import json
import os
import subprocess
import sys
import time
import uuid

import pytest

from conftest import ROOT, console_script
from ctlrig import switch_tls_args
from p4sec.ipsec import ca
from p4sec.infra.netns import sh
from p4sec.infra.netns import free_port

CONTROLLER = console_script("p4sec-controller")

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces and TUN")

ECHO = r"""
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("0.0.0.0", 7007))
print("ready", flush=True)
while True:
    d, a = s.recvfrom(2048)
    s.sendto(b"echo:" + d, a)
"""

PING = r"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2)
ok = 0
for i in range(int(sys.argv[2])):
    s.sendto(b"road-warrior %d" % i, (sys.argv[1], 7007))
    try:
        d, _ = s.recvfrom(2048)
        ok += d == b"echo:road-warrior %d" % i
    except socket.timeout:
        pass
print(ok)
"""


def test_ca_refuses_bad_input(tmp_path):
    with pytest.raises(ca.CaError):
        ca.issue(tmp_path / "none", "alice")
    ca.init(tmp_path / "ca")
    with pytest.raises(ca.CaError):
        ca.init(tmp_path / "ca")
    with pytest.raises(ca.CaError):
        ca.issue(tmp_path / "ca", "../evil")
    with pytest.raises(ca.CaError):
        ca.revoke(tmp_path / "ca", "nobody")
    ca.issue(tmp_path / "ca", "alice")
    assert oct((tmp_path / "ca" / "alice.key").stat().st_mode & 0o777) == "0o600"
    serial = ca.revoke(tmp_path / "ca", "alice")
    assert serial in ca.revoked_serials(tmp_path / "ca")


@contextlib.contextmanager
def road_warrior_site(tmp_path):
    """The site behind S1 (namespace n1: host h1 10.1.0.1/16 on S1's port 1 `a1`) and a road warrior (namespace rw:
    198.51.100.7/24 on rw0, the WAN to S1's port 2 `wa`), a CA in tmp_path/ca with the controller's certificate
    and alice's, bob's and mallory's; the names, removed again afterwards."""
    t = uuid.uuid4().hex[:5]
    n1, rw = f"ag1{t}", f"agr{t}"
    h1, a1, rw0, wa = f"h1{t}", f"a1{t}", f"rw{t}", f"wa{t}"
    try:
        for n in (n1, rw):
            sh("ip", "netns", "add", n)
            sh("ip", "netns", "exec", n, "ip", "link", "set", "lo", "up")
        for host, sw, n, addr in ((h1, a1, n1, "10.1.0.1/16"), (rw0, wa, rw, "198.51.100.7/24")):
            sh("ip", "link", "add", host, "type", "veth", "peer", "name", sw)
            sh("ip", "link", "set", host, "netns", n)
            sh("ip", "netns", "exec", n, "ip", "link", "set", host, "up")
            sh("ip", "netns", "exec", n, "ip", "addr", "add", addr, "dev", host)
            sh("ip", "netns", "exec", n, "ethtool", "-K", host, "tx", "off", check=False)
            sh("ip", "link", "set", sw, "up")
        h1_mac = sh("ip", "netns", "exec", n1, "cat", f"/sys/class/net/{h1}/address").stdout.strip()
        sh("ip", "netns", "exec", n1, "ip", "neigh", "replace", "10.1.255.254", "lladdr", "02:00:00:00:00:01", "dev", h1)
        sh("ip", "netns", "exec", n1, "ip", "route", "add", "10.9.0.0/16", "via", "10.1.255.254")
        cadir = tmp_path / "ca"
        ca.init(cadir)
        ca.issue(cadir, "controller", server=True)
        for c in ("alice", "bob", "mallory"):
            ca.issue(cadir, c)
        yield {"n1": n1, "rw": rw, "h1": h1, "a1": a1, "rw0": rw0, "wa": wa, "h1_mac": h1_mac, "cadir": cadir}
    finally:
        for n in (n1, rw):
            sh("ip", "netns", "del", n, check=False)
        for i in (a1, wa):
            sh("ip", "link", "del", i, check=False)


GATEWAY_S1 = """gateways:
  - {{name: S1, grpc: "127.0.0.1:{port}", address: 192.0.2.1,
     lan: {{prefix: 10.1.0.0/16, port: 1, mac: "{h1_mac}"}}, wan: {{prefix: 203.0.113.0/24, port: 2, mac: "02:00:00:00:00:99"}}}}
host_profiles:
  - {{name: office, gateway: S1, pool: 10.9.0.0/24, suite: aes-gcm-128, soft: {{packets: 60}}, hard: {{packets: 100000}}}}
  - {{name: nat, gateway: S1, pool: 10.9.1.0/24, suite: aes-gcm-128, encap: udp, soft: {{packets: 60}}, hard: {{packets: 100000}}}}
clients:
  - {{name: alice, profiles: [office, nat]}}
  - {{name: bob, profiles: []}}
"""


def agent_command(net, sock, client, *args):
    """`p4sec-agent` in the road warrior's namespace with `client`'s certificate, to the endpoint at unix:`sock`."""
    cadir = net["cadir"]
    return ["ip", "netns", "exec", net["rw"], sys.executable, "-m", "p4sec.ipsec.agent", "--controller", f"unix:{sock}", "--ca", str(cadir / "ca.crt"),
            "--cert", str(cadir / f"{client}.crt"), "--key", str(cadir / f"{client}.key"), *args]


def echo_server(net):
    """The UDP echo server on the site host, once it listens."""
    echo = subprocess.Popen(["ip", "netns", "exec", net["n1"], sys.executable, "-c", ECHO], stdout=subprocess.PIPE, text=True)
    assert echo.stdout.readline().strip() == "ready"
    return echo


@pytest.fixture
def site(p4sec_bin, tmp_path):
    with road_warrior_site(tmp_path) as net:
        yield from _site(p4sec_bin, tmp_path, net)


def _site(p4sec_bin, tmp_path, net):
    rw, a1, wa, rw0, h1_mac, cadir = net["rw"], net["a1"], net["wa"], net["rw0"], net["h1_mac"], net["cadir"]
    out = tmp_path / "gw"
    subprocess.run([str(p4sec_bin), "compile", str(ROOT / "programs" / "ipsec_gateway.p4"), "-o", str(out)], check=True)
    port, rest = free_port(), free_port()
    sock = tmp_path / "agents.sock"
    cfg = tmp_path / "ctl.yaml"
    cfg.write_text(f"db: {tmp_path / 'ctl.db'}\nprogram: {out}\nrest: 127.0.0.1:{rest}\n" + GATEWAY_S1.format(port=port, h1_mac=h1_mac)
                   + f'agents: {{listen: "unix:{sock}", ca: {cadir}, cert: controller}}\n'
                   + f"switch_tls: {{ca: {cadir}, cert: controller}}\n")
    # the switch takes P4Runtime from the controller's certificate only (the agents' come from the same CA)
    ca.issue(cadir, "switch", server=True, sans=["127.0.0.1"])
    procs = [subprocess.Popen([str(p4sec_bin), "switch", "--grpc", f"127.0.0.1:{port}", "--port", f"1={a1}", "--port", f"2={wa}"]
                              + switch_tls_args(cadir), stderr=subprocess.DEVNULL)]
    time.sleep(0.5)
    log = open(tmp_path / "controller.log", "a")

    def start_controller():
        ctl = subprocess.Popen([CONTROLLER, "run", str(cfg)], stdout=subprocess.PIPE, stderr=log, text=True)
        procs.append(ctl)
        assert "ready" in ctl.stdout.readline(), (tmp_path / "controller.log").read_text()
        return ctl

    ctl = [start_controller()]

    def restart_controller():
        ctl[0].terminate()
        ctl[0].wait(timeout=20)
        ctl[0] = start_controller()
    procs.append(echo_server(net))

    def agent(client, *args, background=False):
        cmd = agent_command(net, sock, client, *args)
        if background:
            return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60)

    yield {"agent": agent, "rw": rw, "rw0": rw0, "wa": wa, "cadir": cadir, "p4sec": str(p4sec_bin), "rest": rest,
           "restart_controller": restart_controller, "log": tmp_path / "controller.log"}
    for p in reversed(procs):
        if p.poll() is None:
            p.terminate()
            p.wait(timeout=10)



def echoes(site, n):
    """`n` echoes from the road warrior to 10.1.0.1 (behind the gateway): every one answered."""
    r = subprocess.run(["ip", "netns", "exec", site["rw"], sys.executable, "-c", PING, "10.1.0.1", str(n)], capture_output=True, text=True, timeout=120)
    assert r.stdout.strip() == str(n), r.stdout + r.stderr


def show(site, tunnel):
    """`p4sec-controller tunnels show TUNNEL` through the site's REST API, as JSON."""
    r = subprocess.run([CONTROLLER, "--api", f"http://127.0.0.1:{site['rest']}", "tunnels", "show", tunnel, "--json"], capture_output=True, text=True)
    return json.loads(r.stdout)


def host_renewals(state):
    """The gateway-side renewals (of its outbound SA) among a tunnel's events."""
    return [e["what"] for e in state["events"] if "host renewal" in e["what"] and "SAD-enc" in e["what"]]


def echo_until_renewals(site, tunnel, n, rounds=20):
    """Echoes in rounds of 100 (none lost) until the tunnel's events show `n` renewals, at most `rounds` rounds
    (how many packets a renewal takes depends on the machine's load): (the tunnel's state, its renewals)."""
    for _ in range(rounds):
        echoes(site, 100)
        state = show(site, tunnel)
        renewals = host_renewals(state)
        if len(renewals) >= n:
            break
    return state, renewals

def test_road_warrior_reaches_the_site_and_revocation_locks_it_out(site):
    agent = site["agent"]
    r = agent("alice", "list")
    assert r.returncode == 0 and "alice: office" in r.stdout, r.stderr
    r = agent("bob", "up", "office", "--wan", site["rw0"])
    assert r.returncode == 1 and "PERMISSION_DENIED" in r.stderr and "may not use profile" in r.stderr
    r = agent("mallory", "list")
    assert r.returncode == 1 and "not a client" in r.stderr

    # the XFRM backend, as commands (this kernel has no ESP): the same SAs, then the tunnel is taken down again
    r = agent("alice", "up", "office", "--wan", site["rw0"], "--backend", "xfrm", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("ip xfrm state add") == 2 and "rfc4106(gcm(aes))" in r.stdout and "dir out" in r.stdout
    r = agent("alice", "up", "office", "--wan", site["rw0"], "--backend", "xfrm")
    assert r.returncode == 1 and "ip xfrm state add" in r.stderr and "does this kernel have ESP" in r.stderr

    up = agent("alice", "up", "office", "--wan", site["rw0"], "--p4sec", site["p4sec"], background=True)
    line = up.stdout.readline()
    assert line.startswith("up: office@alice inner 10.9.0.1/32 -> site 10.1.0.0/16"), line + up.stderr.read() if not line else line
    cap = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom scapy.all import AsyncSniffer\n"
                            "s = AsyncSniffer(iface=sys.argv[1], filter='ip proto 50', count=4, timeout=6)\n"
                            "s.start(); time.sleep(0.5); print('ready', flush=True); s.join()\n"
                            "print(len(s.results or []))", site["wa"]], stdout=subprocess.PIPE, text=True)
    assert cap.stdout.readline().strip() == "ready"
    # echoes in rounds of 100 until three renewals are seen: the SAs reach their soft limit (60 packets) again and
    # again; the agent renews them and no echo is lost (how many packets a renewal takes depends on machine load)
    state, renewals = echo_until_renewals(site, "office@alice", 3)
    assert int(cap.communicate(timeout=20)[0].split()[-1]) >= 4, "the WAN carried ESP both ways"
    assert state["state"] == "up" and any("host phase 2" in e["what"] for e in state["events"])
    assert len(renewals) >= 3, state["events"]
    # every renewal moved the gateway's outbound SA on: each one starts from the SPI the one before ended with
    spis = [r.split("SAD-enc ")[1].split(" on ")[0].split(" -> ") for r in renewals]
    assert all(a[1] == b[0] for a, b in zip(spis, spis[1:])), renewals

    # revoke alice: the controller refuses her from now on
    ca.revoke(site["cadir"], "alice")
    r = agent("alice", "list")
    assert r.returncode == 1 and "revoked" in r.stderr
    up.terminate()
    up.wait(timeout=20)


def test_host_tunnel_survives_a_controller_restart(site):
    """The controller goes away and comes back in the middle of a road warrior's traffic: the tunnel keeps
    carrying traffic meanwhile, the restarted controller adopts the gateway with the host tunnel as it is, and the
    renewals the agent asks for afterwards are served: no echo is lost at any point."""
    agent = site["agent"]
    up = agent("alice", "up", "office", "--wan", site["rw0"], "--p4sec", site["p4sec"], background=True)
    line = up.stdout.readline()
    assert line.startswith("up: office@alice"), line + up.stderr.read() if not line else line

    echoes(site, 30)
    site["restart_controller"]()
    assert "adopted" in site["log"].read_text()
    state = show(site, "office@alice")
    assert state["state"] == "up", state
    before = len(host_renewals(state))
    # renewals after the restart (soft limit 60 packets), each served by the new controller
    state, renewals = echo_until_renewals(site, "office@alice", before + 2)
    assert state["state"] == "up" and len(renewals) >= before + 2, state["events"]
    up.terminate()
    out, err = up.communicate(timeout=20)
    assert "stopping (signal): taking office down" in out and "p4sec-agent: office is down" in out, out + err
    final = show(site, "office@alice")
    assert final["state"] != "up", ("the agent took the tunnel down when it stopped", err, final["events"][-3:], site["log"].read_text()[-1500:])


def test_road_warrior_with_esp_in_udp(site):
    """A host profile with encap: udp: the agent's SAs and the gateway's send ESP in UDP (port 4500), the WAN carries
    no plain ESP, echoes cross both ways, and the renewals (soft limit 60 packets) keep the encapsulation; the XFRM
    backend's states say `encap espinudp`."""
    agent = site["agent"]
    r = agent("alice", "up", "nat", "--wan", site["rw0"], "--backend", "xfrm", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("encap espinudp 4500 4500 0.0.0.0") == 2, r.stdout
    up = agent("alice", "up", "nat", "--wan", site["rw0"], "--p4sec", site["p4sec"], background=True)
    line = up.stdout.readline()
    assert line.startswith("up: nat@alice inner 10.9.1.1/32"), line + up.stderr.read() if not line else line
    cap = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom scapy.all import AsyncSniffer\n"
                            "s = AsyncSniffer(iface=sys.argv[1], filter='ip proto 50 or udp port 4500', timeout=8)\n"
                            "s.start(); time.sleep(0.5); print('ready', flush=True); s.join()\n"
                            "r = s.results or []\n"
                            "print(sum(p.haslayer('UDP') and p['UDP'].dport == 4500 for p in r), sum(p['IP'].proto == 50 for p in r))",
                            site["wa"]], stdout=subprocess.PIPE, text=True)
    assert cap.stdout.readline().strip() == "ready"

    state, renewals = echo_until_renewals(site, "nat@alice", 2, rounds=10)
    assert len(renewals) >= 2, state["events"]
    assert state["encap"] == "udp"
    udp, esp = map(int, cap.communicate(timeout=30)[0].split())
    assert udp >= 4 and esp == 0, (udp, esp)
    up.terminate()
    up.wait(timeout=20)
