"""Forwarding between two veth pairs in network namespaces: the p4sec switch running the IPv4 router
program against the Linux kernel forwarding the same frames between the same namespaces, in one run.

    python -m bench.veth [--seconds S] [--sizes 64,1500] [--workers 1,2] [--flows 16]
                               [--port-kind afpacket,xdp] [--lossless-steps 6] [--json FILE] [--p4sec PATH]
                               [--engines closure,native] [--compare LABEL=PATH] [--rounds N]

Topology: namespace A (h1, 10.0.1.1) -- veth -- namespace M (s1 | s2) -- veth -- namespace B (h2, 10.0.2.2).
In namespace M either the kernel routes (ip_forward=1, addresses on s1/s2) or `p4sec switch` owns s1/s2
(ip_forward=0). The sender is `trafgen -P 1` (Debian's netsniff-ng; scripts/setup installs it), one process
pinned to CPU 0, sending pre-built UDP frames (`--flows` source ports, so that several workers get work);
the switch is pinned to the other CPUs. `--port-kind` names how the switch opens s1/s2: `afpacket` (`--port
N=IFACE`, packet sockets with memory-mapped rings) and/or `xdp` (`--port N=xdp:IFACE`, AF_XDP sockets; where
the switch falls back to the packet socket the row says so). Per frame size, and for p4sec per port kind and
worker count, it prints:
- the rate delivered to h2 (its rx counter; h2 drops the frames with an XDP program, or at its nftables ingress
  hook with `--sink nft` or without xdp-tools, so its own stack costs neither side anything) with the sender at full speed, kernel and p4sec;
- the switch's CPU time per forwarded frame (the sum over its threads of /proc/PID/task/*/schedstat), split
  into its own code (user) and the kernel's work in its threads (system calls, and the softirqs they run: veth
  transmit and h2's receive) by the threads' user/system ticks, and how busy that kept it (cores);
- the heap allocations the switch's workers made during the full-speed window (their
  `p4sec_worker_heap_allocations_total`; none per frame in steady state is the target);
- the highest rate without loss with an evenly paced sender (trafgen --rate; bisection over
  `--lossless-steps` runs): every frame h1 sent arrived at h2.
Switches compared in one run: `--engines closure,native` runs the switch once per engine (`p4sec --engine E
switch`), `--compare LABEL=PATH` adds another p4sec build (for instance the code before a change, run with its
own defaults); with `--rounds N` every switch is measured N times, the switches taking turns round by round, and
each figure is the median over the rounds (the lossless search runs in the first round only).
Frames above 1514 bytes (e.g. `--sizes 1500,9000`) raise every link's MTU to carry the largest (jumbo frames:
xdp ports then use multi-buffer AF_XDP sockets) and give trafgen its jumbo ring slots (`-J`).
Needs root.
"""
import argparse
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time
import uuid

from bench.builds import compared
from p4sec.infra.netns import free_port, ns, sh  # noqa: F401 (free_port: used by tests)

ROOT = pathlib.Path(__file__).resolve().parents[1]

CONTROL = r"""
import pathlib, sys
from p4sec.infra.runtime import Switch, ip, mac
addr, out, dst_mac, src_mac = sys.argv[1:5]
sw = Switch(addr)
sw.push(pathlib.Path(out))
sw.table_insert("RouterIngress.ipv4_lpm", {"hdr.ipv4.dst_addr": ("lpm", ip("10.0.2.0"), 24)}, "RouterIngress.set_nhop",
                {"dst_mac": mac(dst_mac), "src_mac": mac(src_mac), "port": 2})
sw.close()
print("ok")
"""


# the sum of the workers' heap allocations from the switch's /metrics (port argv[1]); nothing when absent
METRICS = r"""
import sys, urllib.request
text = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=5).read().decode()
got = [int(l.rsplit(" ", 1)[1]) for l in text.splitlines() if l.startswith("p4sec_worker_heap_allocations_total{")]
print(sum(got) if got else "")
"""


def mac_of(name, iface):
    return ns(name, "cat", f"/sys/class/net/{iface}/address").stdout.strip()


def counter(name, iface, what):
    return int(ns(name, "cat", f"/sys/class/net/{iface}/statistics/{what}").stdout)


def xdp_drop_object():
    """libxdp's xdp-filter program that drops every frame (policy deny, no rules), where xdp-tools is
    installed: an XDP program to load with `ip link ... xdp obj`, without a BPF compiler."""
    for d in ("/usr/lib/x86_64-linux-gnu/bpf", "/usr/lib/aarch64-linux-gnu/bpf", "/usr/lib/bpf", "/usr/local/lib/bpf"):
        f = pathlib.Path(d) / "xdpfilt_dny_eth.o"
        if f.exists():
            return f
    return None


class Topology:
    def __init__(self, sink="nft", mtu=1500, queues=1):
        """`queues`: receive and transmit queues of every veth (one AF_XDP socket per worker needs one each)."""
        self.mtu = mtu
        tag = uuid.uuid4().hex[:5]
        self.a, self.m, self.b = f"pbA{tag}", f"pbM{tag}", f"pbB{tag}"
        self.h1, self.s1, self.s2, self.h2 = f"h1{tag}", f"s1{tag}", f"s2{tag}", f"h2{tag}"
        for n in (self.a, self.m, self.b):
            sh("ip", "netns", "add", n)
            ns(n, "ip", "link", "set", "lo", "up")
            # no IPv6 neighbour discovery or MLD frames in the counters
            for c in ("all", "default"):
                ns(n, "sysctl", "-qw", f"net.ipv6.conf.{c}.disable_ipv6=1")
        q = ["numtxqueues", str(queues), "numrxqueues", str(queues)]
        sh("ip", "link", "add", self.h1, "netns", self.a, *q, "type", "veth", "peer", "name", self.s1, "netns", self.m, *q)
        sh("ip", "link", "add", self.h2, "netns", self.b, *q, "type", "veth", "peer", "name", self.s2, "netns", self.m, *q)
        for n, i in ((self.a, self.h1), (self.m, self.s1), (self.m, self.s2), (self.b, self.h2)):
            if mtu != 1500:
                ns(n, "ip", "link", "set", i, "mtu", str(mtu))
            ns(n, "ip", "link", "set", i, "up")
        ns(self.a, "ip", "addr", "add", "10.0.1.1/24", "dev", self.h1)
        ns(self.b, "ip", "addr", "add", "10.0.2.2/24", "dev", self.h2)
        self.sink = self.drop_all(sink)
        self.mac = {i: mac_of(n, i) for n, i in ((self.a, self.h1), (self.m, self.s1), (self.m, self.s2), (self.b, self.h2))}

    def drop_all(self, sink):
        """h2 counts what arrives (its rx counter is s2's transmit count) and drops it: its UDP stack (and the
        ICMP port unreachable it would send back) would otherwise be charged to whoever sent to s2 (the switch's
        threads, or the sender's in the kernel run), not to forwarding. `xdp`: an XDP program on h2 drops every
        frame (the cheapest sink veth has); `nft`: a drop rule at the netdev ingress hook (nftables). Where the
        XDP program cannot be loaded, nft. Returns the sink used."""
        obj = xdp_drop_object() if sink == "xdp" else None
        if obj is not None:
            r = ns(self.b, "ip", "link", "set", "dev", self.h2, "xdpdrv", "obj", str(obj), "sec", "xdp", check=False)
            if r.returncode == 0:
                return "xdp"
        ns(self.b, "nft", "add", "table", "netdev", "bench")
        ns(self.b, "nft", "add", "chain", "netdev", "bench", "in", f"{{ type filter hook ingress device {self.h2} priority 0; }}")
        ns(self.b, "nft", "add", "rule", "netdev", "bench", "in", "drop")
        return "nft"

    def kernel(self, on):
        if on:
            ns(self.m, "ip", "addr", "add", "10.0.1.254/24", "dev", self.s1)
            ns(self.m, "ip", "addr", "add", "10.0.2.254/24", "dev", self.s2)
            ns(self.m, "ip", "neigh", "replace", "10.0.2.2", "lladdr", self.mac[self.h2], "dev", self.s2)
            ns(self.m, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        else:
            ns(self.m, "sysctl", "-qw", "net.ipv4.ip_forward=0")
            ns(self.m, "ip", "addr", "flush", "dev", self.s1)
            ns(self.m, "ip", "addr", "flush", "dev", self.s2)

    def close(self):
        for n in (self.a, self.m, self.b):
            sh("ip", "netns", "del", n, check=False)


def frames(t, size, flows):
    """`flows` UDP frames of `size` bytes (without the FCS) from h1 to h2, one per source port."""
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw
    out = []
    for k in range(flows):
        base = Ether(dst=t.mac[t.s1], src=t.mac[t.h1]) / IP(src="10.0.1.1", dst="10.0.2.2", ttl=64) / UDP(sport=4242 + k, dport=9)
        out.append(bytes(base / Raw(bytes(max(0, size - len(base))))))
    return out


def trafgen_config(frames):
    """A trafgen configuration sending `frames` in turn (static bytes: no per-frame work in the sender)."""
    return "\n".join("{ " + ", ".join(f"0x{b:02x}" for b in f) + " }" for f in frames) + "\n"


def cpus():
    return os.cpu_count() or 1


class Sender:
    """trafgen in namespace A on h1, in its own process group (killed as a group)."""

    def __init__(self, t, cfg, rate=None):
        cmd = ["ip", "netns", "exec", t.a, "trafgen", "-o", t.h1, "-i", str(cfg), "-P", "1", "-C"]
        if t.mtu > 2048 - 14:
            # ring slots for frames above trafgen's default 2048 bytes
            cmd.append("-J")
        if rate:
            cmd += ["-b", f"{int(rate)}pps"]
        self.p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)

    def stop(self):
        if self.p.poll() is None:
            try:
                os.killpg(self.p.pid, signal.SIGINT)
                self.p.wait(timeout=5)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(self.p.pid, signal.SIGKILL)
                self.p.wait()
        return self.p.returncode

    def check(self):
        if self.p.poll() is not None:
            raise RuntimeError(f"trafgen ended early (rc {self.p.returncode}): {self.p.stderr.read().decode(errors='replace')[-400:]}")


def cpu_ns(pid):
    """The CPU time of every thread of process `pid` so far, in nanoseconds."""
    total = 0
    for task in pathlib.Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def cpu_ticks(pid):
    """User and system (kernel) CPU time of every thread of process `pid` so far, in clock ticks
    (/proc/PID/task/*/stat): their ratio splits the schedstat total into the switch's own code and the
    kernel's work on its behalf (system calls, and the softirqs that run in its threads: veth transmit and
    the receiving side's processing)."""
    user = system = 0
    for task in pathlib.Path(f"/proc/{pid}/task").iterdir():
        try:
            f = (task / "stat").read_text().rsplit(")", 1)[1].split()
            user, system = user + int(f[11]), system + int(f[12])
        except (OSError, ValueError, IndexError):
            pass
    return user, system


def heap_allocations(netns, mport):
    """The heap allocations the switch's workers have made so far (its /metrics, served in namespace `netns`;
    `None` without the figure)."""
    r = ns(netns, sys.executable, "-c", METRICS, str(mport), check=False, timeout=20)
    return int(r.stdout) if r.returncode == 0 and r.stdout.strip().isdigit() else None


def full_speed(t, cfg, seconds, pid=None, mport=None):
    """The sender at full speed: offered and delivered frames per second, and the switch's CPU nanoseconds
    over a window of `seconds`, and the heap allocations its workers made in it (with `mport`, its metrics
    port). The offered rate is h1's over the window; the delivered rate is that times the
    share of all frames sent that reached h2 once the sender stopped and the rings drained (a window of h2's
    counter alone would also count frames a ring held from before it)."""
    tx_a, rx_a = counter(t.a, t.h1, "tx_packets"), counter(t.b, t.h2, "rx_packets")
    s = Sender(t, cfg)
    try:
        time.sleep(0.3)
        s.check()
        h0 = heap_allocations(t.m, mport) if mport else None
        tx0 = counter(t.a, t.h1, "tx_packets")
        c0, t0 = (cpu_ns(pid) if pid else 0), time.monotonic()
        u0, s0 = cpu_ticks(pid) if pid else (0, 0)
        time.sleep(seconds)
        tx1 = counter(t.a, t.h1, "tx_packets")
        c1, t1 = (cpu_ns(pid) if pid else 0), time.monotonic()
        u1, s1 = cpu_ticks(pid) if pid else (0, 0)
        h1 = heap_allocations(t.m, mport) if mport else None
    finally:
        s.stop()
    time.sleep(0.3)
    sent, got = counter(t.a, t.h1, "tx_packets") - tx_a, counter(t.b, t.h2, "rx_packets") - rx_a
    dt = t1 - t0
    offered = (tx1 - tx0) / dt
    ticks = (u1 - u0) + (s1 - s0)
    user_share = (u1 - u0) / ticks if ticks else None
    allocs = h1 - h0 if h0 is not None and h1 is not None else None
    return offered, offered * min(1.0, got / sent if sent else 0.0), c1 - c0, dt, user_share, allocs


def paced(t, cfg, rate, seconds):
    """Send at `rate` frames per second for `seconds`: (frames sent, frames lost, rate achieved)."""
    tx0, rx0 = counter(t.a, t.h1, "tx_packets"), counter(t.b, t.h2, "rx_packets")
    s = Sender(t, cfg, rate)
    t0 = time.monotonic()
    try:
        time.sleep(seconds)
        s.check()
    finally:
        s.stop()
        dt = time.monotonic() - t0
    time.sleep(0.2)
    sent = counter(t.a, t.h1, "tx_packets") - tx0
    got = counter(t.b, t.h2, "rx_packets") - rx0
    return sent, sent - got, sent / dt


def lossless(t, cfg, hi, seconds, steps):
    """The highest paced rate (frames per second) below `hi` with nothing lost, by bisection; with it, the
    highest rate the paced sender reached at all."""
    lo, best, reached = 0.0, 0.0, 0.0
    for _ in range(steps):
        rate = (lo + hi) / 2
        sent, lost, achieved = paced(t, cfg, rate, seconds)
        reached = max(reached, achieved)
        if lost <= 0 and sent > 0:
            lo, best = rate, max(best, achieved)
        else:
            hi = rate
    return best, reached


def switches(args, parser):
    """The switches the run compares, in the order they take turns: (label, command prefix, binary). Without
    `--engines` or `--compare`, the one binary with its default engine, labelled `p4sec`."""
    out = []
    for e in [e.strip() for e in args.engines.split(",") if e.strip()]:
        if e not in ("closure", "native"):
            parser.error(f"--engines: unknown engine `{e}` (closure or native)")
        out.append((f"p4sec/{e}", [args.p4sec, "--engine", e], args.p4sec))
    if not out:
        out.append(("p4sec", [args.p4sec], args.p4sec))
    for label, path in compared(args.compare, [o[0] for o in out], parser):
        out.append((label, [path], path))
    return out


def median(xs):
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def measure(t, cmd, prog, kind, w, sizes, cfgs, kern, args, switch_cpus, gen, lossless_steps):
    """One switch (command prefix `cmd`, compiled program `prog`) with `w` workers on `kind` ports: one row per
    frame size."""
    rows = []
    port, mport = free_port(), free_port()
    rt = ["chrt", "-f", "10"] if args.rt else []
    pre = "xdp:" if kind == "xdp" else ""
    log = gen / f"switch-{kind}-{w}.log"
    sw = subprocess.Popen(["ip", "netns", "exec", t.m, "taskset", "-c", switch_cpus, *rt, *cmd, "switch", "--grpc",
                           f"127.0.0.1:{port}", "--metrics", f"127.0.0.1:{mport}", "--workers", str(w), "--port", f"1={pre}{t.s1}",
                           "--port", f"2={pre}{t.s2}"],
                          stderr=open(log, "w"))
    try:
        time.sleep(0.5)
        r = ns(t.m, sys.executable, "-c", CONTROL, f"127.0.0.1:{port}", str(prog), t.mac[t.h2], t.mac[t.s2])
        assert r.stdout.strip() == "ok", r.stderr
        # what the ports really are: an xdp port may have fallen back to the packet socket
        used = "xdp" if "(AF_XDP" in log.read_text() else "afpacket"
        pace_seconds = max(0.5, min(args.seconds, 2.0))
        for s in sizes:
            offered, got, cpu, dt, user_share, allocs = full_speed(t, cfgs[s], args.seconds, sw.pid, mport)
            per_frame = cpu / (got * dt) if got else None
            best, reached = lossless(t, cfgs[s], max(got, 1000) * 1.2, pace_seconds, lossless_steps) if lossless_steps else (None, None)
            k_off, k_got = kern[s][0], kern[s][1]
            rows.append({
                "size": s, "workers": w, "port_kind": kind, "port_used": used,
                "offered_pps_kernel_run": k_off, "kernel_pps": k_got,
                "offered_pps_p4sec_run": offered, "p4sec_pps": got,
                "p4sec_over_kernel": got / k_got if k_got else 0.0,
                "switch_cpu_ns_per_frame": per_frame,
                "switch_user_ns_per_frame": per_frame * user_share if per_frame and user_share is not None else None,
                "switch_kernel_ns_per_frame": per_frame * (1 - user_share) if per_frame and user_share is not None else None,
                "switch_cores_busy": cpu / (dt * 1e9),
                "heap_allocations": allocs,
                "heap_allocations_per_frame": allocs / (got * dt) if allocs is not None and got else None,
                "lossless_pps": best, "paced_sender_max_pps": reached,
            })
    finally:
        sw.terminate()
        sw.wait(timeout=10)
    return rows


# the figures a row with several rounds gives as medians (the others are the first round's)
MEDIANS = ("offered_pps_p4sec_run", "p4sec_pps", "p4sec_over_kernel", "switch_cpu_ns_per_frame", "switch_user_ns_per_frame",
           "switch_kernel_ns_per_frame", "switch_cores_busy", "heap_allocations", "heap_allocations_per_frame")


def merge_rounds(rounds):
    """One row from a cell's rows of every round: the medians of MEDIANS, with each round's delivered rate and
    user CPU per frame kept under `per_round`."""
    row = dict(rounds[0])
    for k in MEDIANS:
        row[k] = median([r[k] for r in rounds])
    row["rounds"] = len(rounds)
    row["per_round"] = [{"p4sec_pps": r["p4sec_pps"], "switch_user_ns_per_frame": r["switch_user_ns_per_frame"]} for r in rounds]
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0, help="length of a full-speed measurement")
    ap.add_argument("--sizes", default="64,1500", help="frame sizes in bytes, comma-separated")
    ap.add_argument("--workers", default="1,2", help="switch worker counts, comma-separated")
    ap.add_argument("--flows", type=int, default=16, help="UDP flows (source ports) the sender cycles through")
    ap.add_argument("--port-kind", default="afpacket",
                    help="how the switch opens its ports, comma-separated: afpacket (packet sockets) and/or xdp (AF_XDP)")
    ap.add_argument("--lossless-steps", type=int, default=6, help="paced runs per lossless-rate search (0: none)")
    ap.add_argument("--rt", action="store_true",
                    help="run the switch with real-time priority (chrt -f 10), so that other load on the machine does not "
                         "stall it: with its threads waiting for a CPU for longer than its receive ring lasts, frames are lost "
                         "at any rate")
    ap.add_argument("--sink", choices=("xdp", "nft"), default="nft",
                    help="how h2 drops what it receives: an XDP program (libxdp's xdp-filter object; nft where it cannot "
                         "be loaded) or an nftables rule at the netdev ingress hook")
    ap.add_argument("--json", help="write the figures to this file")
    ap.add_argument("--p4sec", default=str(ROOT / "target" / "release" / "p4sec"))
    ap.add_argument("--engines", default="",
                    help="run the switch once per engine, comma-separated: closure and/or native (default: the binary's default)")
    ap.add_argument("--compare", action="append", default=[], metavar="LABEL=PATH",
                    help="also measure another p4sec build, run with its own defaults (repeatable)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="measure every switch this many times, taking turns; figures are medians over the rounds")
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error("--rounds: at least 1")
    variants = switches(args, ap)
    if os.geteuid() != 0:
        sys.exit("bench.veth: needs root (network namespaces)")
    if shutil.which("trafgen") is None:
        sys.exit("bench.veth: trafgen not found (apt-get install netsniff-ng; scripts/setup installs it)")
    sizes = [int(x) for x in args.sizes.split(",")]
    workers = [int(x) for x in args.workers.split(",")]
    kinds = [k.strip() for k in args.port_kind.split(",") if k.strip()]
    for k in kinds:
        if k not in ("afpacket", "xdp"):
            sys.exit(f"bench.veth: unknown port kind `{k}` (afpacket or xdp)")
    gen = pathlib.Path(f"/tmp/p4sec-bench-veth-{os.getpid()}-trafgen")
    gen.mkdir(exist_ok=True)
    # each build compiles the program itself: its compiled form is its own
    progs = {}
    for _, _, binary in variants:
        if binary not in progs:
            progs[binary] = pathlib.Path(f"/tmp/p4sec-bench-veth-{os.getpid()}-{len(progs)}")
            subprocess.run([binary, "compile", str(ROOT / "programs" / "ipv4_router.p4"), "-o", str(progs[binary])],
                           check=True, capture_output=True)
    switch_cpus = f"1-{cpus() - 1}" if cpus() > 1 else "0"
    # frames above 1514 bytes (jumbo frames): every link's MTU raised to carry the largest
    # as many queues per veth as the most workers: each worker's AF_XDP socket takes one receive queue
    t = Topology(args.sink, mtu=max(1500, max(sizes) - 14), queues=max(workers))
    cells = {}
    try:
        cfgs = {}
        for s in sizes:
            cfgs[s] = gen / f"frames{s}.cfg"
            cfgs[s].write_text(trafgen_config(frames(t, s, args.flows)))
        t.kernel(True)
        kern = {s: full_speed(t, cfgs[s], args.seconds)[:2] for s in sizes}
        t.kernel(False)
        for rnd in range(args.rounds):
            # the switches take turns: each round starts with the next one
            order = variants[rnd % len(variants):] + variants[:rnd % len(variants)]
            for kind, w in [(k, w) for k in kinds for w in workers]:
                for label, cmd, binary in order:
                    steps = args.lossless_steps if rnd == 0 else 0
                    for r in measure(t, cmd, progs[binary], kind, w, sizes, cfgs, kern, args, switch_cpus, gen, steps):
                        r["switch"] = label
                        cells.setdefault((label, kind, w, r["size"]), []).append(r)
    finally:
        t.close()
    rows = [merge_rounds(cells[(label, kind, w, s)]) for kind in kinds for w in workers for s in sizes for label, _, _ in variants]
    rounds = f", median of {args.rounds} rounds (switches alternated)" if args.rounds > 1 else ""
    print(f"forwarding between veth pairs in namespaces: sender trafgen -P 1 on CPU 0 ({args.flows} UDP flows), "
          f"switch on CPUs {switch_cpus}{' (SCHED_FIFO)' if args.rt else ''}, {args.seconds:g} s per full-speed cell{rounds}; "
          f"h2 drops at {t.sink}; load average {os.getloadavg()[0]:.1f}")
    wide = max(len(v[0]) for v in variants)
    print(f"  {'switch':>{wide}} {'frame':>6} {'ports':>14} {'wk':>3} {'kernel':>9} {'offered':>9} {'p4sec':>9} {'ratio':>6} {'ns/frame':>9} "
          f"{'user':>5} {'kern':>5} {'busy':>5} {'lossless':>9} {'paced max':>9} {'allocs':>6}")
    for r in rows:
        ns_pf = f"{r['switch_cpu_ns_per_frame']:.0f}" if r["switch_cpu_ns_per_frame"] else "-"
        us = f"{r['switch_user_ns_per_frame']:.0f}" if r["switch_user_ns_per_frame"] else "-"
        ks = f"{r['switch_kernel_ns_per_frame']:.0f}" if r["switch_kernel_ns_per_frame"] else "-"
        ll = f"{r['lossless_pps']/1e3:.0f}k" if r["lossless_pps"] is not None else "-"
        pm = f"{r['paced_sender_max_pps']/1e3:.0f}k" if r["paced_sender_max_pps"] is not None else "-"
        al = f"{r['heap_allocations']:.0f}" if r["heap_allocations"] is not None else "-"
        kind = r["port_kind"] if r["port_kind"] == r["port_used"] else f"{r['port_kind']}>{r['port_used']}"
        print(f"  {r['switch']:>{wide}} {r['size']:>5}B {kind:>14} {r['workers']:>3} {r['kernel_pps']/1e3:>8.0f}k "
              f"{r['offered_pps_p4sec_run']/1e3:>8.0f}k {r['p4sec_pps']/1e3:>8.0f}k {r['p4sec_over_kernel']:>6.2f} {ns_pf:>9} {us:>5} "
              f"{ks:>5} {r['switch_cores_busy']:>5.2f} {ll:>9} {pm:>9} {al:>6}")
    if len(variants) > 1:
        first = variants[0][0]
        print(f"  against {first}: the switch's own (user) CPU per frame and the delivered rate, each switch over {first}")
        for r in rows:
            if r["switch"] == first:
                continue
            base = next(b for b in rows if b["switch"] == first and (b["port_kind"], b["workers"], b["size"]) ==
                        (r["port_kind"], r["workers"], r["size"]))
            u = (f"{r['switch_user_ns_per_frame'] / base['switch_user_ns_per_frame']:.2f}x"
                 if r["switch_user_ns_per_frame"] and base["switch_user_ns_per_frame"] else "-")
            p = f"{r['p4sec_pps'] / base['p4sec_pps']:.2f}x" if base["p4sec_pps"] else "-"
            print(f"    {r['switch']:>{wide}} {r['size']:>5}B {r['port_kind']:>8} {r['workers']} wk: user ns/frame {u}, rate {p}")
    print("  switch: which p4sec (and engine) ran; ports: the switch's port kind (xdp>afpacket: AF_XDP asked for, the")
    print("  packet socket used, see the switch's log)")
    print("  kernel/p4sec: frames per second delivered to h2 (k = thousand) with the sender at full speed; offered: what h1")
    print("  sent in the p4sec run; ratio: p4sec/kernel; ns/frame: the switch's CPU time per forwarded frame, split into")
    print("  user (its own code) and kern (system calls and the softirqs run in its threads: veth transmit and h2's receive);")
    print("  busy: its CPU time per second (cores); lossless: highest evenly paced rate with no frame lost; paced max: the")
    print("  highest rate the paced sender reached; allocs: heap allocations the switch's workers made during the full-speed")
    print("  window (target 0: none per frame in steady state)")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"benchmark": "veth_forwarding", "seconds": args.seconds,
                                                       "sender": "trafgen -P 1", "flows": args.flows, "rt": args.rt, "sink": t.sink,
                                                       "rounds": args.rounds, "switches": [v[0] for v in variants],
                                                       "load_average": os.getloadavg()[0], "rows": rows}, indent=2))
    return rows


if __name__ == "__main__":
    main()
