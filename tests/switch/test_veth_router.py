"""Real packets: the p4sec switch on veth pairs whose host ends live in network namespaces made by the test.
The IPv4 router program is pushed and programmed over P4Runtime; scapy sends from one namespace and
sniffs in the other."""
import os
import subprocess
import sys
import time

import pytest
from p4.v1 import p4runtime_pb2

from swrig import drop_topo, make_topo, metrics_of, start_router
from test_p4runtime import free_port

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")

SEND_SNIFF = r"""
import sys, time
from scapy.all import Ether, IP, UDP, Raw, sendp, AsyncSniffer
role, iface = sys.argv[1], sys.argv[2]
if role == "sniff":
    s = AsyncSniffer(iface=iface, filter="udp and port 4242", count=int(sys.argv[3]), timeout=8)
    s.start(); time.sleep(0.5); print("ready", flush=True); s.join()
    for p in s.results or []:
        print(bytes(p).hex(), flush=True)
else:
    n = int(sys.argv[3])
    for i in range(n):
        sendp(Ether(dst="02:00:00:00:00:01", src="02:00:00:00:01:01") / IP(src="10.0.1.1", dst="10.0.2.2", ttl=64, id=i)
              / UDP(sport=4242, dport=4242) / Raw(bytes(range(32))), iface=iface, verbose=False)
"""


@pytest.fixture
def topo():
    links = make_topo("s")
    yield links
    drop_topo(links)


@pytest.mark.parametrize("workers,trace,engine", [(1, False, None), (2, False, None), (1, True, None), (1, False, "native"),
                                                  (2, False, "native")])
def test_router_forwards_between_namespaces(p4sec_bin, topo, tmp_path, workers, trace, engine):
    """The router on veth ports forwards and rewrites frames; `engine`: the switch started with `p4sec --engine`."""
    (ns1, h1, s1), (ns2, h2, s2) = topo
    sw, mport, _ = start_router(p4sec_bin, tmp_path, ["--port", f"1={s1}", "--port", f"2={s2}"], workers=workers,
                                extra=["--trace"] if trace else [], engine=engine)
    try:
        n = 5
        sniff = subprocess.Popen(["ip", "netns", "exec", ns2, sys.executable, "-c", SEND_SNIFF, "sniff", h2, str(n)],
                                 stdout=subprocess.PIPE, text=True)
        assert sniff.stdout.readline().strip() == "ready"
        subprocess.run(["ip", "netns", "exec", ns1, sys.executable, "-c", SEND_SNIFF, "send", h1, str(n)], check=True, timeout=30)
        got = [bytes.fromhex(line.strip()) for line in sniff.stdout if line.strip()]
        sniff.wait(timeout=15)
        assert len(got) == n, f"received {len(got)} of {n}"
        for f in got:
            assert f[0:6] == bytes.fromhex("020000000202"), "destination MAC rewritten"
            assert f[14 + 8] == 63, "TTL decremented"
            assert f[14 + 16:14 + 20] == bytes([10, 0, 2, 2])

        metrics = metrics_of(mport)
        assert metrics[f'p4sec_port_rx_packets_total{{port="1",iface="{s1}"}}'] >= n
        assert metrics[f'p4sec_port_tx_packets_total{{port="2",iface="{s2}"}}'] >= n
        assert metrics['p4sec_table_lookups_total{table="RouterIngress.ipv4_lpm",result="hit"}'] >= n
        assert metrics['p4sec_table_entries{table="RouterIngress.ipv4_lpm"}'] == 1
        # the route's write made a version of the table, reused or copied
        assert sum(metrics[f'p4sec_table_versions_total{{table="RouterIngress.ipv4_lpm",made="{m}"}}']
                   for m in ("reused", "copied")) >= 1
        assert metrics['p4sec_pipeline_packets_total{outcome="emitted"}'] >= n
        # the engine that ran them: the one asked for, closures by default
        assert metrics[f'p4sec_pipeline_engine{{engine="{engine or os.environ.get("P4SEC_ENGINE") or "native"}"}}'] == 1
        assert sum(v for k, v in metrics.items() if k.startswith("p4sec_pipeline_engine{")) == 1
        if trace:
            logged = (tmp_path / "switch.log").read_text()
            assert "packet of" in logged and "table RouterIngress.ipv4_lpm hit -> RouterIngress.set_nhop" in logged, logged[-2000:]
            assert "parser state RouterParser.parse_ipv4" in logged
    finally:
        sw.terminate()
        sw.wait(timeout=10)


def test_forwarding_benchmark_runs_and_reports(tmp_path, p4sec_bin):
    """The veth forwarding benchmark (python -m bench.veth, trafgen as the sender): a short run must forward
    traffic both ways (kernel and p4sec), measure the switch's CPU time and a paced run, and write its figures as
    JSON. Not a speed test."""
    import json
    from bench import veth as bench_veth
    out = tmp_path / "veth.json"
    bench_veth.main(["--seconds", "0.5", "--sizes", "64", "--workers", "1", "--lossless-steps", "1", "--json", str(out),
                     "--p4sec", str(p4sec_bin)])
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 1 and rows[0]["size"] == 64 and rows[0]["workers"] == 1
    assert rows[0]["kernel_pps"] > 1000 and rows[0]["p4sec_pps"] > 1000
    assert rows[0]["p4sec_pps"] <= rows[0]["offered_pps_p4sec_run"] * 1.05
    # the switch's own CPU time was measured: more than nothing, less than a second per frame
    assert 0 < rows[0]["switch_cpu_ns_per_frame"] < 1e9 and rows[0]["switch_cores_busy"] > 0
    assert rows[0]["lossless_pps"] is not None and rows[0]["paced_sender_max_pps"] > 0


def test_forwarding_benchmark_compares_engines_and_builds_in_one_run(tmp_path, p4sec_bin, capsys):
    """`--engines closure,native --compare LABEL=PATH --rounds 2`: every switch measured in each round, taking
    turns, one row per switch with the medians and each round's figures, and a comparison against the first.
    Not a speed test."""
    import json
    from bench import veth as bench_veth
    out = tmp_path / "veth.json"
    bench_veth.main(["--seconds", "0.3", "--sizes", "64", "--workers", "1", "--lossless-steps", "0", "--engines", "closure,native",
                     "--compare", f"again={p4sec_bin}", "--rounds", "2", "--json", str(out), "--p4sec", str(p4sec_bin)])
    doc = json.loads(out.read_text())
    assert doc["switches"] == ["p4sec/closure", "p4sec/native", "again"] and doc["rounds"] == 2
    assert [r["switch"] for r in doc["rows"]] == doc["switches"]
    for r in doc["rows"]:
        assert r["rounds"] == 2 and len(r["per_round"]) == 2
        assert all(x["p4sec_pps"] > 1000 for x in r["per_round"]), r
        # the median of two rounds lies between them
        lo, hi = sorted(x["p4sec_pps"] for x in r["per_round"])
        assert lo <= r["p4sec_pps"] <= hi
        assert 0 < r["switch_user_ns_per_frame"] < 1e9
    text = capsys.readouterr().out
    assert "against p4sec/closure" in text and "p4sec/native" in text and "again" in text


@pytest.mark.parametrize("args, error", [
    (["--engines", "jit"], "--engines: unknown engine `jit` (closure or native)"),
    (["--compare", "nolabel"], "--compare: `nolabel` is not LABEL=PATH"),
    (["--compare", "x=/nonexistent/p4sec"], "--compare: `/nonexistent/p4sec` is not a file"),
    (["--rounds", "0"], "--rounds: at least 1"),
])
def test_forwarding_benchmark_refuses_bad_switch_lists(args, error, capsys):
    from bench import veth as bench_veth
    with pytest.raises(SystemExit) as e:
        bench_veth.main(args)
    assert e.value.code == 2
    assert error in capsys.readouterr().err


def test_a_vanishing_interface_is_reported_and_the_switch_keeps_running(p4sec_bin, topo, tmp_path):
    import grpc
    from p4.v1 import p4runtime_pb2_grpc
    port = free_port()
    (ns1, h1, s1), (ns2, h2, s2) = topo
    log = tmp_path / "switch.log"
    sw = subprocess.Popen([str(p4sec_bin), "switch", "--grpc", f"127.0.0.1:{port}", "--port", f"1={s1}", "--port", f"2={s2}"],
                          stderr=open(log, "w"))
    try:
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        grpc.channel_ready_future(channel).result(timeout=20)
        subprocess.run(["ip", "link", "del", s2], check=True)
        deadline = time.time() + 10
        while "is gone" not in log.read_text() and time.time() < deadline:
            time.sleep(0.2)
        assert f"port 2 (`{s2}`) is gone" in log.read_text()
        assert sw.poll() is None, "the switch must keep running"
        stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
        assert stub.Capabilities(p4runtime_pb2.CapabilitiesRequest()).p4runtime_api_version
        # it does not spin on the dead socket (utime + stime of the switch, in clock ticks of 1/100 s)
        stat = open(f"/proc/{sw.pid}/stat").read().split()
        ticks = int(stat[13]) + int(stat[14])
        time.sleep(1.0)
        stat = open(f"/proc/{sw.pid}/stat").read().split()
        assert int(stat[13]) + int(stat[14]) - ticks < 50, "more than half a core busy after the port vanished"
    finally:
        sw.terminate()
        sw.wait(timeout=10)
