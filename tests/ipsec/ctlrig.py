"""What the controller tests share to start the two-gateway VPN: the gateway program compiled, the two
`p4sec switch` processes on the `net` fixture's interfaces, either driven by an in-process controller
(`gateway_pair`) or by a controller process (a configuration with S1 and S2, their sites and WAN, the process
started and waited for), and everything stopped again. The switches are programmed over mutual TLS as
docs/ipsec.md sets it up (`pki`: certificates from p4sec-ca, the switch's --tls-writers naming the controller),
or in plaintext where a test asks for it explicitly."""
import contextlib
import signal
import socket
import subprocess
import sys
import time

from conftest import ROOT
from p4sec.infra import runtime
from p4sec.ipsec import ca
from p4sec.ipsec.controller import Gateway, IpsecController
from p4sec.infra.netns import free_port

# gateway A's address, B's, the WAN prefix A reaches B through, and B's towards A
V4_WAN = ("192.0.2.1", "198.51.100.1", "198.51.100.0/24", "192.0.2.0/24")
V6_WAN = ("2001:db8:a::1", "2001:db8:b::1", "2001:db8:b::/64", "2001:db8:a::/64")

# the two gateways of the `net` fixture (test_site_to_site.net): S1's site 10.1/16, S2's 10.2/16, a WAN between
GATEWAYS = """gateways:
  - {{name: S1, grpc: "127.0.0.1:{pa}", address: 192.0.2.1,
     lan: {{prefix: 10.1.0.0/16, port: 1, mac: "02:00:00:00:0a:01"}}, wan: {{prefix: 198.51.100.0/24, port: 2, mac: "02:00:00:00:0b:02"}}}}
  - {{name: S2, grpc: "127.0.0.1:{pb}", address: 198.51.100.1,
     lan: {{prefix: 10.2.0.0/16, port: 1, mac: "02:00:00:00:0b:01"}}, wan: {{prefix: 192.0.2.0/24, port: 2, mac: "02:00:00:00:0a:02"}}}}
"""


def compile_gateway(p4sec_bin, out):
    """programs/ipsec_gateway.p4 compiled into `out`; `out`."""
    subprocess.run([str(p4sec_bin), "compile", str(ROOT / "programs" / "ipsec_gateway.p4"), "-o", str(out)], check=True)
    return out


def pki(d):
    """A p4sec-ca directory `d` as docs/ipsec.md sets one up: the CA, the controller's certificate (`controller`),
    the switches' (`switch`, for 127.0.0.1) and a read-only monitor's (`monitor`); `d`."""
    ca.init(d)
    ca.issue(d, "controller", server=True)
    ca.issue(d, "switch", server=True, sans=["127.0.0.1"])
    ca.issue(d, "monitor")
    return d


def switch_tls_args(d):
    """`p4sec switch` flags for mutual TLS with the certificates of `pki(d)`: the controller may program the switch,
    the monitor may read it, a certificate revoked with p4sec-ca is refused."""
    return ["--tls-cert", str(d / "switch.crt"), "--tls-key", str(d / "switch.key"), "--tls-ca", str(d / "ca.crt"),
            "--tls-writers", "controller", "--tls-readers", "monitor", "--tls-revoked", str(d / "revoked.json")]


def controller_tls(d):
    """The controller's side of `pki(d)` (runtime.Switch's tls)."""
    return runtime.Tls.from_ca_dir(d, "controller")


def write_config(path, head, pa, pb, rest, program, tunnel, extra="", pki_dir=None):
    """A controller configuration at `path`: `head` (the store: `db: ...` or `store: ... ha: ...`), the program, the
    REST port, `extra` settings, the two gateways (P4Runtime on 127.0.0.1:pa and :pb) and one profile, the
    mapping `tunnel` (its YAML flow text, e.g. "name: S1-S2, a: S1, b: S2"); the switches are reached over mutual
    TLS with the certificates of `pki_dir`, or (None) in plaintext, said so explicitly (`insecure: true`)."""
    tls = f"switch_tls: {{ca: {pki_dir}, cert: controller}}" if pki_dir else "switch_tls: {insecure: true}"
    path.write_text(f"{head}\nprogram: {program}\nrest: 127.0.0.1:{rest}\n{tls}\n{extra}\n" + GATEWAYS.format(pa=pa, pb=pb)
                    + f"tunnels:\n  - {{{tunnel}}}\n")
    return path


def switch(p4sec_bin, port, lan, wan, log=None, pki_dir=None):
    """A `p4sec switch` with P4Runtime on 127.0.0.1:port, port 1 `lan`, port 2 `wan` (its stderr to `log`; None:
    this process's); over mutual TLS with the certificates of `pki_dir` (None: plaintext)."""
    tls = switch_tls_args(pki_dir) if pki_dir else []
    return subprocess.Popen([str(p4sec_bin), "switch", "--grpc", f"127.0.0.1:{port}", "--port", f"1={lan}", "--port", f"2={wan}"] + tls,
                            stderr=log)


def start_switches(p4sec_bin, net, pa, pb, log, pki_dir=None):
    """S1 and S2 on the `net` fixture's interfaces, once both listen: {"S1": process, "S2": process}."""
    procs = {"S1": switch(p4sec_bin, pa, net["a1"], net["wa"], log, pki_dir),
             "S2": switch(p4sec_bin, pb, net["b1"], net["wb"], log, pki_dir)}
    listening(pa)
    listening(pb)
    return procs


def listening(port, timeout=10):
    """Wait until something accepts connections on 127.0.0.1:port; the time it did."""
    end = time.time() + timeout
    while time.time() < end:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return time.time()
        time.sleep(0.01)
    raise AssertionError(f"nothing listens on {port}")


def start_controller(cfg, log_path, command=None, env=None):
    """`p4sec-controller run cfg` (default: this Python's `-m p4sec.ipsec.cli`), its stderr appended to
    `log_path`, once it says it is ready (its log's end is the assertion's message otherwise)."""
    cmd = (command or [sys.executable, "-m", "p4sec.ipsec.cli"]) + ["run", str(cfg)]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=open(log_path, "a"), text=True, env=env)
    line = p.stdout.readline()
    assert "ready" in line, open(log_path).read()[-3000:]
    return p


def stop(procs):
    """Terminate processes (resumed first if paused), killing those that do not stop within 10 s."""
    for p in procs:
        if p is None or p.poll() is not None:
            continue
        try:
            p.send_signal(signal.SIGCONT)      # a paused process handles SIGTERM only once resumed
            p.terminate()
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=10)
        except ProcessLookupError:
            pass


@contextlib.contextmanager
def gateway_pair(p4sec_bin, net, tmp_path, wan=V4_WAN, lans=("10.1.0.0/16", "10.2.0.0/16"), plaintext=False, **controller):
    """Gateways A (LAN port 1 on the `net` fixture's a1, WAN port 2 on wa) and B (b1, wb), two `p4sec switch`
    processes running programs/ipsec_gateway.p4 under an in-process IpsecController(**controller), programmed over
    mutual TLS with certificates in tmp_path/ca (`pki`; `plaintext`: without TLS): yields (controller, switch A,
    switch B); everything is closed and stopped at the end, also when the setup fails."""
    out = compile_gateway(p4sec_bin, tmp_path / "gw")
    d = None if plaintext else pki(tmp_path / "ca")
    tls = None if plaintext else controller_tls(d)
    pa, pb = free_port(), free_port()
    procs = [switch(p4sec_bin, pa, net["a1"], net["wa"], pki_dir=d), switch(p4sec_bin, pb, net["b1"], net["wb"], pki_dir=d)]
    switches, ctl = [], None
    try:
        switches = [runtime.Switch(f"127.0.0.1:{pa}", tls=tls), runtime.Switch(f"127.0.0.1:{pb}", tls=tls)]
        ctl = IpsecController(**controller)
        gw_a, gw_b, wan_a, wan_b = wan
        ctl.add_gateway(Gateway("A", switches[0], gw_a, lans[0], 1, "02:00:00:00:0a:01", 2, "02:00:00:00:0b:02", wan_a), out)
        ctl.add_gateway(Gateway("B", switches[1], gw_b, lans[1], 1, "02:00:00:00:0b:01", 2, "02:00:00:00:0a:02", wan_b), out)
        yield ctl, switches[0], switches[1]
    finally:
        if ctl is not None:
            ctl.close()
        for s in switches:
            s.close()
        stop(procs)
