"""The P4EAD case study: an in-network key-value cache (programs/inband_kv_cache.p4) kept up to date by in-band
control packets, with and without authentication, in network namespaces.

    python -m bench.kvcase [--builds noauth,rpp1,extern] [--duration 20] [--shift-every 5] [--json F] [--plot F.png]

Topology: namespace C (client 10.0.0.1) -- veth -- namespace M (p4sec switch, ports 1 and 2) -- veth --
namespace S (server and controller, 10.0.0.2). The client sends GETs at a fixed rate over a Zipf-skewed key
distribution; every --shift-every seconds, --hot cold keys take over the top ranks. The switch answers GETs for
cached keys; the server answers the rest and the controller beside it pushes the keys it sees missing into the
cache with in-band control packets (two updates per packet, sender key provisioned over P4Runtime only), every
--period seconds. The client records the cache miss ratio over time, which is printed and plotted per build.
Needs root.
"""
import argparse
import bisect
import collections
import json
import os
import pathlib
import random
import socket
import subprocess
import sys
import time
import uuid

from p4sec import inband
from p4sec.infra.netns import free_port, ns, sh

ROOT = pathlib.Path(__file__).resolve().parents[1]
BUILDS = {"noauth": ["-D", "INBAND_NO_AUTH"], "rpp1": ["-D", "P4EAD_RPP=1"], "rpp2": ["-D", "P4EAD_RPP=2"],
          "rpp4": ["-D", "P4EAD_RPP=4"], "extern": ["-D", "INBAND_EXTERN"]}
LABEL = {"noauth": "no authentication", "rpp1": "P4EAD, plain P4, 1 round/pass", "rpp2": "P4EAD, plain P4, 2 rounds/pass",
         "rpp4": "P4EAD, plain P4, 4 rounds/pass", "extern": "P4EAD, ascon extern"}
SENDER_ID = 1
SWITCH_MAC = "02:00:00:00:00:fe"





def value_of(key):
    return (key * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF


# ------------------------------------------------------------------------------------------------ client

def key_at(rank, epoch, keys, hot):
    """The key at a popularity rank: each epoch moves a new group of `hot` cold keys to the top ranks."""
    return 1 + (rank + epoch * hot * 7) % keys


def client(a):
    """GETs at a fixed rate; one JSON line per bin: [t, sent, hits, server replies]."""
    weights = [1.0 / (r + 1) ** a.zipf for r in range(a.keys)]
    cum, s = [], 0.0
    for w in weights:
        s += w
        cum.append(s)
    rnd = random.Random(7)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("10.0.0.1", 40000))
    sock.setblocking(False)
    bins = collections.defaultdict(lambda: [0, 0, 0])
    start = time.monotonic()
    gap = 1.0 / a.rate
    nxt = start
    req = 0
    while True:
        now = time.monotonic()
        t = now - start
        if t >= a.duration:
            break
        while nxt <= now:
            epoch = int((nxt - start) // a.shift_every)
            rank = bisect.bisect_left(cum, rnd.random() * s)
            req += 1
            sock.sendto(inband.kv_payload(inband.KV_GET, key_at(rank, epoch, a.keys, a.hot), req_id=req), ("10.0.0.2", inband.KV_PORT))
            bins[int((nxt - start) / a.bin)][0] += 1
            nxt += gap
        try:
            while True:
                data = sock.recv(256)
                r = inband.parse_kv(data)
                if r["op"] == inband.KV_REPLY and r["value"] == value_of(r["key"]):
                    b = bins[int(t / a.bin)]
                    b[1 if r["status"] == inband.KV_HIT else 2] += 1
        except BlockingIOError:
            pass
        time.sleep(0.0005)
    for i in sorted(bins):
        print(json.dumps([round(i * a.bin, 3)] + bins[i]))


# ------------------------------------------------------------------------------------------------ server + controller

def server(a):
    """Answers GETs; every --period s the controller pushes the keys that missed at least --threshold times."""
    key = bytes.fromhex(a.key)
    snd = inband.Sender(SENDER_ID, key, a.variant, auth=a.build != "noauth")
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("10.0.0.2", inband.KV_PORT))
    sock.settimeout(0.01)
    ctl = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    misses = collections.Counter()
    cached = set()
    end = time.monotonic() + a.duration + 1
    tick = time.monotonic() + a.period
    pushed = sent = 0
    while time.monotonic() < end:
        try:
            data, peer = sock.recvfrom(256)
            r = inband.parse_kv(data)
            if r["op"] == inband.KV_GET:
                misses[r["key"]] += 1
                sock.sendto(inband.kv_payload(inband.KV_REPLY, r["key"], value_of(r["key"]), r["req_id"], inband.KV_SERVER), peer)
        except socket.timeout:
            pass
        if time.monotonic() >= tick:
            tick += a.period
            new = [k for k, n in misses.most_common(a.hot) if n >= a.threshold and k not in cached]
            if new:
                sent += snd.send(ctl, "10.0.0.254", [(k, value_of(k)) for k in new])
                cached.update(new)
                pushed += len(new)
            misses.clear()
    print(json.dumps({"pushed_keys": pushed, "control_packets": sent}))


# ------------------------------------------------------------------------------------------------ orchestration

SETUP = r"""
import pathlib, sys
from p4sec.infra.runtime import Switch, mac
from p4sec import inband
addr, out, mac_c, mac_s, key, variant = sys.argv[1:7]
sw = Switch(addr)
sw.push(pathlib.Path(out))
sw.table_insert("KvIngress.l2_fwd", {"hdr.ethernet.dst_addr": ("exact", mac(mac_c))}, "KvIngress.forward", {"port": 1})
sw.table_insert("KvIngress.l2_fwd", {"hdr.ethernet.dst_addr": ("exact", mac(mac_s))}, "KvIngress.forward", {"port": 2})
inband.provision(sw, 1, bytes.fromhex(key), variant)
sw.close()
print("ok")
"""

STATS = r"""
import json, pathlib, sys
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4sec.infra.runtime import Switch
from p4sec import inband
sw = Switch(sys.argv[1], election_id=2)
sw.p4info = p4info_pb2.P4Info()
text_format.Parse(pathlib.Path(sys.argv[2], "p4info.txtpb").read_text(), sw.p4info)
out = {n: sw.counter_read("KvIngress.ctl_stats", i)[0] for i, n in enumerate(inband.CTL_STATS)}
out["kv_hits"] = sw.counter_read("KvIngress.kv_stats", 0)[0]
out["kv_misses"] = sw.counter_read("KvIngress.kv_stats", 1)[0]
sw.close()
print(json.dumps(out))
"""


class Topology:
    def __init__(self):
        tag = uuid.uuid4().hex[:5]
        self.c, self.m, self.s = f"kvC{tag}", f"kvM{tag}", f"kvS{tag}"
        self.hc, self.sc, self.ss, self.hs = f"hc{tag}", f"sc{tag}", f"ss{tag}", f"hs{tag}"
        for n in (self.c, self.m, self.s):
            sh("ip", "netns", "add", n)
            ns(n, "ip", "link", "set", "lo", "up")
        sh("ip", "link", "add", self.hc, "netns", self.c, "type", "veth", "peer", "name", self.sc, "netns", self.m)
        sh("ip", "link", "add", self.hs, "netns", self.s, "type", "veth", "peer", "name", self.ss, "netns", self.m)
        for n, i in ((self.c, self.hc), (self.m, self.sc), (self.m, self.ss), (self.s, self.hs)):
            ns(n, "ip", "link", "set", i, "up")
        ns(self.c, "ip", "addr", "add", "10.0.0.1/24", "dev", self.hc)
        ns(self.s, "ip", "addr", "add", "10.0.0.2/24", "dev", self.hs)
        self.mac_c = ns(self.c, "cat", f"/sys/class/net/{self.hc}/address").stdout.strip()
        self.mac_s = ns(self.s, "cat", f"/sys/class/net/{self.hs}/address").stdout.strip()
        ns(self.c, "ip", "neigh", "replace", "10.0.0.2", "lladdr", self.mac_s, "dev", self.hc)
        ns(self.s, "ip", "neigh", "replace", "10.0.0.1", "lladdr", self.mac_c, "dev", self.hs)
        ns(self.s, "ip", "neigh", "replace", "10.0.0.254", "lladdr", SWITCH_MAC, "dev", self.hs)

    def close(self):
        for n in (self.c, self.m, self.s):
            sh("ip", "netns", "del", n, check=False)


def run_build(build, a, p4sec_bin):
    out = pathlib.Path(f"/tmp/p4sec-kvcase-{os.getpid()}-{build}")
    r = sh(p4sec_bin, "compile", str(ROOT / "programs" / "inband_kv_cache.p4"), "-o", str(out), *BUILDS[build], check=False)
    if r.returncode:
        raise RuntimeError(f"compile ({build}): {r.stderr}")
    key = os.urandom(16).hex()
    t = Topology()
    port = free_port()
    sw = subprocess.Popen(["ip", "netns", "exec", t.m, p4sec_bin, "switch", "--grpc", f"127.0.0.1:{port}", "--port", f"1={t.sc}",
                           "--port", f"2={t.ss}"], stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        r = ns(t.m, sys.executable, "-c", SETUP, f"127.0.0.1:{port}", str(out), t.mac_c, t.mac_s, key, a.variant, check=False)
        if r.stdout.strip() != "ok":
            raise RuntimeError(f"switch setup ({build}): {r.stderr}")
        common = ["--duration", str(a.duration), "--shift-every", str(a.shift_every), "--keys", str(a.keys), "--hot", str(a.hot),
                  "--rate", str(a.rate), "--zipf", str(a.zipf), "--bin", str(a.bin), "--period", str(a.period),
                  "--threshold", str(a.threshold), "--variant", a.variant, "--build", build, "--key", key]
        env = dict(os.environ, P4SEC_BIN=p4sec_bin)
        srv = subprocess.Popen(["ip", "netns", "exec", t.s, sys.executable, "-m", "bench.kvcase", "--role", "server", *common],
                               stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
        time.sleep(0.3)
        cli = subprocess.run(["ip", "netns", "exec", t.c, sys.executable, "-m", "bench.kvcase", "--role", "client", *common],
                             capture_output=True, text=True, timeout=a.duration + 60, cwd=ROOT, env=env)
        srv_out, _ = srv.communicate(timeout=a.duration + 30)
        stats = json.loads(ns(t.m, sys.executable, "-c", STATS, f"127.0.0.1:{port}", str(out)).stdout)
    finally:
        sw.terminate()
        sw.wait(timeout=10)
        t.close()
    series = [json.loads(x) for x in cli.stdout.splitlines() if x.startswith("[")]
    return {"build": build, "label": LABEL[build], "series": series, "controller": json.loads(srv_out.strip().splitlines()[-1]),
            "switch": stats}


def miss_ratio(row):
    _t, _sent, hits, server = row
    return server / (hits + server) if hits + server else None


def summarize(res, a):
    rows = [(r[0], miss_ratio(r)) for r in res["series"] if miss_ratio(r) is not None]
    after = [m for t, m in rows if t % a.shift_every < 0.5 and t >= a.shift_every]
    settled = [m for t, m in rows if t % a.shift_every >= a.shift_every / 2 and t >= a.shift_every]
    mean = lambda xs: sum(xs) / len(xs) if xs else None
    return {"mean": mean([m for _, m in rows]), "first_0.5s_after_shifts": mean(after), "second_half_of_epochs": mean(settled)}


def plot(results, a, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("bench.kvcase: matplotlib is not installed; no plot", file=sys.stderr)
        return False
    fig, ax = plt.subplots(figsize=(9, 4))
    for res in results:
        pts = [(r[0], miss_ratio(r)) for r in res["series"] if miss_ratio(r) is not None]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], label=res["label"], linewidth=1)
    for x in range(1, int(a.duration / a.shift_every) + 1):
        ax.axvline(x * a.shift_every, color="grey", linestyle=":", linewidth=0.8)
    ax.set_xlabel("time (s); dotted: hot set shifts")
    ax.set_ylabel("cache miss ratio")
    ax.set_ylim(0, 1)
    ax.set_title("in-network KV cache with in-band updates (p4sec, inband_kv_cache.p4)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--role", choices=["run", "client", "server"], default="run", help=argparse.SUPPRESS)
    ap.add_argument("--builds", default="noauth,rpp1,extern")
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--shift-every", type=float, default=5.0)
    ap.add_argument("--keys", type=int, default=10000)
    ap.add_argument("--hot", type=int, default=100, help="keys that move to the top ranks at each shift")
    ap.add_argument("--rate", type=float, default=2000.0, help="GETs per second")
    ap.add_argument("--zipf", type=float, default=0.99)
    ap.add_argument("--bin", type=float, default=0.25, help="seconds per miss-ratio sample")
    ap.add_argument("--period", type=float, default=0.25, help="controller period in seconds")
    ap.add_argument("--threshold", type=int, default=2, help="misses in a period that make a key worth caching")
    ap.add_argument("--variant", default="aead128", choices=list(inband.VARIANTS))
    ap.add_argument("--build", default="rpp1", help=argparse.SUPPRESS)
    ap.add_argument("--key", help=argparse.SUPPRESS)
    ap.add_argument("--json")
    ap.add_argument("--plot")
    ap.add_argument("--p4sec", default=str(ROOT / "target" / "release" / "p4sec"))
    a = ap.parse_args(argv)
    if a.role == "client":
        return client(a)
    if a.role == "server":
        return server(a)
    if os.geteuid() != 0:
        sys.exit("bench.kvcase: needs root (network namespaces)")
    builds = a.builds.split(",")
    for b in builds:
        if b not in BUILDS:
            sys.exit(f"bench.kvcase: unknown build {b!r} ({', '.join(BUILDS)})")
    results = [run_build(b, a, a.p4sec) for b in builds]
    print(f"in-network KV cache, {a.keys} keys, Zipf {a.zipf}, {a.rate:g} GETs/s, {a.hot} keys shift every {a.shift_every:g} s, "
          f"controller every {a.period:g} s, {a.variant}")
    print("miss ratio per second:")
    print(f"  {'t (s)':>6} " + " ".join(f"{b:>10}" for b in builds))
    per_sec = []
    for res in results:
        d = collections.defaultdict(lambda: [0, 0])
        for t, _s, h, m in res["series"]:
            d[int(t)][0] += h
            d[int(t)][1] += m
        per_sec.append(d)
    for sec in range(int(a.duration)):
        cells = []
        for d in per_sec:
            h, m = d.get(sec, [0, 0])
            cells.append(f"{m / (h + m):>10.3f}" if h + m else f"{'-':>10}")
        print(f"  {sec:>6} " + " ".join(cells))
    print("summary:")
    for res in results:
        res["summary"] = summarize(res, a)
        s, c, w = res["summary"], res["controller"], res["switch"]
        fmt = lambda x: f"{x:.3f}" if x is not None else "-"
        print(f"  {res['label']:<34} mean {fmt(s['mean'])}, first 0.5 s after shifts {fmt(s['first_0.5s_after_shifts'])}, "
              f"settled {fmt(s['second_half_of_epochs'])}; {c['control_packets']} control packets sent, "
              f"{w['accepted']} accepted, {w['bad_tag']} bad tag, {w['replayed']} replayed, {w['passes']} P4EAD passes")
    if a.plot and plot(results, a, a.plot):
        print(f"plot: {a.plot}")
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps({"params": {k: v for k, v in vars(a).items() if k not in ("key", "role")},
                                                    "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
