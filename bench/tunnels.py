"""Many tunnels through real switches: the controller sets up N site-to-site tunnels between two p4sec switches over
P4Runtime, one per pair of subnets (10.1.x.y/30 behind S1 <-> 10.2.x.y/30 behind S2), and reports the total time,
tunnels/s, the median and p99 per-tunnel setup time and the switches' memory (RSS) before and after; then it checks
that every tunnel's entries are on the switches (read back over P4Runtime), restarts the controller (a new one on
the same database reconciles both switches: reads every gateway table and SA slot, compares, changes nothing; the
time is reported) and checks that a sample of tunnels carries
traffic: a frame sent for each sampled subnet pair arrives at the far host decrypted, counted by that tunnel's own
inbound SA, while a frame for a subnet pair without a tunnel does not arrive.

    python -m bench.tunnels [--tunnels 10000] [--sample 16] [--suite aes-gcm-128] [--json FILE] [--p4sec PATH]

The program is compiled with -D SA_SLOTS and -D SPD_SIZE large enough for N tunnels (each gateway holds 2N SAs,
N SAD-dec entries and N policies). Needs root (network namespaces for the traffic check).
"""
import argparse
import ipaddress
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

from p4sec.ipsec import gateway as gwp
from p4sec.ipsec import reconcile as rec
from p4sec.infra import runtime
from p4sec.ipsec.controller import SUITES, ControllerError, Gateway, IpsecController
from p4sec.infra.netns import free_port, sh
from bench.vpn_demo import Net

ROOT = pathlib.Path(__file__).resolve().parents[1]
MAX_TUNNELS = 256 * 64
PAPER = {"setup_ms": 5.02}
TARGET = {"setup_ms": 2.0, "reconcile_s": 10.0}

# sends one UDP frame per (src, dst, marker) from argv, or captures frames and prints the markers it saw
PROBE = r"""
import socket, sys, time
role, iface = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.bind((iface, 0))
if role == "send":
    dst_mac, src_mac = bytes.fromhex(sys.argv[3]), bytes.fromhex(sys.argv[4])
    for item in sys.argv[5:]:
        src, dst, mark = item.split(",")
        payload = b"p4sec-tunnel-%06d" % int(mark)
        udp = (4242).to_bytes(2, "big") * 2 + (8 + len(payload)).to_bytes(2, "big") + b"\0\0" + payload
        ip = bytearray(b"\x45\0" + (20 + len(udp)).to_bytes(2, "big") + b"\0\0\0\0\x40\x11\0\0" + socket.inet_aton(src) + socket.inet_aton(dst))
        c = sum(int.from_bytes(ip[i:i + 2], "big") for i in range(0, 20, 2))
        c = (c & 0xffff) + (c >> 16)
        ip[10:12] = (~((c & 0xffff) + (c >> 16)) & 0xffff).to_bytes(2, "big")
        s.send(dst_mac + src_mac + b"\x08\x00" + bytes(ip) + udp)
        time.sleep(0.002)
else:
    s.settimeout(float(sys.argv[3]))
    print("ready", flush=True)
    seen = set()
    try:
        while True:
            f = s.recv(2048)
            i = f.find(b"p4sec-tunnel-")
            if f[12:14] == b"\x08\x00" and i >= 0:
                seen.add((socket.inet_ntoa(f[26:30]), socket.inet_ntoa(f[30:34]), int(f[i + 13:i + 19])))
    except socket.timeout:
        pass
    for src, dst, m in sorted(seen, key=lambda x: x[2]):
        print(src, dst, m, flush=True)
"""


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


def prefixes(i):
    """Tunnel i's subnet pair: 10.1.x.y/30 behind S1 and 10.2.x.y/30 behind S2."""
    x, y = i // 64, (i % 64) * 4
    return f"10.1.{x}.{y}/30", f"10.2.{x}.{y}/30"


def rss_kb(pid):
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return None


def probe(net, items, seconds=3.0):
    """Send one frame per (src, dst, marker) from H1's namespace; the (src, dst, marker) that reached H2."""
    ns1, ns2 = net.ns1, net.ns2
    rx = subprocess.Popen(["ip", "netns", "exec", ns2, sys.executable, "-c", PROBE, "recv", net.h2, str(seconds)], stdout=subprocess.PIPE,
                          text=True)
    if rx.stdout.readline().strip() != "ready":
        rx.kill()
        raise RuntimeError("the capture in H2's namespace did not start")
    gw_mac, h1_mac = "020000000001", net.mac_h1.replace(":", "")
    sh("ip", "netns", "exec", ns1, sys.executable, "-c", PROBE, "send", net.h1, gw_mac, h1_mac, *[f"{s},{d},{m}" for s, d, m in items])
    out, _ = rx.communicate(timeout=seconds + 30)
    return {(x[0], x[1], int(x[2])) for x in (line.split() for line in out.splitlines()) if len(x) == 3}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tunnels", type=int, default=10000)
    ap.add_argument("--sample", type=int, default=16, help="tunnels whose traffic is checked")
    ap.add_argument("--suite", default="aes-gcm-128")
    ap.add_argument("--json")
    ap.add_argument("--p4sec", default=str(ROOT / "target" / "release" / "p4sec"))
    a = ap.parse_args(argv)
    if not 1 <= a.tunnels <= MAX_TUNNELS:
        sys.exit(f"bench.tunnels: --tunnels takes 1 to {MAX_TUNNELS} (the subnet plan: 10.1.0.0/16 in /30s)")
    if a.sample < 1:
        sys.exit("bench.tunnels: --sample must be >= 1")
    if a.suite not in SUITES:
        sys.exit(f"bench.tunnels: unknown suite {a.suite!r} ({', '.join(SUITES)})")
    if os.geteuid() != 0:
        sys.exit("bench.tunnels: needs root (network namespaces)")
    if not pathlib.Path(a.p4sec).exists():
        sys.exit(f"bench.tunnels: no p4sec binary at {a.p4sec}")
    n = a.tunnels
    slots = max(1024, 1 << (2 * n + 16).bit_length())
    spd = max(4096, n + 16)
    work = pathlib.Path(tempfile.mkdtemp(prefix="p4sec-bench-tunnels-"))
    sh(a.p4sec, "compile", str(ROOT / "programs" / "ipsec_gateway.p4"), "-o", str(work / "gw"), "-D", f"SA_SLOTS={slots}", "-D", f"SPD_SIZE={spd}")
    net = Net()
    procs, switches, ctl = [], [], None
    out = {"tunnels": n, "suite": a.suite, "sa_slots": slots, "spd_size": spd}
    try:
        ports = []
        for lan, wan in ((net.a1, net.wa), (net.b1, net.wb)):
            port = free_port()
            ports.append(port)
            procs.append(subprocess.Popen([a.p4sec, "switch", "--grpc", f"127.0.0.1:{port}", "--port", f"1={lan}", "--port", f"2={wan}"],
                                          stderr=subprocess.DEVNULL))
        switches = [runtime.Switch(f"127.0.0.1:{p}") for p in ports]
        ctl = IpsecController(str(work / "ctl.db"), grace=0.5)
        gws = [Gateway("S1", switches[0], "192.0.2.1", "10.1.0.0/16", 1, net.mac_h1, 2, "02:00:00:00:00:01", "198.51.100.0/24"),
               Gateway("S2", switches[1], "198.51.100.1", "10.2.0.0/16", 1, net.mac_h2, 2, "02:00:00:00:00:01", "192.0.2.0/24")]
        for g in gws:
            ctl.add_gateway(g, work / "gw")
        time.sleep(0.2)
        out["rss_kb_before"] = [rss_kb(p.pid) for p in procs]
        setup = []
        t_all = time.perf_counter()
        for i in range(n):
            ap_, bp_ = prefixes(i)
            t0 = time.perf_counter()
            ctl.connect("S1", "S2", suite=a.suite, name=f"t{i}", a_prefix=ap_, b_prefix=bp_)
            setup.append(1000 * (time.perf_counter() - t0))
            if (i + 1) % 1000 == 0:
                print(f"  {i + 1} tunnels up ({(time.perf_counter() - t_all):.1f} s)", flush=True)
        total = time.perf_counter() - t_all
        time.sleep(0.2)
        out["rss_kb_after"] = [rss_kb(p.pid) for p in procs]
        out.update({"total_s": total, "tunnels_per_s": n / total, "setup_ms_median": statistics.median(setup), "setup_ms_p99": pct(setup, 99),
                    "setup_ms_max": max(setup), "setup_ms_first_100_median": statistics.median(setup[:100]),
                    "setup_ms_last_100_median": statistics.median(setup[-100:])})

        # read back: every tunnel's SAD-dec entry and policy on both switches
        out["readback"] = {g.name: {"sad_dec": len(rec.read_tables(g.switch, [gwp.sad_dec(4)])), "spd": len(rec.read_tables(g.switch, [gwp.spd(4)]))}
                           for g in gws}
        up = [t for t in ctl.tunnels() if t["state"] == "up"]
        out["controller_tunnels_up"] = len(up)

        # a controller restart: a new controller on the same database adopts the running switches and reconciles
        # them (reads every gateway table and SA slot, compares with the recorded state; nothing to change)
        ctl.close()
        for sw in switches:
            sw.close()
        switches = [runtime.Switch(f"127.0.0.1:{p}") for p in ports]
        ctl = IpsecController(str(work / "ctl.db"), grace=0.5)
        gws = [Gateway(g.name, sw, g.address, g.lan_prefix, g.lan_port, g.lan_mac, g.wan_port, g.wan_mac, g.wan_prefix)
               for g, sw in zip(gws, switches)]
        for g in gws:
            ctl.add_gateway(g, work / "gw")
        t0 = time.perf_counter()
        summary = ctl.reconcile()
        out["reconcile_s"] = time.perf_counter() - t0
        out["reconcile"] = summary
        out["reconcile_in_sync"] = all(x["in_sync"] for x in ctl.reconcile(dry_run=True).values())

        # traffic: one frame per sampled tunnel (spread over all of them), and one for a subnet pair without a tunnel
        k = min(a.sample, n)
        sample = sorted({round(j * (n - 1) / max(1, k - 1)) for j in range(k)})
        items = []
        for i in sample:
            ap_, bp_ = prefixes(i)
            items.append((str(ipaddress.ip_network(ap_)[1]), str(ipaddress.ip_network(bp_)[1]), i))
        stray = ("10.1.255.253", "10.2.255.253", 999999)  # 10.1.255.252/30: beyond the last tunnel's subnet
        inbound = {}
        for i in sample:
            s = next(x for x in ctl.sas(f"t{i}") if x["state"] == "active" and x["src"] == "S1")
            inbound[i] = (s["in_slot"], switches[1].counter_read(gwp.SA_COUNTERS, s["in_slot"] * 16)[0])
        got = probe(net, items + ([stray] if n < MAX_TUNNELS else []))
        carried = []
        for src, dst, i in items:
            slot, before = inbound[i]
            after = switches[1].counter_read(gwp.SA_COUNTERS, slot * 16)[0]
            carried.append({"tunnel": i, "src": src, "dst": dst, "arrived": (src, dst, i) in got, "sa_packets": after - before})
        out["sample"] = carried
        out["sample_ok"] = sum(1 for c in carried if c["arrived"] and c["sa_packets"] >= 1)
        out["stray_arrived"] = any(m == stray[2] for _, _, m in got)
    except ControllerError as e:
        sys.exit(f"bench.tunnels: {e}")
    finally:
        if ctl:
            ctl.close()
        for s in switches:
            s.close()
        for p in procs:
            p.terminate()
            p.wait(timeout=10)
        net.close()

    print(f"p4sec: {n} site-to-site tunnels ({a.suite}), one per subnet pair, set up by the controller over P4Runtime between two")
    print("p4sec switches on this machine (each tunnel: SAD-dec on both, then SAD-enc + SPD on both; one Write per switch and phase)")
    print(f"  total {out['total_s']:.1f} s, {out['tunnels_per_s']:.0f} tunnels/s")
    print(f"  per tunnel: median {out['setup_ms_median']:.2f} ms, p99 {out['setup_ms_p99']:.2f} ms, max {out['setup_ms_max']:.2f} ms "
          f"(first 100: {out['setup_ms_first_100_median']:.2f} ms, last 100: {out['setup_ms_last_100_median']:.2f} ms); "
          f"paper (P4-IPsec, BMv2, one tunnel): {PAPER['setup_ms']:.2f} ms; target {TARGET['setup_ms']:.1f} ms")
    for g, before, after in zip(("S1", "S2"), out["rss_kb_before"], out["rss_kb_after"]):
        print(f"  {g} RSS: {before / 1024:.1f} MiB before, {after / 1024:.1f} MiB after ({(after - before) / n:.2f} KiB per tunnel)")
    for g, r in out["readback"].items():
        print(f"  {g} read back: {r['sad_dec']} SAD-dec entries, {r['spd']} policies")
    print(f"  reconciliation after a controller restart (read + compare of both switches, no change): {out['reconcile_s']:.2f} s "
          f"(target {TARGET['reconcile_s']:.0f} s); " + "; ".join(f"{g}: {x}" for g, x in out["reconcile"].items()))
    print(f"  traffic: {out['sample_ok']} of {len(out['sample'])} sampled tunnels carried a frame (arrived, counted by their inbound SA); "
          f"a subnet pair without a tunnel: {'ARRIVED (wrong)' if out['stray_arrived'] else 'dropped'}")
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(out, indent=1))
    ok = out["sample_ok"] == len(out["sample"]) and not out["stray_arrived"] and out["reconcile_in_sync"] and all(
        r["sad_dec"] == n and r["spd"] == n for r in out["readback"].values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
