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
from p4sec.infra.netns import free_port
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

# sends queries (ids 0, 1, ...) at a steady rate until the stop file exists, then prints how many it sent
CLIENT = r"""
import os, socket, sys, time
from scapy.layers.dns import DNS, DNSQR
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
rate, name, stop = float(sys.argv[1]), sys.argv[2], sys.argv[3]
print("ready", flush=True)
t0 = time.monotonic()
i = 0
while not os.path.exists(stop):
    while time.monotonic() < t0 + i / rate:
        time.sleep(0.0005)
    u.sendto(bytes(DNS(id=i, rd=1, qd=DNSQR(qname=name))), ("10.0.0.2", 53))
    i += 1
print(i, flush=True)
"""

# one query given as hex (built here with scapy; the probe process stays light)
PROBE = r"""
import socket, sys
socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(bytes.fromhex(sys.argv[1]), ("10.0.0.2", 53))
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
        from p4sec.infra.runtime import Switch
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
        from scapy.layers.dns import DNS, DNSQR
        rate, stop = 500, tmp_path / "stop"
        cli = subprocess.Popen(["ip", "netns", "exec", n1, sys.executable, "-c", CLIENT, str(rate), "stable.example", str(stop)],
                               stdout=subprocess.PIPE, text=True)
        assert cli.stdout.readline().strip() == "ready"
        # every list at least twice, and at least 3 s of stream, however slow the machine is today
        loads = []
        k = 0
        start = time.time()
        while k < 2 * len(lists) or time.time() < start + 3:
            t0 = time.perf_counter()
            ctl.extern_write("UfIngress.blocklist", "load", lists[k % len(lists)])
            loads.append(time.perf_counter() - t0)
            # the new list is in force: the toggled name passes or not
            probe = bytes(DNS(id=60000 + k, rd=1, qd=DNSQR(qname="toggle.example"))).hex()
            subprocess.run(["ip", "netns", "exec", n1, sys.executable, "-c", PROBE, probe], check=True)
            k += 1
        stop.touch()
        n = int(cli.communicate(timeout=60)[0].strip())
        ids_line, names_line = srv.communicate(timeout=30)[0].strip().split("\n")
        ids = [int(x) for x in ids_line.split()]
        stable = {i for i in ids if i < 60000}
        assert n >= 3 * rate // 2, f"the stream ran ({n} queries)"
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
