"""URL filtering benchmark (`python -m bench.dpi`): the HTTP request frames it sends and the traffic
generator that sends them and measures latency, blocking and throughput."""
import select
import socket
import struct
import time
from p4sec import dpi
from p4sec.infra.netns import in_netns
from bench.dpi_common import GOOD_HOSTS, SRC_IP, DST_IP, SO_TIMESTAMPNS, ETH_P_ALL, BenchError, LinkStats


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
