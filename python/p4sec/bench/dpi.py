"""URL filtering benchmark (DeeP4R, issue #7): p4sec's URL filters against a netfilter baseline in the same run.

    python -m p4sec.bench.dpi [--domains 1,10,100,1000,5000] [--flows 1,10,100,1000,10000] [--seconds S]
                               [--samples N] [--rounds R] [--systems netfilter,fast,recirc] [--flow-domains N]
                               [--json FILE] [--plot FILE.png] [--p4sec PATH]

Topology: namespace A (h1) -- veth -- namespace M (s1 | s2) -- veth -- namespace B (h2). The systems under test
run in M, one after the other, on the same namespaces:

- netfilter: the kernel forwards (ip_forward=1, addresses on s1/s2) and the FORWARD chain holds one
  `-m string --algo bm --string DOMAIN -j DROP` rule per listed domain (loaded with iptables-restore);
- fast: `p4sec switch` owns s1/s2 and runs programs/url_filter_fast.p4 (the dfa_matcher extern; the automaton
  from p4sec.dpi is loaded at run time over P4Runtime as an ExternEntry);
- recirc: `p4sec switch` with programs/url_filter.p4, the paper's design (a cloned scanner recirculating one
  payload byte per pass through the byte_class/dfa tables, written over P4Runtime); lists whose DFA does not
  fit its dfa table (2^20 entries) are skipped.

With two or more cores the sender (this process) runs on the first, and the forwarding work of the system under
test on the second: the p4sec switch process, or for netfilter the kernel's receive processing of s1 (steered
there with RPS). The sender and the switch run at nice -10.

Traffic: HTTP GET requests (TCP to port 80, valid checksums) whose Host is NOT listed, so every packet is
inspected in full and forwarded. This process holds AF_PACKET sockets in A and in B (setns), so it sends and
timestamps frames itself:

- throughput: A writes prebuilt frames as fast as it can; the figure is the frames/s arriving at h2 (its rx
  counter, read over netlink at the start and end of a --seconds window after a short warm-up);
- added latency: single frames from A, each timestamped by the kernel on arrival at h2 (SO_TIMESTAMPNS);
  median and p99 over --samples frames, minus the same system's figures with an empty list (0 domains);
- flows: the same requests over N distinct 5-tuples (source addresses and ports) at --flow-domains domains.

Every figure is the median over --rounds rounds, each round going over all list sizes of a system, so a burst
of other load on the machine spoils one round rather than one list size. Each configuration is checked in
every round: a request for a listed domain must be dropped and an unlisted one forwarded, by every system, or
the benchmark stops with an error. Needs root, iproute2 and iptables.
"""
import argparse
import contextlib
import json
import os
import pathlib
import platform
import select
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import uuid

from .. import dpi
from ..netns import CommandError, in_netns, ns, sh

ROOT = pathlib.Path(__file__).resolve().parents[3]
SYSTEMS = ("netfilter", "fast", "recirc")
LABEL = {"netfilter": "netfilter (iptables -m string)", "fast": "p4sec fast (dfa_matcher)",
         "recirc": "p4sec recirculating (DeeP4R)"}
DFA_TABLE_SIZE = 1 << 20          # UfrIngress.dfa in programs/url_filter.p4
GOOD_HOSTS = ["www.example.org", "static.example.net", "docs.python.org", "intranet.example"]
SRC_IP, DST_IP = "10.0.1.1", "10.0.2.2"
SEQ_LAT, SEQ_BLOCK, SEQ_GOOD, SEQ_LOAD = 0x50000000, 0x60000000, 0x70000000, 0x10000000
NICE = -10
SO_TIMESTAMPNS = 35
ETH_P_ALL = 0x0003


class BenchError(Exception):
    pass


class LinkStats:
    """The rx packet counter of an interface in another namespace, over rtnetlink (RTM_GETLINK, IFLA_STATS64)."""

    def __init__(self, netns, iface):
        with in_netns(netns):
            self.index = socket.if_nametoindex(iface)
            self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)  # NETLINK_ROUTE
        self.sock.bind((0, 0))
        self.seq = 0

    def rx_packets(self):
        self.seq += 1
        req = struct.pack("=IHHII", 32, 18, 1, self.seq, 0) + struct.pack("=BxHiII", 0, 0, self.index, 0, 0)
        self.sock.send(req)
        while True:
            data = self.sock.recv(65536)
            _len, typ, _flags, seq, _pid = struct.unpack_from("=IHHII", data)
            if seq != self.seq:
                continue
            if typ != 16:  # RTM_NEWLINK
                raise BenchError(f"rtnetlink: unexpected reply type {typ}")
            off = 32
            while off + 4 <= len(data):
                alen, atype = struct.unpack_from("=HH", data, off)
                if alen < 4:
                    break
                if atype == 23:  # IFLA_STATS64: rx_packets first
                    return struct.unpack_from("=Q", data, off + 4)[0]
                off += (alen + 3) & ~3
            raise BenchError("rtnetlink: no IFLA_STATS64")

    def close(self):
        self.sock.close()


class Topology:
    """A (h1) -- M (s1 | s2) -- B (h2); no addresses in A and B, so B never answers the requests."""

    def __init__(self):
        tag = uuid.uuid4().hex[:5]
        self.a, self.m, self.b = f"bdA{tag}", f"bdM{tag}", f"bdB{tag}"
        self.h1, self.s1, self.s2, self.h2 = f"bh1{tag}", f"bs1{tag}", f"bs2{tag}", f"bh2{tag}"
        self.created = []
        self.cpus = sorted(os.sched_getaffinity(0))
        # with two or more cores: the sender (this process) on the first, the forwarding work of the system under
        # test (the p4sec switch process, or the kernel's softirq via RPS) on the second
        self.fwd_cpu = self.cpus[1] if len(self.cpus) > 1 else None
        try:
            self._create()
        except BaseException:
            self.close()
            raise

    def _create(self):
        for n in (self.a, self.m, self.b):
            sh("ip", "netns", "add", n)
            self.created.append(n)
            ns(n, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
            ns(n, "ip", "link", "set", "lo", "up")
        sh("ip", "link", "add", self.h1, "netns", self.a, "type", "veth", "peer", "name", self.s1, "netns", self.m)
        sh("ip", "link", "add", self.h2, "netns", self.b, "type", "veth", "peer", "name", self.s2, "netns", self.m)
        for n, i in ((self.a, self.h1), (self.m, self.s1), (self.m, self.s2), (self.b, self.h2)):
            ns(n, "ip", "link", "set", i, "up")
        self.mac = {i: ns(n, "cat", f"/sys/class/net/{i}/address").stdout.strip()
                    for n, i in ((self.a, self.h1), (self.m, self.s1), (self.m, self.s2), (self.b, self.h2))}

    def kernel_forwarding(self, on):
        if on:
            ns(self.m, "ip", "addr", "add", "10.0.1.254/24", "dev", self.s1)
            ns(self.m, "ip", "addr", "add", "10.0.2.254/24", "dev", self.s2)
            ns(self.m, "ip", "neigh", "replace", DST_IP, "lladdr", self.mac[self.h2], "dev", self.s2, "nud", "permanent")
            ns(self.m, "sysctl", "-qw", "net.ipv4.ip_forward=1")
            if self.fwd_cpu is not None:
                self.rps(format(1 << self.fwd_cpu, "x"))
        else:
            if self.fwd_cpu is not None:
                self.rps("0")
            ns(self.m, "sysctl", "-qw", "net.ipv4.ip_forward=0", check=False)
            ns(self.m, "ip", "addr", "flush", "dev", self.s1, check=False)
            ns(self.m, "ip", "addr", "flush", "dev", self.s2, check=False)

    def rps(self, mask):
        """Steer s1's receive processing (netfilter's work) to the CPUs in `mask` (receive packet steering)."""
        ns(self.m, "sh", "-c", f"echo {mask} > /sys/class/net/{self.s1}/queues/rx-0/rps_cpus")

    def close(self):
        for n in self.created:
            sh("ip", "netns", "del", n, check=False)


# ------------------------------------------------------------------------------------------------ frames

def _csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def http_request(host):
    return (f"GET /index.html HTTP/1.1\r\nHost: {host}\r\nUser-Agent: p4sec-bench/1.0\r\n"
            f"Accept: */*\r\nConnection: keep-alive\r\n\r\n").encode()


def http_frame(dst_mac, src_mac, host, seq, src_ip=SRC_IP, sport=40000, dst_ip=DST_IP):
    """Ethernet + IPv4 + TCP (PSH|ACK to port 80, valid checksums) + an HTTP GET for `host`; `seq` is the TCP
    sequence number, which the receiver uses to recognise the frame (bytes 38..41)."""
    payload = http_request(host)
    src, dst = socket.inet_aton(src_ip), socket.inet_aton(dst_ip)
    tcp = struct.pack("!HHIIBBHHH", sport, 80, seq & 0xFFFFFFFF, 1, 5 << 4, 0x18, 64240, 0, 0)
    pseudo = src + dst + struct.pack("!BBH", 0, 6, len(tcp) + len(payload))
    tcp = tcp[:16] + struct.pack("!H", _csum(pseudo + tcp + payload)) + tcp[18:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp) + len(payload), seq & 0xFFFF, 0x4000, 64, 6, 0, src, dst)
    ip = ip[:10] + struct.pack("!H", _csum(ip)) + ip[12:]
    eth = bytes.fromhex(dst_mac.replace(":", "")) + bytes.fromhex(src_mac.replace(":", "")) + b"\x08\x00"
    return eth + ip + tcp + payload


def flow_tuple(i):
    """The i-th distinct flow: source address 10.0.1.1-200, source port from 20000."""
    return f"10.0.1.{1 + i % 200}", 20000 + i // 200


def seq_of(frame):
    if len(frame) < 42 or frame[12:14] != b"\x08\x00" or frame[23] != 6:
        return None
    return struct.unpack_from("!I", frame, 38)[0]


def choose_good_host(all_domains):
    """A Host no listed domain occurs in (netfilter matches substrings anywhere) and the DFA does not block."""
    dfa = dpi.Dfa(all_domains, payload=True)
    for h in GOOD_HOSTS:
        req = http_request(h)
        if not any(d.encode() in req for d in all_domains) and not dfa.run(req):
            return h
    raise BenchError("no unlisted Host header found for the generated lists")


# ------------------------------------------------------------------------------------------------ traffic

class Traffic:
    """AF_PACKET sockets of this process: a sender on h1 (namespace A), a timestamping receiver on h2 (B)."""

    def __init__(self, t):
        self.t = t
        with in_netns(t.a):
            self.tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
            self.tx.bind((t.h1, 0))
        self.stats = LinkStats(t.b, t.h2)
        self.rx = None

    def open_rx(self):
        with in_netns(self.t.b):
            self.rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            self.rx.bind((self.t.h2, ETH_P_ALL))
        self.rx.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)

    def close_rx(self):
        if self.rx:
            self.rx.close()
            self.rx = None

    def close(self):
        self.close_rx()
        self.tx.close()
        self.stats.close()

    def drain(self):
        while select.select([self.rx], [], [], 0)[0]:
            self.rx.recv(4096)

    def wait_for(self, seq, timeout):
        """(kernel arrival time in ns or None, user time in ns) of the frame with `seq`, or None on timeout."""
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            if left <= 0 or not select.select([self.rx], [], [], left)[0]:
                return None
            data, anc, _flags, _addr = self.rx.recvmsg(4096, 64)
            now = time.time_ns()
            if seq_of(data) != seq:
                continue
            ts = None
            for level, typ, val in anc:
                if level == socket.SOL_SOCKET and typ == SO_TIMESTAMPNS and len(val) >= 16:
                    sec, nsec = struct.unpack("=qq", val[:16])
                    ts = sec * 1_000_000_000 + nsec
            return ts, now

    def latency(self, frames, timeout=1.0, gap=0.001):
        """One frame at a time; microseconds from the send call to the kernel's arrival stamp at h2."""
        self.open_rx()
        got, lost = [], 0
        try:
            for f in frames:
                self.drain()
                t0 = time.time_ns()
                self.tx.send(f)
                r = self.wait_for(seq_of(f), timeout)
                if r is None:
                    lost += 1
                    continue
                ts, user = r
                got.append(((ts if ts and t0 <= ts <= user else user) - t0) / 1000)
                time.sleep(gap)
        finally:
            self.close_rx()
        return got, lost

    def check_blocking(self, blocked_frames, good_frame, timeout=3.0):
        """Send requests for a listed domain, then an unlisted one: the latter must arrive, none of the former."""
        self.open_rx()
        try:
            self.drain()
            want = {seq_of(f) for f in blocked_frames}
            for f in blocked_frames:
                self.tx.send(f)
                time.sleep(0.002)
            self.tx.send(good_frame)
            good, arrived = seq_of(good_frame), set()
            end = time.monotonic() + timeout
            seen_good, settle = False, end
            while time.monotonic() < end:
                left = (end if not seen_good else min(end, settle)) - time.monotonic()
                if left <= 0 or not select.select([self.rx], [], [], left)[0]:
                    break
                s = seq_of(self.rx.recv(4096))
                if s in want:
                    arrived.add(s)
                if s == good and not seen_good:
                    seen_good, settle = True, time.monotonic() + 0.2
        finally:
            self.close_rx()
        host = {seq_of(f): f[f.index(b"Host: ") + 6:].split(b"\r")[0].decode() for f in blocked_frames}
        return {"blocked_sent": len(blocked_frames), "blocked_arrived": len(arrived), "unlisted_arrived": seen_good,
                "ok": seen_good and not arrived, "arrived_hosts": sorted(host[s] for s in arrived)}

    def settle(self, quiet=0.15, limit=20.0):
        """Wait until nothing arrives at h2 any more (queues in M drained after a load run)."""
        end, last = time.monotonic() + limit, self.stats.rx_packets()
        while time.monotonic() < end:
            time.sleep(quiet)
            now = self.stats.rx_packets()
            if now == last:
                return
            last = now

    def blast(self, frames, seconds, warmup=0.3, step=0.25):
        """Send `frames` round robin as fast as possible; frames/s arriving at h2 in a window of `seconds` after a
        warm-up (also per sub-window of `step` seconds, to show interference from other load on the machine)."""
        chunks = [frames[i:i + 16] for i in range(0, len(frames), 16)]
        send, clock = self.tx.send, time.perf_counter
        sent = errors = 0
        start = clock()
        t0 = rx0 = n0 = None
        marks = []
        while True:
            for chunk in chunks:
                for f in chunk:
                    try:
                        send(f)
                    except OSError:
                        errors += 1
                sent += len(chunk)
                now = clock()
                if t0 is None:
                    if now - start >= warmup:
                        rx0, n0, t0 = self.stats.rx_packets(), sent, clock()
                        marks.append((t0, rx0))
                elif now - marks[-1][0] >= step or now - t0 >= seconds:
                    marks.append((clock(), self.stats.rx_packets()))
                    if marks[-1][0] - t0 >= seconds:
                        t1, rx1 = marks[-1]
                        dt = t1 - t0
                        sub = [(b[1] - a[1]) / (b[0] - a[0]) for a, b in zip(marks, marks[1:])]
                        return {"pps": (rx1 - rx0) / dt, "offered_pps": (sent - n0) / dt, "forwarded": rx1 - rx0,
                                "sent": sent - n0, "send_errors": errors, "window_s": dt,
                                "sub_window_pps": [round(x, 1) for x in sub]}


# ------------------------------------------------------------------------------------------------ systems under test

CONTROL = r"""
import itertools, json, pathlib, sys, time
from p4.v1 import p4runtime_pb2
from p4sec import dpi
from p4sec.runtime import Switch

sw = Switch(sys.argv[1])

def insert_many(table, action, rows, batch=16384):
    # rows: (exact key values as ints, action parameters as ints), sent in Writes of `batch` updates
    t = next(x for x in sw.p4info.tables if x.preamble.name == table)
    a = next(x for x in sw.p4info.actions if x.preamble.name == action)
    fields = [(f.name, (f.bitwidth + 7) // 8) for f in t.match_fields]
    params = [p.name for p in a.params]
    rows, n = iter(rows), 0
    while True:
        with sw.collect() as ups:
            for keys, vals in itertools.islice(rows, batch):
                sw.table_insert(table, {name: ("exact", v.to_bytes(w, "big")) for (name, w), v in zip(fields, keys)},
                                action, dict(zip(params, vals)))
        if not ups:
            return n
        sw.write_async(ups).result()
        n += len(ups)

def domains(path):
    return dpi.read_list(pathlib.Path(path).read_text(), path) if path else []

def fast_setup(out):
    sw.push(pathlib.Path(out))
    sw.table_insert("UfIngress.uf_port", {"sm.ingress_port": ("exact", b"\x01")}, "UfIngress.forward", {"port": 2})
    sw.table_insert("UfIngress.uf_port", {"sm.ingress_port": ("exact", b"\x02")}, "UfIngress.forward", {"port": 1})
    return {}

def fast_load(path):
    dfa = dpi.Dfa(domains(path), payload=True)
    sw.extern_write("UfIngress.blocklist", "load", json.loads(dpi.automaton_json(dfa)))
    return {"states": dfa.states}

def recirc_load(out, path):
    # a fresh pipeline empties every table; then the tables of tests/dpi/test_url_filter_recirculate.py
    sw.push(pathlib.Path(out))
    dfa = dpi.Dfa(domains(path), payload=True)
    n = insert_many("UfrIngress.byte_class", "UfrIngress.set_class",
                    (((mode, b), (c,)) for mode, classes in ((0, dpi.CLASS_OF), (1, dpi.CLASS_OF_DNS))
                     for b, c in enumerate(classes) if c != 0))
    e = insert_many("UfrIngress.dfa", "UfrIngress.step", (((s, c), (t, int(b))) for s, c, t, b in dfa.entries()))
    insert_many("UfrEgress.dfa_start", "UfrEgress.set_start", [((0,), (dfa.delta[0].get(dpi.END, 0),)), ((1,), (0,))])
    insert_many("UfrIngress.ufr_port", "UfrIngress.forward", [((1,), (2,)), ((2,), (1,))])
    req = p4runtime_pb2.WriteRequest(device_id=sw.device_id)
    req.election_id.low = sw.election_id
    u = req.updates.add(type=p4runtime_pb2.Update.INSERT)
    c = u.entity.packet_replication_engine_entry.clone_session_entry
    c.session_id = 100
    c.replicas.add(egress_port=99)
    sw.stub.Write(req)
    return {"states": dfa.states, "dfa_entries": e, "byte_class_entries": n}

def counters(name, n):
    return {"counters": [sw.counter_read(name, i)[0] for i in range(n)]}

print(json.dumps({"ok": True}), flush=True)
for line in sys.stdin:
    cmd = json.loads(line)
    try:
        t0 = time.perf_counter()
        op = cmd.pop("op")
        r = {"fast_setup": fast_setup, "fast_load": fast_load, "recirc_load": recirc_load, "counters": counters}[op](**cmd)
        r["ok"], r["seconds"] = True, time.perf_counter() - t0
    except Exception as e:
        r = {"ok": False, "error": f"{type(e).__name__}: {e}"[:2000]}
    print(json.dumps(r), flush=True)
sw.close()
"""


class P4secSwitch:
    """`p4sec switch` owning s1/s2 in namespace M, and a control client (inside M) driven over a pipe."""

    def __init__(self, t, p4sec_bin, workdir):
        self.t, self.ctl, self.sw = t, None, None
        port = free_port_in(t.m)
        self.log_path = workdir / f"switch-{port}.log"
        self.log = open(self.log_path, "w")
        try:
            self.sw = subprocess.Popen(["ip", "netns", "exec", t.m, p4sec_bin, "switch", "--grpc", f"127.0.0.1:{port}",
                                        "--port", f"1={t.s1}", "--port", f"2={t.s2}"], stdout=self.log, stderr=self.log,
                                       preexec_fn=(lambda: os.sched_setaffinity(0, {t.fwd_cpu})) if t.fwd_cpu is not None else None)
            time.sleep(0.3)
            if self.sw.poll() is not None:
                raise BenchError(f"p4sec switch exited at start: {self.log_tail()}")
            env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "python")] + [
                p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
            self.ctl = subprocess.Popen(["ip", "netns", "exec", t.m, sys.executable, "-c", CONTROL, f"127.0.0.1:{port}"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True, env=env,
                                        preexec_fn=lambda: os.sched_setaffinity(0, t.cpus))
            self._reply("start")
        except BaseException:
            self.close()
            raise

    def log_tail(self):
        self.log.flush()
        return self.log_path.read_text(errors="replace")[-1500:].strip()

    def _reply(self, what):
        line = self.ctl.stdout.readline()
        if not line:
            raise BenchError(f"switch control ({what}): the control client exited: {self.log_tail()}")
        r = json.loads(line)
        if not r.get("ok"):
            dead = "" if self.sw.poll() is None else f" (p4sec switch exited: {self.log_tail()})"
            raise BenchError(f"switch control ({what}): {r.get('error')}{dead}")
        return r

    def call(self, op, **kw):
        self.ctl.stdin.write(json.dumps(dict(kw, op=op)) + "\n")
        self.ctl.stdin.flush()
        return self._reply(op)

    def close(self):
        if self.ctl:
            with contextlib.suppress(Exception):
                self.ctl.stdin.close()
                self.ctl.wait(timeout=10)
            if self.ctl.poll() is None:
                self.ctl.kill()
        if self.sw:
            self.sw.terminate()
            try:
                self.sw.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.sw.kill()
                self.sw.wait()
        self.log.close()


def free_port_in(netns):
    with in_netns(netns):
        s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Netfilter:
    name = "netfilter"

    def __init__(self, t, workdir):
        self.t, self.workdir = t, workdir
        t.kernel_forwarding(True)

    def load(self, n, path):
        doms = dpi.read_list(path.read_text()) if n else []
        rules = "".join(f'-A FORWARD -m string --algo bm --string "{d}" -j DROP\n' for d in doms)
        t0 = time.perf_counter()
        ns(self.t.m, "iptables-restore", input=f"*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n{rules}COMMIT\n")
        secs = time.perf_counter() - t0
        count = sum(1 for l in ns(self.t.m, "iptables", "-S", "FORWARD").stdout.splitlines()
                    if l.startswith("-A FORWARD") and "--string" in l)
        if count != n:
            raise BenchError(f"netfilter: {count} string rules in FORWARD after loading {n}")
        return {"rules": count, "load_seconds": secs}

    def close(self):
        ns(self.t.m, "iptables", "-F", check=False)
        self.t.kernel_forwarding(False)


class Fast:
    name = "fast"

    def __init__(self, t, p4sec_bin, workdir, out):
        self.sw = P4secSwitch(t, p4sec_bin, workdir)
        try:
            self.sw.call("fast_setup", out=str(out))
        except BaseException:
            self.sw.close()
            raise

    def load(self, n, path):
        r = self.sw.call("fast_load", path=str(path) if n else None)
        return {"states": r["states"], "load_seconds": r["seconds"]}

    def counters(self):
        """uf_stats: inspected and passed, blocked, not inspected, no route (cumulative over the run)."""
        return dict(zip(("passed", "blocked", "not_inspected", "no_route"), self.sw.call("counters", name="UfIngress.uf_stats", n=4)["counters"]))

    def close(self):
        self.sw.close()


class Recirc:
    name = "recirc"

    def __init__(self, t, p4sec_bin, workdir, out):
        self.out = out
        self.sw = P4secSwitch(t, p4sec_bin, workdir)

    def load(self, n, path):
        r = self.sw.call("recirc_load", out=str(self.out), path=str(path) if n else None)
        return {"states": r["states"], "dfa_entries": r["dfa_entries"], "load_seconds": r["seconds"]}

    def counters(self):
        """ufr_stats since this list was loaded: passed, blocked, not inspected, scanner passes, waiting passes."""
        return dict(zip(("passed", "blocked", "not_inspected", "scanner_passes", "waiting_passes"),
                        self.sw.call("counters", name="UfrIngress.ufr_stats", n=5)["counters"]))

    def close(self):
        self.sw.close()


# ------------------------------------------------------------------------------------------------ the run

def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, int(round(q * (len(xs) - 1)))))]


def combine_throughput(ms):
    """The median over rounds of the arrival rate (and of the offered rate); frames counted in all rounds."""
    return {"pps": statistics.median(m["pps"] for m in ms), "best_pps": max(m["pps"] for m in ms),
            "offered_pps": statistics.median(m["offered_pps"] for m in ms),
            "forwarded": sum(m["forwarded"] for m in ms), "sent": sum(m["sent"] for m in ms),
            "round_pps": [m["pps"] for m in ms], "round_sub_window_pps": [m["sub_window_pps"] for m in ms]}


def recirc_entries(n, cache={}):
    if n not in cache:
        cache[n] = sum(1 for _ in dpi.Dfa(dpi.generated_domains(n), payload=True).entries()) if n else 0
    return cache[n]


def run(args, p4sec_bin, log):
    work = pathlib.Path(tempfile.mkdtemp(prefix="p4sec-bench-dpi-"))
    try:
        return run_in(work, args, p4sec_bin, log)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_in(work, args, p4sec_bin, log):
    if {"fast", "recirc"} & set(args.systems):
        # the whole run uses one copy of the binary, even if the tree is rebuilt meanwhile
        shutil.copy2(p4sec_bin, work / "p4sec")
        p4sec_bin = str(work / "p4sec")
    counts = sorted(set([0] + args.domains + [args.flow_domains]))
    biggest = max(counts)
    all_domains = dpi.generated_domains(biggest)
    lists = {}
    for n in counts:
        lists[n] = work / f"domains-{n}.txt"
        lists[n].write_text("".join(d + "\n" for d in all_domains[:n]))
    good_host = choose_good_host(all_domains)
    progs = {}
    for sysname, prog in (("fast", "url_filter_fast.p4"), ("recirc", "url_filter.p4")):
        if sysname in args.systems:
            progs[sysname] = work / sysname
            sh(p4sec_bin, "compile", str(ROOT / "programs" / prog), "-o", str(progs[sysname]))
    res = {"cells": [], "flows": [], "skipped": [], "good_host": good_host}
    if {"fast", "recirc"} & set(args.systems):
        import hashlib
        res["p4sec_binary"] = {"path": args.p4sec, "sha256": hashlib.sha256(pathlib.Path(p4sec_bin).read_bytes()).hexdigest()[:16],
                               "modified": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(os.stat(p4sec_bin).st_mtime))}
    t = Topology()
    traffic = None
    nice = os.getpriority(os.PRIO_PROCESS, 0)
    try:
        os.sched_setaffinity(0, {t.cpus[0]})
        # the sender, and the switch and its control client started from here, at nice -10: other load on a shared
        # machine disturbs the measurement less (the kernel's softirq work of netfilter has priority anyway)
        os.setpriority(os.PRIO_PROCESS, 0, min(nice, NICE))
        traffic = Traffic(t)
        dst, src = t.mac[t.s1], t.mac[t.h1]
        load_frames = [http_frame(dst, src, good_host, SEQ_LOAD + i) for i in range(64)]
        lat_frames = [http_frame(dst, src, good_host, SEQ_LAT + i) for i in range(args.samples)]
        flow_frames = {}
        for nf in args.flows:
            per = [http_frame(dst, src, good_host, SEQ_LOAD + i, *flow_tuple(i)) for i in range(nf)]
            flow_frames[nf] = [per[i % nf] for i in range(max(nf, 1024))]
        probe = [0]

        def measure(system, sysname, n):
            """One round of one configuration: the listed-domain check, throughput, latency."""
            m = {}
            if n:
                probe[0] += 1
                listed = all_domains[(n - 1) // 2]
                blocked = [http_frame(dst, src, h, SEQ_BLOCK + probe[0] * 16 + i) for i, h in enumerate([listed, "www." + listed])]
                chk = traffic.check_blocking(blocked, http_frame(dst, src, good_host, SEQ_GOOD + probe[0]))
                chk["listed_domain"] = listed
                if not chk["ok"]:
                    extra = f"; switch counters {system.counters()}" if hasattr(system, "counters") else ""
                    raise BenchError(f"{LABEL[sysname]} with {n} domains: listed-domain check failed: {chk}{extra}")
                m["block_check"] = chk
            m["throughput"] = traffic.blast(load_frames, args.seconds)
            traffic.settle()
            lat, lost = traffic.latency(lat_frames)
            if len(lat) < max(1, len(lat_frames) // 2):
                raise BenchError(f"{LABEL[sysname]} with {n} domains: {lost} of {len(lat_frames)} latency frames lost")
            m["latency_us"] = {"median": statistics.median(lat), "p99": pct(lat, 0.99), "min": min(lat), "samples": len(lat), "lost": lost}
            if hasattr(system, "counters"):
                m["switch_counters"] = system.counters()
            return m

        for sysname in args.systems:
            log(f"[{LABEL[sysname]}]")
            if sysname == "netfilter":
                system = Netfilter(t, work)
            elif sysname == "fast":
                system = Fast(t, p4sec_bin, work, progs["fast"])
            else:
                system = Recirc(t, p4sec_bin, work, progs["recirc"])
            try:
                sizes = []
                for n in sorted(set([0] + args.domains)):
                    if sysname == "recirc" and recirc_entries(n) > DFA_TABLE_SIZE:
                        res["skipped"].append({"system": sysname, "domains": n, "reason":
                                               f"{recirc_entries(n):,} DFA entries exceed the dfa table ({DFA_TABLE_SIZE:,})"})
                        log(f"  {n:>6} domains: skipped ({recirc_entries(n):,} DFA entries > table size {DFA_TABLE_SIZE:,})")
                    else:
                        sizes.append(n)
                # rounds interleaved over the list sizes; each figure is the median over the rounds
                rounds = {n: [] for n in sizes}
                infos = {}
                for r in range(args.rounds):
                    for n in sizes:
                        infos[n] = system.load(n, lists[n])
                        m = measure(system, sysname, n)
                        rounds[n].append(m)
                        tp, lt = m["throughput"], m["latency_us"]
                        log(f"  round {r + 1}/{args.rounds} {n:>6} domains: {tp['pps'] / 1e3:9.1f} kpps (offered {tp['offered_pps'] / 1e3:.0f}k), "
                            f"latency median {lt['median']:8.1f} us, p99 {lt['p99']:8.1f} us"
                            + (f", load {infos[n]['load_seconds']:.1f} s" if "load_seconds" in infos[n] else ""))
                baseline = None
                for n in sizes:
                    ms = rounds[n]
                    cell = {"system": sysname, "domains": n, "config": infos[n], "rounds": len(ms),
                            "throughput": combine_throughput([m["throughput"] for m in ms]),
                            "latency_us": {"median": statistics.median(m["latency_us"]["median"] for m in ms),
                                           "p99": statistics.median(m["latency_us"]["p99"] for m in ms),
                                           "min": min(m["latency_us"]["min"] for m in ms),
                                           "samples": sum(m["latency_us"]["samples"] for m in ms),
                                           "lost": sum(m["latency_us"]["lost"] for m in ms),
                                           "round_medians": [m["latency_us"]["median"] for m in ms],
                                           "round_p99s": [m["latency_us"]["p99"] for m in ms]}}
                    if n:
                        chks = [m["block_check"] for m in ms]
                        cell["block_check"] = {"ok": all(c["ok"] for c in chks), "listed_domain": chks[0]["listed_domain"],
                                               "blocked_sent": sum(c["blocked_sent"] for c in chks),
                                               "blocked_arrived": sum(c["blocked_arrived"] for c in chks),
                                               "unlisted_arrived": all(c["unlisted_arrived"] for c in chks), "checks": len(chks)}
                    if "switch_counters" in ms[-1]:
                        cell["switch_counters"] = ms[-1]["switch_counters"]
                    if n == 0:
                        baseline = cell["latency_us"]
                    if baseline:
                        cell["added_latency_us"] = {"median": cell["latency_us"]["median"] - baseline["median"],
                                                    "p99": cell["latency_us"]["p99"] - baseline["p99"]}
                    res["cells"].append(cell)
                fd = args.flow_domains
                if sysname == "recirc" and recirc_entries(fd) > DFA_TABLE_SIZE:
                    fd = max([n for n in counts if recirc_entries(n) <= DFA_TABLE_SIZE], default=0)
                if args.flows:
                    system.load(fd, lists[fd])
                    fr = {nf: [] for nf in args.flows}
                    for r in range(args.rounds):
                        for nf in args.flows:
                            tp = traffic.blast(flow_frames[nf], args.seconds)
                            traffic.settle()
                            fr[nf].append(tp)
                            log(f"  round {r + 1}/{args.rounds} {nf:>6} flows ({fd} domains): {tp['pps'] / 1e3:9.1f} kpps "
                                f"(offered {tp['offered_pps'] / 1e3:.0f}k)")
                    for nf in args.flows:
                        res["flows"].append({"system": sysname, "flows": nf, "domains": fd, "rounds": len(fr[nf]),
                                             "throughput": combine_throughput(fr[nf])})
            finally:
                system.close()
    finally:
        os.sched_setaffinity(0, t.cpus)
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, 0, nice)
        if traffic:
            traffic.close()
        t.close()
    return res


# ------------------------------------------------------------------------------------------------ report

def cell(res, system, n):
    return next((c for c in res["cells"] if c["system"] == system and c["domains"] == n), None)


def targets(res, args):
    out = []
    top = max(args.domains)
    nf, fa = cell(res, "netfilter", top), cell(res, "fast", top)
    if nf and fa:
        ratio = fa["throughput"]["pps"] / nf["throughput"]["pps"] if nf["throughput"]["pps"] else float("inf")
        out.append({"target": f"fast >= 10x netfilter throughput at {top} domains", "value": ratio, "threshold": 10.0,
                    "verdict": "PASS" if ratio >= 10 else "MISS", "note": "" if top == 5000 else "(target is stated at 5000)"})
    for s in ("fast", "recirc"):
        meds = [c["latency_us"]["median"] for c in res["cells"] if c["system"] == s and c["domains"] > 0]
        if len(meds) >= 2:
            ratio = max(meds) / min(meds)
            out.append({"target": f"{s} latency flat in the number of domains (max/min median over {len(meds)} lists <= 1.5)",
                        "value": ratio, "threshold": 1.5, "verdict": "PASS" if ratio <= 1.5 else "MISS",
                        "note": "" if s == "fast" else "(informative: the issue's target names p4sec)"})
    return out


def report(res, args):
    systems = args.systems
    counts = sorted(set([0] + args.domains))
    print(f"\nURL filtering: HTTP GET frames ({len(http_request(res['good_host']))}-byte requests) through namespace M, "
          f"{args.seconds:g} s per throughput cell, {args.samples} latency samples per cell; medians over {args.rounds} round(s) "
          f"interleaved over the list sizes")
    print("throughput (kpps arriving at B; median over rounds, [best round]):")
    print(f"  {'domains':>8} " + " ".join(f"{s:>18}" for s in systems) + ("  fast/netfilter" if {"fast", "netfilter"} <= set(systems) else ""))

    def tput(t):
        return f"{t['pps'] / 1e3:.1f} [{t['best_pps'] / 1e3:.1f}]".rjust(18) if args.rounds > 1 else f"{t['pps'] / 1e3:>18.1f}"

    for n in counts:
        row = []
        for s in systems:
            c = cell(res, s, n)
            row.append(tput(c["throughput"]) if c else f"{'-':>18}")
        extra = ""
        a, b = cell(res, "fast", n), cell(res, "netfilter", n)
        if a and b and b["throughput"]["pps"]:
            extra = f"  {a['throughput']['pps'] / b['throughput']['pps']:>13.1f}x"
        print(f"  {n:>8} " + " ".join(row) + extra)
    print("latency per packet A -> B (us, median / p99; added = minus the same system with 0 domains):")
    print(f"  {'domains':>8} " + " ".join(f"{s:>24}" for s in systems))
    for n in counts:
        row = []
        for s in systems:
            c = cell(res, s, n)
            if not c:
                row.append(f"{'-':>24}")
                continue
            l = c["latency_us"]
            row.append(f"{l['median']:>9.1f} / {l['p99']:>8.1f}  " + (f"({c['added_latency_us']['median']:+.0f})".rjust(9) if n else " " * 9)[-9:])
        print(f"  {n:>8} " + " ".join(f"{x:>24}" for x in row))
    if res["flows"]:
        fl = sorted({f["flows"] for f in res["flows"]})
        print("throughput over parallel flows (kpps; domains: " +
              ", ".join(f"{s} {next(f['domains'] for f in res['flows'] if f['system'] == s)}" for s in systems
                        if any(f["system"] == s for f in res["flows"])) + "):")
        print(f"  {'flows':>8} " + " ".join(f"{s:>18}" for s in systems))
        for n in fl:
            row = []
            for s in systems:
                f = next((f for f in res["flows"] if f["system"] == s and f["flows"] == n), None)
                row.append(tput(f["throughput"]) if f else f"{'-':>18}")
            print(f"  {n:>8} " + " ".join(row))
    for s in res["skipped"]:
        print(f"  skipped: {s['system']} with {s['domains']} domains: {s['reason']}")
    print("listed-domain checks (a request for a listed name dropped, an unlisted one forwarded): "
          f"{sum(1 for c in res['cells'] if 'block_check' in c)} configuration(s), all passed")
    print("targets:" if res["targets"] else "targets: none applicable (they need netfilter and fast, or two list sizes)")
    for tg in res["targets"]:
        print(f"  {tg['verdict']}: {tg['target']}: {tg['value']:.2f} {tg['note']}".rstrip())


def plot(res, args, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    colors = {"netfilter": "tab:red", "fast": "tab:blue", "recirc": "tab:green"}
    fig, ax = plt.subplots(1, 3, figsize=(15, 4.4))
    for s in args.systems:
        cs = [c for c in res["cells"] if c["system"] == s and c["domains"] > 0]
        if cs:
            x = [c["domains"] for c in cs]
            ax[0].plot(x, [c["throughput"]["pps"] / 1e3 for c in cs], "o-", color=colors[s], label=LABEL[s])
            ax[1].plot(x, [c["latency_us"]["median"] for c in cs], "o-", color=colors[s], label=f"{LABEL[s]}, median")
            ax[1].plot(x, [c["latency_us"]["p99"] for c in cs], "x--", color=colors[s], alpha=0.6, label=f"{s}, p99")
        fs = [f for f in res["flows"] if f["system"] == s]
        if fs:
            ax[2].plot([f["flows"] for f in fs], [f["throughput"]["pps"] / 1e3 for f in fs], "o-", color=colors[s],
                       label=f"{LABEL[s]} ({fs[0]['domains']} domains)")
    ax[0].set(xscale="log", yscale="log", xlabel="listed domains", ylabel="throughput (kpps)", title="throughput vs list size")
    ax[1].set(xscale="log", yscale="log", xlabel="listed domains", ylabel="latency A -> B (us)", title="latency per packet vs list size")
    ax[2].set(xscale="log", yscale="log", xlabel="parallel flows", ylabel="throughput (kpps)", title="throughput vs parallel flows")
    for a in ax:
        a.grid(True, which="both", alpha=0.3)
        a.legend(fontsize=7)
    fig.suptitle(f"URL filtering, HTTP GET frames, veth namespaces, {os.cpu_count()} cores ({platform.node() or 'host'})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------------------------------------ command line

def int_list(text, name, lo):
    try:
        xs = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise BenchError(f"--{name}: expected comma-separated integers, got {text!r}")
    if not xs:
        raise BenchError(f"--{name}: empty list")
    if any(x < lo for x in xs):
        raise BenchError(f"--{name}: values must be >= {lo}, got {text!r}")
    return sorted(set(xs))


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m p4sec.bench.dpi", description=__doc__.splitlines()[0])
    ap.add_argument("--domains", default="1,10,100,1000,5000", help="list sizes (comma-separated)")
    ap.add_argument("--flows", default="1,10,100,1000,10000", help="parallel flow counts (comma-separated)")
    ap.add_argument("--flow-domains", type=int, help="list size for the flow runs (default: the largest --domains)")
    ap.add_argument("--seconds", type=float, default=2.0, help="measurement window per throughput cell")
    ap.add_argument("--samples", type=int, default=300, help="latency frames per configuration and round")
    ap.add_argument("--rounds", type=int, default=3, help="rounds over all configurations; figures are medians over rounds")
    ap.add_argument("--systems", default=",".join(SYSTEMS), help="some of netfilter,fast,recirc")
    ap.add_argument("--json", help="write all figures as JSON")
    ap.add_argument("--plot", help="write a PNG plot")
    ap.add_argument("--p4sec", default=str(ROOT / "target" / "release" / "p4sec"), help="the p4sec binary")
    args = ap.parse_args(argv)
    try:
        args.domains = int_list(args.domains, "domains", 1)
        args.flows = int_list(args.flows, "flows", 1)
        if max(args.domains) > 200000:
            raise BenchError("--domains: at most 200000")
        if max(args.flows) > 50000:
            raise BenchError("--flows: at most 50000")
        if args.flow_domains is None:
            args.flow_domains = max(args.domains)
        if not (0 <= args.flow_domains <= 200000):
            raise BenchError("--flow-domains: must be 0..200000")
        if not (0 < args.seconds <= 600):
            raise BenchError(f"--seconds: must be in (0, 600], got {args.seconds:g}")
        if not (1 <= args.rounds <= 50):
            raise BenchError(f"--rounds: must be 1..50, got {args.rounds}")
        if not (10 <= args.samples <= 100000):
            raise BenchError(f"--samples: must be 10..100000, got {args.samples}")
        systems = [s.strip() for s in args.systems.split(",") if s.strip()]
        bad = [s for s in systems if s not in SYSTEMS]
        if bad or not systems:
            raise BenchError(f"--systems: unknown {', '.join(bad) or '(empty)'}; choose from {', '.join(SYSTEMS)}")
        args.systems = [s for s in SYSTEMS if s in systems]
        p4sec_bin = str(pathlib.Path(args.p4sec).resolve())
        if {"fast", "recirc"} & set(args.systems) and not os.access(p4sec_bin, os.X_OK):
            raise BenchError(f"--p4sec: {args.p4sec} is not an executable (build it: cargo build --release)")
        for p in (args.json, args.plot):
            if p and not pathlib.Path(p).resolve().parent.is_dir():
                raise BenchError(f"output directory of {p} does not exist")
        if os.geteuid() != 0:
            raise BenchError("needs root (network namespaces, iptables)")
        for tool in ["ip"] + (["iptables", "iptables-restore"] if "netfilter" in args.systems else []):
            if not shutil.which(tool):
                raise BenchError(f"{tool} not found (apt-get install {'iproute2' if tool == 'ip' else 'iptables'})")
        if args.plot:
            try:
                import matplotlib  # noqa: F401
            except ImportError:
                raise BenchError("--plot needs matplotlib (pip install matplotlib)")
        t0 = time.time()
        res = run(args, p4sec_bin, lambda s: print(s, flush=True))
    except (BenchError, CommandError) as e:
        print(f"bench.dpi: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("bench.dpi: interrupted", file=sys.stderr)
        return 130
    res["targets"] = targets(res, args)
    report(res, args)
    if args.plot:
        plot(res, args, args.plot)
        print(f"plot: {args.plot}")
    if args.json:
        doc = {"benchmark": "url_filter_dpi", "issue": 7,
               "machine": {"cores": os.cpu_count(), "kernel": platform.release(), "python": platform.python_version(),
                           "loadavg_at_end": open("/proc/loadavg").read().split()[:3],
                           "sender": "in-process AF_PACKET (one Python thread)", "links": "veth pairs between namespaces"},
               "parameters": {"domains": args.domains, "flows": args.flows, "flow_domains": args.flow_domains,
                              "seconds": args.seconds, "samples": args.samples, "rounds": args.rounds, "systems": args.systems,
                              "request_bytes": len(http_request(res["good_host"]))},
               "labels": {s: LABEL[s] for s in args.systems}, "elapsed_seconds": time.time() - t0, **res}
        pathlib.Path(args.json).write_text(json.dumps(doc, indent=1))
        print(f"json: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
