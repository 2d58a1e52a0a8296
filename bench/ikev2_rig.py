"""What the IKEv2 interop tests and benchmark (tests/ipsec/test_ikev2_strongswan.py, python -m bench.ikev2) share: a p4sec gateway (programs/ipsec_gateway.p4 under an in-process
IpsecController with its IKE endpoint) whose charon runs in a namespace on a switch port, and stock strongSwan
(charon with kernel-libipsec: userspace ESP over a TUN device, always in UDP 4500) as the remote site in another
namespace. Each charon runs in its own mount namespace with a private /run, its strongswan.conf given by
STRONGSWAN_CONF and its swanctl directory by SWANCTL_DIR; swanctl talks to it over a per-test vici socket.

Addresses (IPv4; the IPv6 variant in V6): the p4sec site 10.1.0.0/16 (host 10.1.0.1 in `lan`, switch port 1), the
gateway's WAN address 192.0.2.1 (its charon in `ike`, switch port 3), the strongSwan site 10.2.0.0/16 (10.2.0.1 on
the loopback of `remote`, whose WAN address 198.51.100.1 is on switch port 2)."""
import contextlib
import os
import pathlib
import shutil
import socket
import subprocess
import time
import uuid

from p4sec.infra import runtime
from p4sec.infra.netns import free_port, sh
from p4sec.ipsec.controller import Gateway, IpsecController
from p4sec.ipsec.ike_endpoint import IkeEndpoint

ROOT = pathlib.Path(__file__).resolve().parents[1]

CHARON = "/usr/lib/ipsec/charon"
SWANCTL = shutil.which("swanctl") or "/usr/sbin/swanctl"
PLUGIN = "/usr/lib/ipsec/plugins/libstrongswan-p4sec.so"
SWITCH_MAC = "02:00:00:00:00:01"
LAN_MAC, WAN_MAC, IKE_MAC = "02:00:00:00:0a:01", "02:00:00:00:0b:02", "02:00:00:00:0c:01"

V4 = {"lan": "10.1.0.0/16", "host": "10.1.0.1", "rlan": "10.2.0.0/16", "rhost": "10.2.0.1",
      "gw": "192.0.2.1", "peer": "198.51.100.1", "wan": "198.51.100.0/24", "plen": 24, "gwhop": "169.254.0.1"}
V6 = {"lan": "2001:db8:1::/64", "host": "2001:db8:1::1", "rlan": "2001:db8:2::/64", "rhost": "2001:db8:2::1",
      "gw": "2001:db8:a::1", "peer": "2001:db8:b::1", "wan": "2001:db8:b::/64", "plen": 64, "gwhop": "fe80::1"}
V4_GW_NAT = dict(V4, gw="10.98.0.2")
V4_IN_V6 = dict(V6, **{k: V4[k] for k in ("lan", "host", "rlan", "rhost")})
V6_IN_V4 = dict(V4, **{k: V6[k] for k in ("lan", "host", "rlan", "rhost")})

# the crypto and network plugins both charons load (kernel-ipsec first: p4sec or kernel-libipsec)
COMMON = "random nonce openssl pem pkcs1 pkcs8 x509 revocation constraints pubkey aes sha1 sha2 hmac gcm kdf"


def listening(port, timeout=10):
    """Wait until something accepts connections on 127.0.0.1:port."""
    end = time.time() + timeout
    while time.time() < end:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.01)
    raise AssertionError(f"nothing listens on {port}")


def stop(procs):
    """Terminate processes, killing those that do not stop within 10 s."""
    for p in procs:
        if p is None or p.poll() is not None:
            continue
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=10)


def missing():
    """Why the IKEv2 tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root for network namespaces"
    for f in (CHARON, SWANCTL, PLUGIN, "/usr/lib/ipsec/plugins/libstrongswan-kernel-libipsec.so"):
        if not os.path.exists(f):
            return f"{f} is missing: run scripts/setup (it installs strongSwan and builds the p4sec plugin)"
    return None


class Charon:
    """One charon in namespace `ns` with its own /run, configuration and vici socket under `workdir`."""

    def __init__(self, ns, workdir, kernel_ipsec, settings="", install_routes=True, top=""):
        self.ns, self.dir = ns, pathlib.Path(workdir)
        (self.dir / "swanctl").mkdir(parents=True, exist_ok=True)
        for sub in ("x509", "x509ca", "x509crl", "private", "rsa", "ecdsa", "pkcs8"):
            (self.dir / "swanctl" / sub).mkdir(exist_ok=True)
        self.vici = f"unix://{self.dir}/charon.vici"
        self.log = self.dir / "charon.log"
        conf = f"""charon {{
  load = {COMMON} {kernel_ipsec} kernel-netlink socket-default vici
  install_routes = {'yes' if install_routes else 'no'}
  {top}
  retransmit_timeout = 1.0
  retransmit_base = 1.4
  retransmit_tries = 3
  plugins {{
    vici {{
      socket = {self.vici}
    }}
    {settings}
  }}
  filelog {{
    file {{
      path = {self.log}
      default = 1
      ike = 2
      knl = 2
      cfg = 2
      time_format = %H:%M:%S
      flush_line = yes
    }}
  }}
}}
"""
        (self.dir / "strongswan.conf").write_text(conf)
        self.proc = None

    def start(self):
        env = dict(os.environ, STRONGSWAN_CONF=str(self.dir / "strongswan.conf"))
        self.proc = subprocess.Popen(["ip", "netns", "exec", self.ns, "unshare", "-m", "sh", "-c",
                                      f"mount -t tmpfs tmpfs /run && mkdir -p /run/strongswan && exec {CHARON}"],
                                     env=env, stdout=subprocess.DEVNULL, stderr=open(self.dir / "charon.err", "w"))
        end = time.time() + 15
        while time.time() < end:
            if self.proc.poll() is not None:
                raise AssertionError(f"charon in {self.ns} ended: {self.logtext()[-3000:]}")
            if os.path.exists(self.vici[len("unix://"):]) and self.swanctl("--stats", check=False).returncode == 0:
                return self
            time.sleep(0.1)
        raise AssertionError(f"charon in {self.ns} did not come up: {self.logtext()[-3000:]}")

    def swanctl(self, *args, check=True, timeout=60):
        env = dict(os.environ, SWANCTL_DIR=str(self.dir / "swanctl"))
        r = subprocess.run([SWANCTL, *args, "--uri", self.vici], capture_output=True, text=True, env=env, timeout=timeout)
        if check and r.returncode:
            raise AssertionError(f"swanctl {' '.join(args)}: {r.stdout}{r.stderr}\n--- charon log:\n{self.logtext()[-4000:]}")
        return r

    def load(self, swanctl_conf):
        (self.dir / "swanctl" / "swanctl.conf").write_text(swanctl_conf)
        return self.swanctl("--load-all", "--noprompt")

    def logtext(self):
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self):
        stop([self.proc])


def conn(local_addr, remote_addr, local_id, remote_id, local_ts, remote_ts, esp="aes128gcm16", auth="psk",
         extra="", child_extra="", children=None, cert=None):
    """A swanctl.conf connection `site` with one CHILD_SA `net` (or `children`: {name: (local_ts, remote_ts)})."""
    local_auth = f"auth = pubkey\n      certs = {cert}" if auth == "pubkey" else "auth = psk"
    kids = children or {"net": (local_ts, remote_ts)}
    body = "".join(f"""      {name} {{
        local_ts = {lt}
        remote_ts = {rt}
        esp_proposals = {esp}
        {child_extra}
      }}
""" for name, (lt, rt) in kids.items())
    return f"""connections {{
  site {{
    version = 2
    local_addrs = {local_addr}
    remote_addrs = {remote_addr}
    {extra}
    local {{
      {local_auth}
      id = {local_id}
    }}
    remote {{
      auth = {'pubkey' if auth == 'pubkey' else 'psk'}
      id = {remote_id}
    }}
    children {{
{body}    }}
  }}
}}
"""


def psk(a, b, secret):
    return f"""secrets {{
  ike-site {{
    id-a = {a}
    id-b = {b}
    secret = "{secret}"
  }}
}}
"""


@contextlib.contextmanager
def sites(p4sec_bin, tmp_path, addrs=V4, nat=False, controller=True):
    """The two sites and the p4sec gateway with its controller and IKE endpoint; yields a dict with the
    namespaces, the controller `ctl`, the endpoint `ike`, the switch and the two charons (not started:
    `p4sec_charon` and `remote_charon`). With `nat` (IPv4), the strongSwan site sits behind a masquerading
    namespace `nat` that owns the public address (198.51.100.1) and maps UDP to source ports 31000-31999; the
    strongSwan host's own WAN address is then 10.99.0.2 (`s["remote_addr"]`). With nat="gateway", the p4sec
    gateway is the one behind the NAT (addrs["gw"] private, e.g. V4_GW_NAT; `s["gw_public"]` the NAT's public
    192.0.2.1, UDP mapped to ports 32000-32999). Without `controller`, no
    controller is made: the test runs one (`s["grpc"]` is the switch's P4Runtime address)."""
    t = uuid.uuid4().hex[:6]
    n = {"lan": f"il{t}", "remote": f"ir{t}", "ike": f"ii{t}", "h1": f"ih{t}", "a1": f"ia{t}", "wb": f"iw{t}",
         "wa": f"ix{t}", "i0": f"ic{t}", "ik": f"ik{t}"}
    v6 = ":" in addrs["gw"]
    procs, sw, ctl, ike, charons = [], None, None, None, []
    try:
        n["nat"], n["no"], n["ni"] = f"in{t}", f"io{t}", f"iq{t}"
        for ns in ("lan", "remote", "ike") + (("nat",) if nat else ()):
            sh("ip", "netns", "add", n[ns])
            sh("ip", "netns", "exec", n[ns], "ip", "link", "set", "lo", "up")
        for inner, outer, ns, mac in (("h1", "a1", "lan", LAN_MAC), ("wb", "wa", "nat" if nat else "remote", WAN_MAC), ("i0", "ik", "ike", IKE_MAC)):
            sh("ip", "link", "add", n[inner], "type", "veth", "peer", "name", n[outer])
            sh("ip", "link", "set", n[inner], "netns", n[ns])
            ex = ["ip", "netns", "exec", n[ns]]
            sh(*ex, "ip", "link", "set", n[inner], "address", mac)
            if not v6:
                subprocess.run(ex + ["sysctl", "-qw", f"net.ipv6.conf.{n[inner]}.disable_ipv6=1"], capture_output=True)
            else:
                subprocess.run(ex + ["sysctl", "-qw", f"net.ipv6.conf.{n[inner]}.accept_dad=0"], capture_output=True)
            sh(*ex, "ip", "link", "set", n[inner], "up")
            sh("ip", "link", "set", n[outer], "up")
            subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{n[outer]}.disable_ipv6=1"], capture_output=True)
        fam = ["-6"] if v6 else []
        hop = addrs["gwhop"]
        in6 = ":" in addrs["host"]
        ifam, ihop = (["-6"], "fe80::1") if in6 else ([], "169.254.0.1")
        lan = ["ip", "netns", "exec", n["lan"], "ip"] + ifam
        if in6 and not v6:
            subprocess.run(["ip", "netns", "exec", n["lan"], "sysctl", "-qw", f"net.ipv6.conf.{n['h1']}.disable_ipv6=0"], capture_output=True)
        sh(*lan, "addr", "add", f"{addrs['host']}/{addrs['lan'].split('/')[1]}", "dev", n["h1"], *(["nodad"] if in6 else []))
        sh(*lan, "neigh", "replace", ihop, "lladdr", SWITCH_MAC, "dev", n["h1"], "nud", "permanent")
        sh(*lan, "route", "add", addrs["rlan"], "via", ihop, "dev", n["h1"], "onlink")
        sh(*lan, "link", "set", n["h1"], "mtu", "1400")     # room for ESP (in UDP) on the 1500-byte WAN link
        rem = ["ip", "netns", "exec", n["remote"], "ip"] + fam
        # the strongSwan site: one address of it on the loopback (this kernel has no dummy interfaces)
        sh("ip", "netns", "exec", n["remote"], "ip", *ifam, "addr", "add", f"{addrs['rhost']}/{128 if in6 else 32}", "dev", "lo")
        edge = ["ip", "netns", "exec", n["nat"], "ip"] if nat else rem
        remote_addr, gw_public = addrs["peer"], addrs["gw"]
        if nat == "gateway":
            # the gateway's WAN address is private (addrs["gw"], in 10.98.0.0/24); the NAT's public side is
            # 192.0.2.1 on a link to the strongSwan host (198.51.100.1)
            sh(*edge, "addr", "add", "10.98.0.1/24", "dev", n["wb"])
            sh(*edge, "neigh", "replace", addrs["gw"], "lladdr", SWITCH_MAC, "dev", n["wb"], "nud", "permanent")
            sh("ip", "link", "add", n["no"], "type", "veth", "peer", "name", n["ni"])
            sh("ip", "link", "set", n["no"], "netns", n["nat"])
            sh("ip", "link", "set", n["ni"], "netns", n["remote"])
            ex = ["ip", "netns", "exec", n["nat"]]
            sh(*ex, "ip", "addr", "add", "192.0.2.1/24", "dev", n["no"])
            sh(*ex, "ip", "link", "set", n["no"], "up")
            sh(*ex, "ip", "route", "add", "198.51.100.0/24", "dev", n["no"])
            sh(*ex, "sysctl", "-qw", "net.ipv4.ip_forward=1")
            sh(*ex, "iptables", "-t", "nat", "-A", "POSTROUTING", "-o", n["no"], "-p", "udp", "-j", "MASQUERADE", "--to-ports", "32000-32999")
            sh(*ex, "iptables", "-t", "nat", "-A", "POSTROUTING", "-o", n["no"], "-j", "MASQUERADE")
            sh(*rem, "addr", "add", f"{addrs['peer']}/24", "dev", n["ni"])
            sh(*rem, "link", "set", n["ni"], "up")
            sh(*rem, "route", "add", "192.0.2.0/24", "dev", n["ni"])
            gw_public = "192.0.2.1"
        else:
            sh(*edge, "addr", "add", f"{addrs['peer']}/{addrs['plen']}", "dev", n["wb"], *(["nodad"] if v6 else []))
            sh(*edge, "neigh", "replace", hop, "lladdr", SWITCH_MAC, "dev", n["wb"], "nud", "permanent")
            sh(*edge, "route", "add", addrs["gw"], "via", hop, "dev", n["wb"], "onlink")
        if nat and nat != "gateway":
            sh("ip", "link", "add", n["no"], "type", "veth", "peer", "name", n["ni"])
            sh("ip", "link", "set", n["no"], "netns", n["nat"])
            sh("ip", "link", "set", n["ni"], "netns", n["remote"])
            ex = ["ip", "netns", "exec", n["nat"]]
            sh(*ex, "ip", "addr", "add", "10.99.0.1/24", "dev", n["no"])
            sh(*ex, "ip", "link", "set", n["no"], "up")
            sh(*ex, "sysctl", "-qw", "net.ipv4.ip_forward=1")
            sh(*ex, "iptables", "-t", "nat", "-A", "POSTROUTING", "-o", n["wb"], "-p", "udp", "-j", "MASQUERADE", "--to-ports", "31000-31999")
            sh(*ex, "iptables", "-t", "nat", "-A", "POSTROUTING", "-o", n["wb"], "-j", "MASQUERADE")
            sh(*rem, "addr", "add", "10.99.0.2/24", "dev", n["ni"])
            sh(*rem, "link", "set", n["ni"], "up")
            sh(*rem, "route", "add", "default", "via", "10.99.0.1")
            remote_addr = "10.99.0.2"
        ik = ["ip", "netns", "exec", n["ike"], "ip"] + fam
        sh(*ik, "addr", "add", f"{addrs['gw']}/{128 if v6 else 32}", "dev", n["i0"], *(["nodad"] if v6 else []))
        sh(*ik, "neigh", "replace", hop, "lladdr", SWITCH_MAC, "dev", n["i0"], "nud", "permanent")
        sh(*ik, "route", "add", "default", "via", hop, "dev", n["i0"], "onlink")

        out = tmp_path / "gw"
        subprocess.run([str(p4sec_bin), "compile", str(ROOT / "programs" / "ipsec_gateway.p4"), "-o", str(out)], check=True)
        port = free_port()
        switch_cmd = [str(p4sec_bin), "switch", "--grpc", f"127.0.0.1:{port}", "--port", f"1={n['a1']}",
                      "--port", f"2={n['wa']}", "--port", f"3={n['ik']}"]
        procs.append(subprocess.Popen(switch_cmd, stderr=open(tmp_path / "switch.log", "a")))
        listening(port)

        def restart_switch():
            """The switch process killed and started again (all its state lost)."""
            procs[0].kill()
            procs[0].wait()
            procs[0] = subprocess.Popen(switch_cmd, stderr=open(tmp_path / "switch.log", "a"))
            listening(port)
        if controller:
            sw = runtime.Switch(f"127.0.0.1:{port}")
            ctl = IpsecController(db=str(tmp_path / "ctl.db"))
            ctl.add_gateway(Gateway("A", sw, addrs["gw"], addrs["lan"], 1, LAN_MAC, 2, WAN_MAC, addrs["wan"]), out)
            ike = IkeEndpoint(ctl, str(tmp_path / "ike.sock"))
            ike.attach("A", 3, IKE_MAC)
        mine = Charon(n["ike"], tmp_path / "charon-p4sec", "p4sec", top="keep_alive = 1s" if nat == "gateway" else "",
                      settings=f"p4sec {{\n      socket = {tmp_path / 'ike.sock'}\n      gateway = A\n    }}", install_routes=False)
        theirs = Charon(n["remote"], tmp_path / "charon-remote", "kernel-libipsec")
        charons = [mine, theirs]
        yield {"ns": n, "ctl": ctl, "ike": ike, "switch": sw, "p4sec_charon": mine, "remote_charon": theirs,
               "addrs": addrs, "program": out, "tmp": tmp_path, "restart_switch": restart_switch,
               "remote_addr": remote_addr, "gw_public": gw_public,
               "grpc": f"127.0.0.1:{port}"}
    finally:
        for c in charons:
            c.stop()
        if ike is not None:
            ike.close()
        if ctl is not None:
            ctl.close()
        if sw is not None:
            sw.close()
        stop(procs)
        for k in ("a1", "wa", "ik"):
            subprocess.run(["ip", "link", "del", n[k]], capture_output=True)
        for ns in ("lan", "remote", "ike", "nat"):
            subprocess.run(["ip", "netns", "del", n[ns]], capture_output=True)


def ping(ns, dst, src=None, count=3, timeout=20):
    """ping from namespace `ns` (from address `src`); the CompletedProcess (returncode 0: all answered)."""
    cmd = ["ip", "netns", "exec", ns, "ping", "-c", str(count), "-i", "0.2", "-W", "2"] + (["-I", src] if src else []) + [dst]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


@contextlib.contextmanager
def p4sec_pair(p4sec_bin, tmp_path, ikeless=False):
    """Two p4sec gateways, each with its own controller, IKE endpoint and charon (plugin p4sec): A (site
    10.1.0.0/16, host 10.1.0.1, WAN 192.0.2.1) and B (site 10.2.0.0/16, host 10.2.0.1, WAN 198.51.100.1), their
    WAN ports linked. Yields {"ns": ..., "A": {"ctl", "ike", "charon"}, "B": {...}}. With `ikeless`, one controller
    drives both gateways (no IKE: RFC 9061's IKE-less case), in "A" and "B" alike, and no charon runs."""
    t = uuid.uuid4().hex[:6]
    side = {"A": {"gw": "192.0.2.1", "lan": "10.1.0.0/16", "host": "10.1.0.1", "wan": "198.51.100.0/24"},
            "B": {"gw": "198.51.100.1", "lan": "10.2.0.0/16", "host": "10.2.0.1", "wan": "192.0.2.0/24"}}
    n = {"wa": f"pw{t}", "wb": f"px{t}"}
    for g in ("A", "B"):
        k = g.lower()
        n.update({f"lan{g}": f"pl{k}{t}", f"ike{g}": f"pi{k}{t}", f"h{g}": f"ph{k}{t}", f"p{g}": f"pp{k}{t}",
                  f"c{g}": f"pc{k}{t}", f"k{g}": f"pk{k}{t}"})
    procs, made, charons, out = [], {}, [], tmp_path / "gw"
    try:
        sh("ip", "link", "add", n["wa"], "type", "veth", "peer", "name", n["wb"])
        for g in ("A", "B"):
            for ns in (f"lan{g}", f"ike{g}"):
                sh("ip", "netns", "add", n[ns])
            for inner, outer, ns, mac in ((f"h{g}", f"p{g}", f"lan{g}", LAN_MAC), (f"c{g}", f"k{g}", f"ike{g}", IKE_MAC)):
                sh("ip", "link", "add", n[inner], "type", "veth", "peer", "name", n[outer])
                sh("ip", "link", "set", n[inner], "netns", n[ns])
                ex = ["ip", "netns", "exec", n[ns]]
                sh(*ex, "ip", "link", "set", n[inner], "address", mac)
                subprocess.run(ex + ["sysctl", "-qw", f"net.ipv6.conf.{n[inner]}.disable_ipv6=1"], capture_output=True)
                sh(*ex, "ip", "link", "set", n[inner], "up")
                sh(*ex, "ip", "neigh", "replace", "169.254.0.1", "lladdr", SWITCH_MAC, "dev", n[inner], "nud", "permanent")
                sh("ip", "link", "set", n[outer], "up")
                subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{n[outer]}.disable_ipv6=1"], capture_output=True)
            lan = ["ip", "netns", "exec", n[f"lan{g}"], "ip"]
            other = side["B" if g == "A" else "A"]
            sh(*lan, "addr", "add", f"{side[g]['host']}/16", "dev", n[f"h{g}"])
            sh(*lan, "route", "add", other["lan"], "via", "169.254.0.1", "dev", n[f"h{g}"], "onlink")
            sh(*lan, "link", "set", n[f"h{g}"], "mtu", "1400")
            ik = ["ip", "netns", "exec", n[f"ike{g}"], "ip"]
            sh(*ik, "addr", "add", f"{side[g]['gw']}/32", "dev", n[f"c{g}"])
            sh(*ik, "route", "add", "default", "via", "169.254.0.1", "dev", n[f"c{g}"], "onlink")
        for k in ("wa", "wb"):
            sh("ip", "link", "set", n[k], "address", WAN_MAC)
            sh("ip", "link", "set", n[k], "up")
            subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{n[k]}.disable_ipv6=1"], capture_output=True)
        subprocess.run([str(p4sec_bin), "compile", str(ROOT / "programs" / "ipsec_gateway.p4"), "-o", str(out)], check=True,
                       capture_output=True)
        for g, wan in (("A", n["wa"]), ("B", n["wb"])):
            port = free_port()
            procs.append(subprocess.Popen([str(p4sec_bin), "switch", "--grpc", f"127.0.0.1:{port}", "--port", f"1={n[f'p{g}']}",
                                           "--port", f"2={wan}", "--port", f"3={n[f'k{g}']}"],
                                          stderr=open(tmp_path / f"switch{g}.log", "w")))
            listening(port)
            sw = runtime.Switch(f"127.0.0.1:{port}")
            ctl = made["A"]["ctl"] if ikeless and g == "B" else IpsecController(db=str(tmp_path / f"ctl{g}.db"))
            made[g] = {"switch": sw, "ctl": ctl}
            ctl.add_gateway(Gateway(g, sw, side[g]["gw"], side[g]["lan"], 1, LAN_MAC, 2, WAN_MAC, side[g]["wan"]), out)
            if ikeless:
                continue
            ep = IkeEndpoint(ctl, str(tmp_path / f"ike{g}.sock"))
            made[g]["ike"] = ep
            ep.attach(g, 3, IKE_MAC)
            c = Charon(n[f"ike{g}"], tmp_path / f"charon{g}", "p4sec", install_routes=False,
                       settings=f"p4sec {{\n      socket = {tmp_path / f'ike{g}.sock'}\n      gateway = {g}\n    }}")
            charons.append(c)
            made[g]["charon"] = c
        yield {"ns": n, "side": side, **made}
    finally:
        for c in charons:
            c.stop()
        for g, m in made.items():
            if "ike" in m:
                m["ike"].close()
            if not (ikeless and g == "B"):
                m["ctl"].close()
            m["switch"].close()
        stop(procs)
        for k in ("wa", "pA", "pB", "kA", "kB"):
            subprocess.run(["ip", "link", "del", n[k]], capture_output=True)
        for g in ("A", "B"):
            for ns in (f"lan{g}", f"ike{g}"):
                subprocess.run(["ip", "netns", "del", n[ns]], capture_output=True)


@contextlib.contextmanager
def libipsec_pair(tmp_path):
    """strongSwan to strongSwan, both with kernel-libipsec (userspace ESP, in UDP 4500), in two namespaces joined
    by a veth link (WAN 10.200.0.1 and .2), their sites' hosts 10.1.0.1 and 10.2.0.1 on their loopbacks. Yields
    {"ns": {"A", "B"}, "A": Charon, "B": Charon, "addr": {"A", "B"}} (charons not started)."""
    t = uuid.uuid4().hex[:6]
    ns = {"A": f"sa{t}", "B": f"sb{t}"}
    link = {"A": f"sla{t}", "B": f"slb{t}"}
    charons = []
    try:
        for g in ns:
            sh("ip", "netns", "add", ns[g])
        sh("ip", "link", "add", link["A"], "type", "veth", "peer", "name", link["B"])
        for i, g in enumerate(("A", "B")):
            sh("ip", "link", "set", link[g], "netns", ns[g])
            ex = ["ip", "netns", "exec", ns[g], "ip"]
            sh(*ex, "link", "set", "lo", "up")
            sh(*ex, "addr", "add", f"10.200.0.{i + 1}/24", "dev", link[g])
            sh(*ex, "link", "set", link[g], "up")
            sh(*ex, "addr", "add", f"10.{i + 1}.0.1/32", "dev", "lo")
        charons = [Charon(ns[g], tmp_path / f"charon-ss{g}", "kernel-libipsec") for g in ("A", "B")]
        yield {"ns": ns, "A": charons[0], "B": charons[1], "addr": {"A": "10.200.0.1", "B": "10.200.0.2"}}
    finally:
        for c in charons:
            c.stop()
        for g in ns:
            subprocess.run(["ip", "netns", "del", ns[g]], capture_output=True)
