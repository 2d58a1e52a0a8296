"""Blocklist updates at run time without dropping traffic: a steady stream of DNS queries for a name that stays
allowed crosses url_filter_fast.p4 while the controller replaces the list (up to 2,000 names) over P4Runtime again
and again; not one query is lost, and each new list takes effect."""
import json
import os
import pathlib
import subprocess
import sys
import time

import pytest

from p4sec import dpi
from p4sec.netns import free_port
from tests.dpi.test_url_filter_namespaces import net  # noqa: F401 (fixture)

ROOT = pathlib.Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")

SERVER = r"""
import socket, sys
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("0.0.0.0", 53)); u.settimeout(4)
print("ready", flush=True)
ids, names = [], []
try:
    while True:
        d, a = u.recvfrom(2048)
        ids.append(int.from_bytes(d[:2], "big"))
        names.append(d[12:].hex())
except socket.timeout:
    pass
print(" ".join(map(str, ids)))
print(" ".join(names))
"""

CLIENT = r"""
import socket, sys, time
from scapy.layers.dns import DNS, DNSQR
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
n, rate, name = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
t0 = time.monotonic()
for i in range(n):
    while time.monotonic() < t0 + i / rate:
        time.sleep(0.0005)
    u.sendto(bytes(DNS(id=i, rd=1, qd=DNSQR(qname=name))), ("10.0.0.2", 53))
"""

PROBE = r"""
import socket, sys
from scapy.layers.dns import DNS, DNSQR
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.sendto(bytes(DNS(id=int(sys.argv[2]), rd=1, qd=DNSQR(qname=sys.argv[1]))), ("10.0.0.2", 53))
"""


def test_list_updates_lose_no_allowed_packet(p4sec_bin, net, tmp_path):
    n1, n2, s1, s2 = net
    out = tmp_path / "uf"
    subprocess.run([str(p4sec_bin), "compile", str(ROOT / "programs" / "url_filter_fast.p4"), "-o", str(out)], check=True)
    port = free_port()
    sw = subprocess.Popen([str(p4sec_bin), "switch", "--grpc", f"127.0.0.1:{port}", "--port", f"1={s1}", "--port", f"2={s2}"],
                          stderr=subprocess.DEVNULL)
    srv = None
    try:
        time.sleep(0.5)
        from p4sec.runtime import Switch
        ctl = Switch(f"127.0.0.1:{port}")
        ctl.push(out)
        ctl.table_insert("UfIngress.uf_port", {"sm.ingress_port": ("exact", b"\x01")}, "UfIngress.forward", {"port": 2})
        ctl.table_insert("UfIngress.uf_port", {"sm.ingress_port": ("exact", b"\x02")}, "UfIngress.forward", {"port": 1})
        filler = dpi.generated_domains(2000)
        lists = [json.loads(dpi.automaton_json(dpi.Dfa(dpi.read_list("\n".join(filler[: 200 * (k + 1)] + (["toggle.example"] if k % 2 else []))),
                                                       payload=True))) for k in range(6)]
        ctl.extern_write("UfIngress.blocklist", "load", lists[0])
        srv = subprocess.Popen(["ip", "netns", "exec", n2, sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
        assert srv.stdout.readline().strip() == "ready"
        n, rate = 2000, 500
        cli = subprocess.Popen(["ip", "netns", "exec", n1, sys.executable, "-c", CLIENT, str(n), str(rate), "stable.example"])
        loads = []
        end = time.time() + n / rate - 0.3
        k = 0
        while time.time() < end:
            t0 = time.perf_counter()
            ctl.extern_write("UfIngress.blocklist", "load", lists[k % len(lists)])
            loads.append(time.perf_counter() - t0)
            # the new list is in force: the toggled name passes or not
            subprocess.run(["ip", "netns", "exec", n1, sys.executable, "-c", PROBE, "toggle.example", str(60000 + k)], check=True)
            k += 1
        cli.wait(timeout=60)
        ids_line, names_line = srv.communicate(timeout=30)[0].strip().split("\n")
        ids = [int(x) for x in ids_line.split()]
        stable = {i for i in ids if i < n}
        assert k >= 5, f"only {k} list updates during the stream"
        missing = sorted(set(range(n)) - stable)
        assert not missing, f"{len(missing)} allowed queries lost across {k} list updates: {missing[:20]}"
        probes = {i - 60000 for i in ids if i >= 60000}
        # odd lists hold toggle.example: its probe is blocked; even lists do not: it passes
        assert probes == {j for j in range(k) if (j % len(lists)) % 2 == 0}, (probes, k)
        ctl.close()
    finally:
        if srv and srv.poll() is None:
            srv.kill()
        sw.terminate()
        sw.wait(timeout=10)
