"""url_filter_fast.p4 on the p4sec switch between two namespaces, with real traffic: curl to an HTTP server,
a TLS ClientHello from Python's ssl module, DNS queries over UDP. The blocklist is compiled by p4sec-dpi and
pushed over P4Runtime, then replaced at run time."""
import functools
import json
import os
import pathlib
import subprocess
import sys
import time
import uuid

import pytest

from p4sec import dpi
from p4sec.infra.netns import free_port, sh

ROOT = pathlib.Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")

SERVER = r"""
import http.server, socket, socketserver, sys, threading
log = open(sys.argv[1], "a", buffering=1)
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        log.write("http " + self.headers.get("Host", "") + "\n")
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *a): pass
def tls():
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", 443)); s.listen()
    while True:
        c, _ = s.accept(); c.settimeout(2)
        try:
            d = c.recv(4096)
            log.write("tls %d\n" % len(d))
        except OSError:
            pass
        c.close()
def dns():
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("0.0.0.0", 53))
    while True:
        d, a = u.recvfrom(2048)
        log.write("dns %s\n" % d[12:].hex())
threading.Thread(target=tls, daemon=True).start()
threading.Thread(target=dns, daemon=True).start()
socketserver.TCPServer.allow_reuse_address = True
print("ready", flush=True)
http.server.ThreadingHTTPServer(("0.0.0.0", 80), H).serve_forever()
"""

CLIENT_TLS = r"""
import socket, ssl, sys
ctx = ssl.create_default_context()
s = socket.create_connection(("10.0.0.2", 443), timeout=3)
try:
    ctx.wrap_socket(s, server_hostname=sys.argv[1])
except Exception:
    pass
"""

CLIENT_DNS = r"""
import socket, sys
from scapy.layers.dns import DNS, DNSQR
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.sendto(bytes(DNS(id=7, rd=1, qd=DNSQR(qname=sys.argv[1]))), ("10.0.0.2", 53))
"""


def curl_ok(netns, host):
    """An HTTP GET with that Host header from `netns` to the server: True if the answer came."""
    r = subprocess.run(["ip", "netns", "exec", netns, "curl", "-s", "-m", "3", "-H", f"Host: {host}", "http://10.0.0.2/"],
                       capture_output=True, text=True)
    return r.stdout == "ok"


def run_client(netns, code, arg):
    subprocess.run(["ip", "netns", "exec", netns, sys.executable, "-c", code, arg], capture_output=True, timeout=20)


@pytest.fixture
def net():
    tag = uuid.uuid4().hex[:5]
    n1, n2 = f"uf1{tag}", f"uf2{tag}"
    h1, s1, h2, s2 = f"uh1{tag}", f"us1{tag}", f"uh2{tag}", f"us2{tag}"
    for n, h, s, ip in ((n1, h1, s1, "10.0.0.1/24"), (n2, h2, s2, "10.0.0.2/24")):
        sh("ip", "netns", "add", n)
        sh("ip", "link", "add", h, "netns", n, "type", "veth", "peer", "name", s)
        sh("ip", "netns", "exec", n, "ip", "link", "set", "lo", "up")
        sh("ip", "netns", "exec", n, "ip", "link", "set", h, "up")
        sh("ip", "netns", "exec", n, "ip", "addr", "add", ip, "dev", h)
        sh("ip", "netns", "exec", n, "ethtool", "-K", h, "tx", "off", check=False)
        sh("ip", "link", "set", s, "up")
    yield n1, n2, s1, s2
    for n in (n1, n2):
        sh("ip", "netns", "del", n, check=False)
    for s in (s1, s2):
        sh("ip", "link", "del", s, check=False)


def test_real_traffic_through_the_filter(p4sec_bin, net, tmp_path):
    n1, n2, s1, s2 = net
    out = tmp_path / "uf"
    subprocess.run([str(p4sec_bin), "compile", str(ROOT / "programs" / "url_filter_fast.p4"), "-o", str(out)], check=True)
    port = free_port()
    sw = subprocess.Popen([str(p4sec_bin), "switch", "--grpc", f"127.0.0.1:{port}", "--port", f"1={s1}", "--port", f"2={s2}"],
                          stderr=open(tmp_path / "switch.log", "w"))
    log = tmp_path / "server.log"
    srv = subprocess.Popen(["ip", "netns", "exec", n2, sys.executable, "-c", SERVER, str(log)], stdout=subprocess.PIPE, text=True)
    try:
        assert srv.stdout.readline().strip() == "ready"
        from p4sec.infra.runtime import Switch
        ctl = Switch(f"127.0.0.1:{port}")
        ctl.push(out)
        ctl.table_insert("UfIngress.uf_port", {"sm.ingress_port": ("exact", b"\x01")}, "UfIngress.forward", {"port": 2})
        ctl.table_insert("UfIngress.uf_port", {"sm.ingress_port": ("exact", b"\x02")}, "UfIngress.forward", {"port": 1})
        ctl.extern_write("UfIngress.blocklist", "load", json.loads(dpi.automaton_json(dpi.Dfa(dpi.read_list("evil.com\nads.tracker.net\n"), payload=True))))

        curl = functools.partial(curl_ok, n1)
        client = functools.partial(run_client, n1)

        assert curl("good.example")
        assert curl("notevil.com")
        assert not curl("evil.com")
        assert not curl("WWW.Evil.Com")
        client(CLIENT_TLS, "good.example")
        client(CLIENT_TLS, "cdn.evil.com")
        client(CLIENT_DNS, "good.example")
        client(CLIENT_DNS, "x.ads.tracker.net")
        time.sleep(0.5)
        seen = log.read_text()
        assert "http good.example" in seen and "http notevil.com" in seen
        assert "evil.com" not in seen.lower().replace("notevil.com", "")
        assert seen.count("tls ") == 1, seen           # only the good ClientHello arrived (with data)
        assert "dns " + bytes(b"\x04good\x07example\x00").hex() in seen
        assert "tracker" not in bytes.fromhex("".join(l[4:] for l in seen.splitlines() if l.startswith("dns "))).decode("latin1")
        # the list is replaced at run time: evil.com passes, good.example is now blocked
        ctl.extern_write("UfIngress.blocklist", "load", json.loads(dpi.automaton_json(dpi.Dfa(["good.example"], payload=True))))
        assert curl("evil.com")
        assert not curl("good.example")
        ctl.close()
    finally:
        srv.terminate()
        sw.terminate()
        sw.wait(timeout=10)


def program_recirculating(ctl, domains):
    """programs/url_filter.p4's tables from p4sec-dpi output, over P4Runtime (the paper-faithful variant)."""
    from p4.v1 import p4runtime_pb2
    d = dpi.Dfa(dpi.read_list("\n".join(domains)), payload=True)
    with ctl.batch():
        for mode, classes in ((0, dpi.CLASS_OF), (1, dpi.CLASS_OF_DNS)):
            for b, c in enumerate(classes):
                if c:
                    ctl.table_insert("UfrIngress.byte_class", {"hdr.label.mode": ("exact", bytes([mode])), "hdr.byte.b": ("exact", bytes([b]))},
                                     "UfrIngress.set_class", {"cls": c})
        for table, match, action, params in dpi.p4runtime_entries(d):
            ctl.table_insert(table, match, action, params)
        ctl.table_insert("UfrEgress.dfa_start", {"hdr.label.mode": ("exact", b"\x00")}, "UfrEgress.set_start", {"state": d.delta[0].get(dpi.END, 0)})
        ctl.table_insert("UfrEgress.dfa_start", {"hdr.label.mode": ("exact", b"\x01")}, "UfrEgress.set_start", {"state": 0})
        ctl.table_insert("UfrIngress.ufr_port", {"sm.ingress_port": ("exact", b"\x01")}, "UfrIngress.forward", {"port": 2})
        ctl.table_insert("UfrIngress.ufr_port", {"sm.ingress_port": ("exact", b"\x02")}, "UfrIngress.forward", {"port": 1})
    u = p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT)
    cs = u.entity.packet_replication_engine_entry.clone_session_entry
    cs.session_id = 100
    cs.replicas.add(egress_port=99, instance=1)
    ctl._write(u)


def test_real_traffic_through_the_recirculating_filter(p4sec_bin, net, tmp_path):
    """The same traffic through programs/url_filter.p4 (clone + one byte per recirculation)."""
    n1, n2, s1, s2 = net
    out = tmp_path / "ufr"
    subprocess.run([str(p4sec_bin), "compile", str(ROOT / "programs" / "url_filter.p4"), "-o", str(out)], check=True)
    port = free_port()
    sw = subprocess.Popen([str(p4sec_bin), "switch", "--grpc", f"127.0.0.1:{port}", "--port", f"1={s1}", "--port", f"2={s2}"],
                          stderr=open(tmp_path / "switch.log", "w"))
    log = tmp_path / "server.log"
    srv = subprocess.Popen(["ip", "netns", "exec", n2, sys.executable, "-c", SERVER, str(log)], stdout=subprocess.PIPE, text=True)
    try:
        assert srv.stdout.readline().strip() == "ready"
        from p4sec.infra.runtime import Switch
        ctl = Switch(f"127.0.0.1:{port}")
        ctl.push(out)
        program_recirculating(ctl, ["evil.com", "ads.tracker.net"])

        curl = functools.partial(curl_ok, n1)
        client = functools.partial(run_client, n1)

        for _ in range(3):
            assert curl("good.example")
            assert curl("notevil.com")
            assert not curl("evil.com")
            assert not curl("WWW.Evil.Com")
        client(CLIENT_TLS, "good.example")
        client(CLIENT_TLS, "cdn.evil.com")
        client(CLIENT_DNS, "good.example")
        client(CLIENT_DNS, "x.ads.tracker.net")
        time.sleep(0.5)
        seen = log.read_text()
        assert seen.count("http good.example") == 3 and seen.count("http notevil.com") == 3
        assert "evil.com" not in seen.lower().replace("notevil.com", "")
        assert seen.count("tls ") == 1, seen
        assert "dns " + bytes(b"\x04good\x07example\x00").hex() in seen
        assert "tracker" not in bytes.fromhex("".join(l[4:] for l in seen.splitlines() if l.startswith("dns "))).decode("latin1")
        ctl.close()
    finally:
        srv.terminate()
        sw.terminate()
        sw.wait(timeout=10)
