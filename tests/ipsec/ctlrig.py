"""What the controller tests share to start the two-gateway VPN: the gateway program compiled, the two
`p4sec switch` processes on the `net` fixture's interfaces, either driven by an in-process controller
(`gateway_pair`) or by a controller process (a configuration with S1 and S2, their sites and WAN, the process
started and waited for), and everything stopped again."""
import contextlib
import signal
import socket
import subprocess
import sys
import time

from conftest import ROOT
from p4sec.infra import runtime
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


def write_config(path, head, pa, pb, rest, program, tunnel, extra=""):
    """A controller configuration at `path`: `head` (the store: `db: ...` or `store: ... ha: ...`), the program, the
    REST port, `extra` settings, the two gateways (P4Runtime on 127.0.0.1:pa and :pb) and one profile, the
    mapping `tunnel` (its YAML flow text, e.g. "name: S1-S2, a: S1, b: S2")."""
    path.write_text(f"{head}\nprogram: {program}\nrest: 127.0.0.1:{rest}\n{extra}\n" + GATEWAYS.format(pa=pa, pb=pb)
                    + f"tunnels:\n  - {{{tunnel}}}\n")
    return path


def switch(p4sec_bin, port, lan, wan, log=None):
    """A `p4sec switch` with P4Runtime on 127.0.0.1:port, port 1 `lan`, port 2 `wan` (its stderr to `log`; None:
    this process's)."""
    return subprocess.Popen([str(p4sec_bin), "switch", "--grpc", f"127.0.0.1:{port}", "--port", f"1={lan}", "--port", f"2={wan}"],
                            stderr=log)


def start_switches(p4sec_bin, net, pa, pb, log):
    """S1 and S2 on the `net` fixture's interfaces, once both listen: {"S1": process, "S2": process}."""
    procs = {"S1": switch(p4sec_bin, pa, net["a1"], net["wa"], log), "S2": switch(p4sec_bin, pb, net["b1"], net["wb"], log)}
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
def gateway_pair(p4sec_bin, net, tmp_path, wan=V4_WAN, lans=("10.1.0.0/16", "10.2.0.0/16"), **controller):
    """Gateways A (LAN port 1 on the `net` fixture's a1, WAN port 2 on wa) and B (b1, wb), two `p4sec switch`
    processes running programs/ipsec_gateway.p4 under an in-process IpsecController(**controller): yields
    (controller, switch A, switch B); everything is closed and stopped at the end, also when the setup fails."""
    out = compile_gateway(p4sec_bin, tmp_path / "gw")
    pa, pb = free_port(), free_port()
    procs = [switch(p4sec_bin, pa, net["a1"], net["wa"]), switch(p4sec_bin, pb, net["b1"], net["wb"])]
    switches, ctl = [], None
    try:
        switches = [runtime.Switch(f"127.0.0.1:{pa}"), runtime.Switch(f"127.0.0.1:{pb}")]
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
