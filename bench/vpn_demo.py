"""The IPsec VPN end to end on one machine: two hosts in network namespaces, two p4sec switches running
programs/ipsec_gateway.p4, p4sec-controller setting up a site-to-site tunnel over P4Runtime, traffic through it,
the ESP on the WAN link captured and shown decrypted with scapy (an independent ESP implementation), a renewal,
and TCP goodput with iperf3 when it is installed.

    python -m bench.vpn_demo [--suite aes-gcm-128] [--seconds 3] [--p4sec PATH] [--summary FILE]   (needs root)

    H1 10.1.0.1 --- [S1 192.0.2.1] ===== WAN (ESP) ===== [S2 198.51.100.1] --- H2 10.2.0.2
"""
import argparse
import json
import os
import pathlib
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid

from p4sec.infra.netns import free_port, ns, sh

ROOT = pathlib.Path(__file__).resolve().parents[1]
GW_MAC = "02:00:00:00:00:01"  # the gateways' own MAC (the src MAC they write)
SCAPY_ALGOS = {"AesGcm128": ("AES-GCM", None), "AesGcm256": ("AES-GCM", None), "ChaCha20Poly1305": ("CHACHA20-POLY1305", None),
               "AesCtr128": ("AES-CTR", None), "AesCbc128": ("AES-CBC", None), "Null": ("NULL", None)}
SCAPY_AUTH = {"None": None, "HmacSha256_128": "SHA2-256-128", "HmacMd5_96": "HMAC-MD5-96", "HmacSha1_96": "HMAC-SHA1-96"}





def step(msg):
    print(f"\n== {msg}", flush=True)


class Net:
    """ns1 (H1) -- a1 | S1 | wa ==== wb | S2 | b1 -- ns2 (H2); the switches' ports live in the root namespace."""

    def __init__(self, offloads=False):
        """offloads: leave the hosts' TSO/GSO/GRO on (the switch segments the super-frames it receives)."""
        t = uuid.uuid4().hex[:5]
        self.ns1, self.ns2 = f"vpnH1{t}", f"vpnH2{t}"
        self.h1, self.a1, self.h2, self.b1, self.wa, self.wb = (f"{x}{t}" for x in ("h1", "a1", "h2", "b1", "wa", "wb"))
        for n in (self.ns1, self.ns2):
            sh("ip", "netns", "add", n)
            ns(n, "ip", "link", "set", "lo", "up")
        for host, sw, n, addr, remote in ((self.h1, self.a1, self.ns1, "10.1.0.1/16", "10.2.0.0/16"), (self.h2, self.b1, self.ns2, "10.2.0.2/16", "10.1.0.0/16")):
            sh("ip", "link", "add", host, "type", "veth", "peer", "name", sw)
            sh("ip", "link", "set", host, "netns", n)
            ns(n, "ip", "link", "set", host, "mtu", "1400", "up")
            ns(n, "ip", "addr", "add", addr, "dev", host)
            gw = addr.split(".")[0] + "." + addr.split(".")[1] + ".255.254"
            ns(n, "ip", "neigh", "replace", gw, "lladdr", GW_MAC, "dev", host)
            ns(n, "ip", "route", "add", remote, "via", gw)
            ns(n, "sysctl", "-qw", f"net.ipv6.conf.{host}.disable_ipv6=1", check=False)
            # the switch reads and writes whole frames: no TCP segmentation offload from the hosts
            if shutil.which("ethtool") and not offloads:
                ns(n, "ethtool", "-K", host, "tso", "off", "gso", "off", "gro", "off", check=False)
            sh("ip", "link", "set", sw, "up")
        sh("ip", "link", "add", self.wa, "type", "veth", "peer", "name", self.wb)
        for i in (self.wa, self.wb):
            sh("ip", "link", "set", i, "up")
        for i in (self.a1, self.b1, self.wa, self.wb):
            sh("sysctl", "-qw", f"net.ipv6.conf.{i}.disable_ipv6=1", check=False)
        self.mac_h1 = ns(self.ns1, "cat", f"/sys/class/net/{self.h1}/address").stdout.strip()
        self.mac_h2 = ns(self.ns2, "cat", f"/sys/class/net/{self.h2}/address").stdout.strip()

    def close(self):
        for i in (self.a1, self.b1, self.wa):
            sh("ip", "link", "del", i, check=False)
        for n in (self.ns1, self.ns2):
            sh("ip", "netns", "del", n, check=False)


CAPTURE = r"""
import sys, time
from scapy.all import AsyncSniffer
s = AsyncSniffer(iface=sys.argv[1], filter="ip proto 50", count=int(sys.argv[2]), timeout=float(sys.argv[3]))
s.start(); time.sleep(0.5); print("ready", flush=True); s.join()
for p in s.results or []:
    print(bytes(p).hex(), flush=True)
"""

UDP_SEND = r"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(int(sys.argv[2])):
    s.sendto(b"hello from H1 through the p4sec IPsec tunnel #%d" % i, (sys.argv[1], 5555))
"""

UDP_RECV = r"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", 5555)); s.settimeout(5)
print("ready", flush=True)
for _ in range(int(sys.argv[1])):
    try:
        print(s.recv(2048).decode(), flush=True)
    except socket.timeout:
        break
"""


def show_decrypted(frames, db, suite_cipher):
    """Print each captured ESP frame and its decryption; the number decrypted."""
    from scapy.layers.inet import IP
    from scapy.layers.ipsec import ESP, SecurityAssociation
    from scapy.layers.l2 import Ether
    con = sqlite3.connect(db)
    n = 0
    for raw in frames:
        outer = Ether(bytes.fromhex(raw))[IP]
        esp = outer[ESP]
        row = con.execute("select config from sa where spi = ?", (esp.spi,)).fetchone()
        if not row:
            print(f"   ESP spi={esp.spi:#010x}: not an SA of this controller")
            continue
        cfg = json.loads(row[0])
        crypt, _ = SCAPY_ALGOS[cfg["cipher"]]
        sa = SecurityAssociation(ESP, spi=esp.spi, crypt_algo=crypt, crypt_key=bytes(cfg["enc_key"]) or None,
                                 auth_algo=SCAPY_AUTH[cfg["integ"]], auth_key=bytes(cfg["auth_key"]) or None,
                                 tunnel_header=IP(src=outer.src, dst=outer.dst), esn_en=cfg["esn"], esn=0)
        inner = sa.decrypt(outer)
        body = bytes(esp.data)
        print(f"   on the wire: {outer.src} > {outer.dst} ESP spi={esp.spi:#010x} seq={esp.seq} {len(body)} bytes "
              f"{body[:24].hex()}...")
        print(f"   decrypted:   {inner.summary()}  payload {bytes(inner.payload.payload)[:60]!r}")
        n += b"through the p4sec IPsec tunnel" in bytes(inner.payload.payload)
    con.close()
    return n


def main(argv=None):
    from p4sec.ipsec.controller import SUITES
    ap = argparse.ArgumentParser(description="The IPsec VPN end to end on one machine: two hosts in network namespaces, two p4sec "
                                 "switches running programs/ipsec_gateway.p4, p4sec-controller setting up a site-to-site "
                                 "tunnel over P4Runtime, traffic through it, the ESP on the WAN link shown decrypted with "
                                 "scapy, a renewal, and TCP goodput with iperf3 when it is installed. Needs root.")
    ap.add_argument("--suite", default="aes-gcm-128", choices=sorted(SUITES), metavar="SUITE",
                    help=f"The ESP cipher suite of the tunnel, one of {', '.join(sorted(SUITES))} (default: aes-gcm-128).")
    ap.add_argument("--seconds", type=float, default=3.0, help="How long iperf3 measures goodput, in seconds (default: 3).")
    ap.add_argument("--no-offloads", dest="offloads", action="store_false",
                    help="Turn the hosts' TSO/GSO/GRO off. By default they are on, as Linux sets them, and the switches "
                         "cut the super-frames.")
    ap.add_argument("--p4sec", default=str(ROOT / "target" / "release" / "p4sec"),
                    help="The p4sec binary to run the switches with (default: the checkout's target/release/p4sec).")
    ap.add_argument("--summary", metavar="FILE", help="Write the outcome as JSON to FILE (scripts/demo's summary).")
    a = ap.parse_args(argv)
    if os.geteuid() != 0:
        sys.exit("vpn_demo: needs root (network namespaces)")
    work = pathlib.Path(tempfile.mkdtemp(prefix="p4sec-vpn-"))
    step("compile programs/ipsec_gateway.p4")
    sh(a.p4sec, "compile", str(ROOT / "programs" / "ipsec_gateway.p4"), "-o", str(work / "gw"))
    net = Net(offloads=a.offloads)
    procs = []
    try:
        pa, pb, rest = free_port(), free_port(), free_port()
        step("certificates (p4sec-ca): the CA, the controller's, the switches'")
        cadir = work / "ca"
        for args in (["init", cadir], ["issue", cadir, "controller", "--server"], ["issue", cadir, "switch", "--server", "--san", "127.0.0.1"]):
            sh(sys.executable, "-m", "p4sec.ipsec.ca", *map(str, args))
        step("two p4sec switches (S1, S2) with P4Runtime servers (mutual TLS; only the controller's certificate may program them)")
        tls = ["--tls-cert", str(cadir / "switch.crt"), "--tls-key", str(cadir / "switch.key"), "--tls-ca", str(cadir / "ca.crt"),
               "--tls-writers", "controller"]
        for port, lan, wan in ((pa, net.a1, net.wa), (pb, net.b1, net.wb)):
            procs.append(subprocess.Popen([a.p4sec, "switch", "--grpc", f"127.0.0.1:{port}", "--port", f"1={lan}", "--port", f"2={wan}"] + tls,
                                          stderr=subprocess.DEVNULL))
        time.sleep(0.5)
        cfg = work / "controller.yaml"
        cfg.write_text(f"""db: {work / 'controller.db'}
program: {work / 'gw'}
rest: 127.0.0.1:{rest}
switch_tls: {{ca: {cadir}, cert: controller}}
gateways:
  - {{name: S1, grpc: "127.0.0.1:{pa}", address: 192.0.2.1,
     lan: {{prefix: 10.1.0.0/16, port: 1, mac: "{net.mac_h1}"}}, wan: {{prefix: 198.51.100.0/24, port: 2, mac: "02:00:00:00:00:01"}}}}
  - {{name: S2, grpc: "127.0.0.1:{pb}", address: 198.51.100.1,
     lan: {{prefix: 10.2.0.0/16, port: 1, mac: "{net.mac_h2}"}}, wan: {{prefix: 192.0.2.0/24, port: 2, mac: "02:00:00:00:00:01"}}}}
tunnels:
  - {{name: S1-S2, a: S1, b: S2, suite: {a.suite}, auto: true, soft: {{seconds: 3600}}, hard: {{seconds: 4000}}}}
""")
        step("p4sec-controller: pushes the program, sets the tunnel up (SAD-dec, SAD-enc, SPD)")
        log = open(work / "controller.log", "w")
        ctl = subprocess.Popen([sys.executable, "-m", "p4sec.ipsec.cli", "--api", f"http://127.0.0.1:{rest}", "run", str(cfg)],
                               stdout=subprocess.PIPE, stderr=log, text=True)
        procs.append(ctl)
        if "ready" not in ctl.stdout.readline():
            sys.exit("vpn_demo: the controller did not start:\n" + (work / "controller.log").read_text()[-2000:])
        cli = [sys.executable, "-m", "p4sec.ipsec.cli", "--api", f"http://127.0.0.1:{rest}"]
        print(sh(*cli, "tunnels", "list").stdout.rstrip())

        step("ping H1 -> H2 through the tunnel")
        print(ns(net.ns1, "ping", "-c", "3", "-i", "0.2", "-W", "2", "10.2.0.2", check=False).stdout.rstrip()
              if shutil.which("ping") else "   (ping is not installed)")

        step("UDP H1 -> H2 while the WAN link is captured; the ESP decrypted with scapy and the controller's keys")
        cap = subprocess.Popen([sys.executable, "-c", CAPTURE, net.wa, "2", "6"], stdout=subprocess.PIPE, text=True)
        rx = subprocess.Popen(["ip", "netns", "exec", net.ns2, sys.executable, "-c", UDP_RECV, "2"], stdout=subprocess.PIPE, text=True)
        cap.stdout.readline()
        rx.stdout.readline()
        ns(net.ns1, sys.executable, "-c", UDP_SEND, "10.2.0.2", "2")
        received = rx.communicate(timeout=20)[0].strip().splitlines()
        frames = [x.strip() for x in cap.communicate(timeout=20)[0].splitlines() if x.strip()]
        print(f"   H2 received: {received}")
        decrypted = show_decrypted(frames, work / "controller.db", a.suite)

        step("renew the SAs (new SPIs and keys, loss-free order) and send again")
        print("   " + sh(*cli, "tunnels", "rekey", "S1-S2").stdout.strip())
        rx = subprocess.Popen(["ip", "netns", "exec", net.ns2, sys.executable, "-c", UDP_RECV, "1"], stdout=subprocess.PIPE, text=True)
        rx.stdout.readline()
        ns(net.ns1, sys.executable, "-c", UDP_SEND, "10.2.0.2", "1")
        after = rx.communicate(timeout=20)[0].strip()
        print(f"   H2 received: {after}")
        step("p4sec-controller tunnels show S1-S2: the SAs and the event log (each setup and renewal step)")
        print("   " + sh(*cli, "tunnels", "show", "S1-S2").stdout.rstrip().replace("\n", "\n   "))
        show = json.loads(sh(*cli, "tunnels", "show", "S1-S2", "--json").stdout)
        renewed = bool(after) and sum(e["what"].startswith("renew ") and "failed" not in e["what"] for e in show["events"]) > 0

        step("TCP goodput H1 -> H2 through the tunnel (iperf3)")
        mbps = None
        if shutil.which("iperf3"):
            srv = subprocess.Popen(["ip", "netns", "exec", net.ns2, "iperf3", "-s", "-1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.5)
            r = ns(net.ns1, "iperf3", "-c", "10.2.0.2", "-t", str(a.seconds), "-J", check=False)
            srv.wait(timeout=30)
            try:
                bps = json.loads(r.stdout)["end"]["sum_received"]["bits_per_second"]
                mbps = round(bps / 1e6)
                hosts = "hosts' offloads on" if a.offloads else "hosts' offloads off"
                print(f"   {a.suite}: {bps / 1e6:.0f} Mbit/s ({hosts}; the paper's BMv2: 47-49 Mbit/s)")
            except (ValueError, KeyError):
                print(f"   iperf3 failed: {r.stdout[-300:]} {r.stderr[-300:]}")
        else:
            print("   (iperf3 is not installed)")
        ok = len(received) == 2 and decrypted >= 1 and renewed
        print("\nVPN demo:", "OK" if ok else "FAILED")
        if a.summary:
            pathlib.Path(a.summary).write_text(json.dumps({"ok": ok, "suite": a.suite, "received": len(received),
                                                           "decrypted": decrypted, "renewed": renewed, "goodput_mbps": mbps}))
        return 0 if ok else 1
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        net.close()


if __name__ == "__main__":
    sys.exit(main())
